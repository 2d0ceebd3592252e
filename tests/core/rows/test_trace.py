"""An imported trace's rows as named tables: stored rows read back whole and in order, rows stored before newer keys
read with defaults, and the text the CLI prints reads the fields."""

from __future__ import annotations

import dataclasses

import pytest

from core.rows.trace import BusyBin, Kernel, LaunchDelayBin, TraceStep, TraceTables
from core.rows.trace_diff import DiffTables, KernelChange
from core.rows.trace_ranks import Rank, RankTables

# rows of `trace tests/data/workload/kineto_v100_resnet50_workers0_step.json.gz`, copied from the stored run (the
# step cut to the keys of a run stored before the GPU windows, the busy bin to two shares)
GROUP = {"kind": "group", "group": "matmul", "count": 38, "total_us": 7414.0, "share": 0.07368462899282434,
         "kernel_share": 0.07519574830621932}  # fmt: skip
MEMORY = {"kind": "group", "group": "memory", "count": 2, "total_us": 2022.0, "share": 0.02, "kernel_share": None}
KERNEL = {"kind": "kernel", "rank": 1, "name": "void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, false>",
          "group": "convolution", "count": 27, "total_us": 13499.0, "mean_us": 499.962962962963, "max_us": 1014.0,
          "share": 0.13416088572621201}  # fmt: skip
IDLE = {"kind": "idle", "stream": 7, "activities": 1516, "host_wait_us": 16475.0, "kernel_wait_us": 1728.0,
        "other_wait_us": 0.0}  # fmt: skip
LAUNCH = {"kind": "launch_delay", "from_us": 10.0, "to_us": 20.0, "count": 260, "launch_bound": 259,
          "graph_launched": 0, "shorter_than_launch_call": 177}  # fmt: skip
STEP = {"kind": "step", "step": 7, "wall_us": 176918.0, "gpu_window_us": 118821.0, "activities": 1516,
        "busy_us": 100618.0, "idle_us": 18203.0, "kernel_time_us": 98596.0, "compute_union_us": 98596.0,
        "convolution_us": 59234.0, "communication_us": 0.0, "host_wait_us": 16475.0}  # fmt: skip
BUSY = {"kind": "busy", "t_ms": 0.0, "busy_share": 0.9999999999999687, "memcpy_share": 0.9999999999999687}
RANK = {"kind": "rank", "rank": 1, "file": "rank1.json.gz", "world_size": 2, "backend": "nccl", "device": 0,
        "device_name": None, "kernel_time_us": 900.0, "busy_us": 950.0, "span_us": 1000.0, "idle_us": 50.0,
        "compute_us": 700.0, "communication_us": 300.0, "exposed_communication_us": 200.0, "steps": 0}  # fmt: skip


def test_each_stored_row_reads_back_whole_with_its_keys_in_order():
    for row in (GROUP, MEMORY, KERNEL, IDLE, LAUNCH, STEP, BUSY):
        tables = TraceTables.from_rows([row])
        assert tables.rows() == [row]
        assert list(tables.rows()[0]) == list(row)
    assert RankTables.from_rows([RANK]).rows() == [RANK]


def test_the_rows_split_once_into_their_tables_and_come_back_in_the_stored_order():
    rows = [GROUP, MEMORY, KERNEL, IDLE, LAUNCH, STEP, BUSY]
    tables = TraceTables.from_rows(rows)
    assert [g.group for g in tables.groups] == ["matmul", "memory"]
    assert tables.kernels[0].total_us == 13499.0 and tables.steps[0].step == 7
    assert (len(tables.idle), len(tables.launch_delays), len(tables.busy), tables.collectives) == (1, 1, 1, ())
    assert tables.rows() == rows
    odd = {"kind": "from a later version", "x": 1}
    assert TraceTables.from_rows([GROUP, odd]).rows() == [GROUP, odd]  # a kind no table holds is kept


def test_rows_built_a_column_at_a_time_are_the_stored_rows():
    second = {"kind": "busy", "t_ms": 0.5, "busy_share": 0.25, "memcpy_share": 0.0}
    bins = BusyBin.series({k: [BUSY[k], second[k]] for k in ("t_ms", "busy_share", "memcpy_share")})
    assert [b.to_row() for b in bins] == [BUSY, second]
    assert [list(b.to_row()) for b in bins] == [list(BUSY)] * 2
    assert bins[1].busy_share == 0.25 and bins[1].extra == {"memcpy_share": 0.0}
    assert BusyBin.series({"busy_share": [0.5]})[0].to_row() == {"kind": "busy", "busy_share": 0.5}
    assert BusyBin.series({"memcpy_share": [0.5]})[0].extra == {"memcpy_share": 0.5}  # no named field at all
    assert BusyBin.series({}) == ()
    with pytest.raises(ValueError, match="different lengths"):
        BusyBin.series({"t_ms": [0.0, 1.0], "busy_share": [1.0]})
    with pytest.raises(ValueError, match="spread keys"):
        TraceStep.series({"convolution_us": [1.0]})


def test_compute_has_one_name_over_its_two_stored_ones():
    """A trace's step stores the union of compute kernels as compute_union_us, a rank as compute_us."""
    assert TraceStep.from_row(STEP).compute_us == 98596.0
    assert Rank.from_row(RANK).compute_us == 700.0
    assert "compute_union_us" in TraceStep.from_row(STEP).to_row()
    step = TraceStep.from_row(STEP)
    assert step.groups == {"convolution": 59234.0, "communication": 0.0}  # each group's kernel time, by its name
    assert step.communication_us is None  # the union of collective kernels: stored as communication_union_us


# the step of `trace tests/data/workload/tracelens_h100_timesformer_video.json.gz`, a host's step (long decimals cut)
HOST_STEP = {"kind": "step", "step": 6, "wall_us": 382535.558, "gpu_window_us": 159992.427, "activities": 534,
             "start_us": 0.755, "gpu_window_start_us": 218121.099, "host_before_first_kernel_us": 218120.344,
             "host_after_last_kernel_us": 4422.787, "busy_us": 158433.174, "idle_us": 1559.253,
             "kernel_time_us": 154855.595, "compute_union_us": 154855.595, "communication_union_us": 0.0,
             "exposed_communication_us": 0.0, "matmul_us": 53489.573, "attention_us": 68781.297,
             "communication_us": 0.0, "memory_us": 3577.579, "host_wait_us": 724.573, "kernel_wait_us": 834.68,
             "idle_host_copy_us": 649.623, "idle_host_sync_us": 7.009, "idle_host_other_us": 902.621,
             "idle_host_none_us": 0.0, "wall_idle_copy_us": 713.038, "wall_idle_sync_us": 20.1,
             "wall_idle_other_us": 223368.397, "wall_idle_none_us": 0.0}  # fmt: skip


def test_a_step_s_figures_by_group_and_by_cause_are_mappings_read_by_name():
    step = TraceStep.from_row(HOST_STEP)
    assert step.groups == {"matmul": 53489.573, "attention": 68781.297, "communication": 0.0, "memory": 3577.579}
    assert step.window_causes == {"device→host copy": 649.623, "synchronisation": 7.009, "other CPU work": 902.621,
                                  "no CPU event": 0.0}  # fmt: skip
    assert step.wall_causes["other CPU work"] == 223368.397 and "allocator" not in step.wall_causes
    assert (step.communication_us, step.host_before_first_kernel_us, step.start_us) == (0.0, 218120.344, 0.755)
    assert step.extra == {"activities": 534, "kernel_wait_us": 834.68}
    assert step.to_row() == HOST_STEP and list(step.to_row()) == list(HOST_STEP)


def test_figures_added_to_a_step_keep_the_stored_order():
    """The engine adds each step's causes after its own figures, as the stored runs have them; a figure the row
    has already keeps its place."""
    own = {k: v for k, v in HOST_STEP.items() if not k.startswith(("idle_host_", "wall_idle_"))}
    step = TraceStep.from_row(own).adding(window_causes={"device→host copy": 649.623, "synchronisation": 7.009})
    step = step.adding(window_causes={"device→host copy": 1.0}, wall_causes={"no CPU event": 2.0})
    assert list(step.to_row())[len(own) :] == ["idle_host_copy_us", "idle_host_sync_us", "wall_idle_none_us"]
    assert step.to_row()["idle_host_copy_us"] == 1.0 and step.window_causes["synchronisation"] == 7.009
    fresh = TraceStep(step=1, wall_us=5.0).adding(groups={"matmul": 3.0})  # built, not read: the fields' order
    assert list(fresh.to_row())[:3] == ["kind", "step", "wall_us"] and fresh.to_row()["matmul_us"] == 3.0


def test_the_step_text_reads_the_causes_by_name():
    from core.workload.trace.text import step_host_text

    step = TraceStep.from_row(HOST_STEP)
    assert step_host_text(step) == "; the host: other CPU work 0.903 ms, device→host copy 0.650 ms"
    moved = step.adding(window_causes={"synchronisation": 5000.0})
    assert step_host_text(moved) == "; the host: synchronisation 5.000 ms, other CPU work 0.903 ms"


def test_rows_stored_before_newer_keys_read_with_defaults():
    old_step = {"kind": "step", "step": 3, "wall_us": 900.0}
    step = TraceStep.from_row(old_step)
    assert (step.gpu_window_us, step.kernel_time_us, step.host_wait_us) == (None, None, None)
    assert (step.groups, step.window_causes, step.wall_causes, step.host_before_first_kernel_us) == ({}, {}, {}, None)
    assert step.to_row() == old_step  # nothing added on the way back
    old_bin = {k: v for k, v in LAUNCH.items() if k != "shorter_than_launch_call"}
    assert LaunchDelayBin.from_row(old_bin).shorter_than_launch_call is None
    assert Kernel.from_row({"kind": "kernel", "name": "k"}).total_us == 0.0


def _meta(rows: list[dict]) -> dict:
    return {"gpu_activities": 1, "step_basis": "CPU ProfilerStep spans", "kernel_count": 1, "rules": []} | {
        "events": 10, "device": 0, "devices": [0], "streams": [7], "kernel_time_us": 1000.0, "busy_us": 1000.0,
        "span_us": 2000.0, "idle_us": 1000.0, "idle_share": 0.5, "compute_union_us": 1000.0, "copy_union_us": 0.0,
        "communication_union_us": 0.0, "exposed_communication_us": 0.0, "compute_and_communication_us": 0.0,
        "compute_and_copy_us": 0.0,
    }  # fmt: skip


def test_the_trace_text_reads_the_fields():
    from core.workload.trace.text import report_lines

    tables = TraceTables.from_rows([GROUP, KERNEL, STEP])
    text = "\n".join(report_lines(_meta([]), tables))
    assert "13.499 ms" in text  # the kernel's 13,499 µs
    assert "step     7: wall 176.918 ms, kernels 98.596 ms; GPU window 118.821 ms: busy 100.618 ms" in text
    slower = dataclasses.replace(tables, kernels=(dataclasses.replace(tables.kernels[0], total_us=20000.0),))
    assert "20.000 ms" in "\n".join(report_lines(_meta([]), slower))
    old = TraceTables.from_rows([{"kind": "step", "step": 3, "wall_us": 900.0}])
    assert "step     3: wall 0.900 ms, kernels 0.000 ms, busy 0.000 ms" in "\n".join(report_lines(_meta([]), old))


def test_the_ranks_text_reads_the_fields():
    from core.workload.trace.text import ranks_lines

    other = RANK | {"rank": 0, "file": "rank0.json.gz", "compute_us": 500.0}
    meta = {"straggler_rank": 1, "ranks": [0, 1], "straggler": {"rank": 1, "compute_us": 700.0,
            "median_compute_us": 500.0, "margin_us": 200.0, "margin_pct": 40.0, "against": "others"}}  # fmt: skip
    lines = ranks_lines(meta, RankTables.from_rows([other, RANK]))
    assert lines[1].startswith("    0   500.0 µs") and lines[2].endswith("rank1.json.gz ← straggler")
    moved = RankTables.from_rows([other | {"compute_us": 800.0}, RANK])
    assert ranks_lines(meta, moved)[1].startswith("    0   800.0 µs")


def test_the_diff_text_reads_the_fields():
    from core.workload.trace.diff import GpuTime, TraceDiff
    from core.workload.trace.text import diff_lines

    kernel = {"kind": "kernel", "group": "matmul", "kernel": "gemm_#", "base_us": 1000.0, "new_us": 3000.0,
              "delta_us": 2000.0, "base_count": 1, "new_count": 1, "delta_pct": 200.0}  # fmt: skip
    assert KernelChange.from_row(kernel).to_row() == kernel
    total = GpuTime(base_us=1000.0, new_us=3000.0, delta_us=2000.0, delta_pct=200.0)
    said = diff_lines("a", "b", TraceDiff(DiffTables.from_rows([kernel]), total, [], "headline"), top=5)
    assert said[-1] == "  " + "     2.0 ms" + "  " + "     1.0 ms" + " → " + "     3.0 ms" + "  [matmul] gemm_#"

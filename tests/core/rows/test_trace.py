"""An imported trace's rows as named tables: stored rows read back whole and in order, rows stored before newer keys
read with defaults, and the text the CLI prints reads the fields."""

from __future__ import annotations

import dataclasses

from core.rows.trace import (
    DiffTables,
    Kernel,
    KernelChange,
    LaunchDelayBin,
    Rank,
    RankTables,
    TraceStep,
    TraceTables,
)

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


def test_compute_has_one_name_over_its_two_stored_ones():
    """A trace's step stores the union of compute kernels as compute_union_us, a rank as compute_us."""
    assert TraceStep.from_row(STEP).compute_us == 98596.0
    assert Rank.from_row(RANK).compute_us == 700.0
    assert "compute_union_us" in TraceStep.from_row(STEP).to_row()
    assert "communication_us" in TraceStep.from_row(STEP).extra  # the communication group's kernel time


def test_rows_stored_before_newer_keys_read_with_defaults():
    old_step = {"kind": "step", "step": 3, "wall_us": 900.0}
    step = TraceStep.from_row(old_step)
    assert (step.gpu_window_us, step.kernel_time_us, step.host_wait_us, step.get("convolution_us")) == (
        None,
        None,
        None,
        0.0,
    )
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
    from core.workload.trace.diff import TraceDiff
    from core.workload.trace.text import diff_lines

    kernel = {"kind": "kernel", "group": "matmul", "kernel": "gemm_#", "base_us": 1000.0, "new_us": 3000.0,
              "delta_us": 2000.0, "base_count": 1, "new_count": 1, "delta_pct": 200.0}  # fmt: skip
    assert KernelChange.from_row(kernel).to_row() == kernel
    total = {"base_us": 1000.0, "new_us": 3000.0, "delta_us": 2000.0, "delta_pct": 200.0}
    said = diff_lines("a", "b", TraceDiff(DiffTables.from_rows([kernel]), total, [], "headline"), top=5)
    assert said[-1] == "  " + "     2.0 ms" + "  " + "     1.0 ms" + " → " + "     3.0 ms" + "  [matmul] gemm_#"

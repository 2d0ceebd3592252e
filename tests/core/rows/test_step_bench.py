"""step-bench's named tables: rows stored by the engine read back and stored again key for key, a run stored
before stacks (the shipped H200 example) read with defaults, the speed-up by hand, and the views reading the
fields."""

import dataclasses
import json
from pathlib import Path

import pytest

from core.experiments.step_bench import answer_lines
from core.result import RunResult
from core.rows.step_bench import ConfigRow, StackSummary, StepBenchTables, with_speedups
from tests.conftest import ROOT

# rows of CPU runs stored by `python -m core step-bench …` (the file says which); the first row of each kind
ROWS = json.loads((Path(__file__).parent / "step_bench_rows.json").read_text())["rows"]
# recorded on an H200 before stacks existed: a single run (samples … groups) and a precision sweep
H200 = ROOT / "examples" / "nvidia-h200-2026-11-26.json"


def _h200(sweep: bool) -> RunResult:
    runs = json.loads(H200.read_text())["runs"]
    return RunResult.from_dict(
        next(r for r in runs if r["experiment"] == "step-bench" and bool(r["config"].get("sweep")) == sweep)
    )


def _every_row(tables: StepBenchTables) -> list:
    return [*tables.samples, *tables.phases, *tables.summaries, *tables.kernels, *tables.groups, *tables.configs]


def test_the_engine_s_rows_are_stored_again_key_for_key_in_their_order():
    tables = StepBenchTables.from_rows(ROWS)
    stored = [row.to_row() for row in _every_row(tables)]
    by_kind = sorted(
        ROWS, key=lambda r: ["sample", "phase", "summary", "kernel", "group", "precision", "grid"].index(r["kind"])
    )
    assert [list(r.items()) for r in stored] == [list(r.items()) for r in by_kind]


def test_the_tables_split_the_kinds_once():
    tables = StepBenchTables.from_rows(ROWS)
    counts = [len(t) for t in (tables.samples, tables.phases, tables.summaries, tables.kernels, tables.groups)]
    assert counts == [2, 2, 2, 2, 2]  # one of each kind for each of the two stacks
    assert [r.precision for r in tables.precisions] == ["fp32", "bf16-autocast", "fp8"]
    assert [r.stack for r in tables.grid] == ["course", "sdpa"] and all(r.in_grid for r in tables.grid)
    assert tables.stacks() == ["course", "sdpa+foreach", "sdpa"]
    assert not tables.precisions[2].ok and tables.precisions[2].step_ms_median is None


def test_a_run_stored_before_stacks_reads_as_the_course_s_with_defaults():
    single = StepBenchTables.from_run(_h200(sweep=False))
    summary = single.summaries[0]
    assert summary.stack is None and summary.stack_name == "course"
    assert summary.mfu_measured is None and summary.busy is None and summary.trace_findings == []
    assert summary.clocks["sm_clock_mhz"] > 0  # the NVML summary a GPU run stored, kept as a group
    assert len(single.samples) == 25 and len(single.kernels) == 30 and len(single.groups) == 12
    sweep = StepBenchTables.from_run(_h200(sweep=True))
    assert len(sweep.precisions) == 5 and len(sweep.samples) == 500 and not sweep.summaries


def _config(precision: str, ms: float | None, stack: str = "course", status: str = "ok") -> ConfigRow:
    return ConfigRow(stack=stack, precision=precision, model="tiny", status=status, step_ms={"step_ms_median": ms})


def test_the_speed_up_over_fp32_by_hand():
    rows = [
        _config("fp32", 10.0),
        _config("bf16-autocast", 4.0),
        _config("fp32", 8.0, stack="sdpa"),
        _config("bf16-autocast", 2.0, stack="sdpa"),
        _config("fp8", None, status="unsupported"),
    ]
    assert [r.speedup_vs_fp32 for r in with_speedups(rows)] == [1.0, 2.5, 1.0, 4.0, None]
    no_fp32 = [_config("bf16-autocast", 4.0)]
    assert with_speedups(no_fp32)[0].speedup_vs_fp32 is None
    assert "speedup_vs_fp32" not in with_speedups(no_fp32)[0].to_row()  # stored only where there is one


def test_a_summary_s_groups_keep_their_place_in_the_stored_row():
    summary = StackSummary(stack="course", precision="fp32", model="tiny", batch=1, context=16)
    with_clocks = dataclasses.replace(
        summary, clocks={"sm_clock_mhz": 1980}, profile={"busy": 0.5, "host_bound": False}
    )
    keys = list(with_clocks.to_row())
    assert keys.index("warmup_step_ms") < keys.index("sm_clock_mhz") < keys.index("peak_estimated_bytes")
    assert keys[-2:] == ["busy", "host_bound"]
    assert "busy" not in summary.to_row()  # not profiled: no busy share stored


@pytest.mark.parametrize(
    "field,value,says", [("busy", 0.42, "device busy 42%"), ("mfu_note", "no sheet", "no MFU (no sheet)")]
)
def test_the_answer_reads_the_fields(field, value, says):
    summary = StackSummary.from_row(next(r for r in ROWS if r["kind"] == "summary"))
    if field == "busy":
        summary = dataclasses.replace(summary, profile=dict(summary.profile) | {"busy": value})
    else:
        summary = dataclasses.replace(summary, mfu=None, mfu_note=value)
    assert says in answer_lines([summary.to_row()], {})[0]


def test_the_views_read_the_fields():
    pytest.importorskip("plotly")
    from render.plots.step_bench import cold_text, host_bound_stacks

    summary = StackSummary(first_step_ms=30.0, first_step_over_median=3.0)
    assert "**30.0 ms**, 3.0×" in cold_text(summary, None)
    assert "**12.0 ms**, 1.2×" in cold_text(
        dataclasses.replace(summary, first_step_ms=12.0, first_step_over_median=1.2), None
    )
    grid = ConfigRow(kind="grid", stack="course", precision="fp32", model="mini", busy=0.25)
    assert host_bound_stacks([grid]) == ["mini · course · fp32 (25% busy)"]
    assert host_bound_stacks([dataclasses.replace(grid, busy=0.9)]) == []


def test_the_meta_reads_its_traces_of_either_version():
    """A run of several stacks names a trace per stack; one stored before stacks names its one trace."""
    from core.result import RunResult
    from core.rows.step_bench import StepBenchMeta

    def meta_of(meta: dict) -> StepBenchMeta:
        return StepBenchMeta.from_run(RunResult("step-bench", {}, {"kind": "cpu"}, {}, "t", None, "ok", meta=meta))

    stacks = meta_of({"traces": {"course": "/a.json.gz", "today": None}, "trace_path": "/a.json.gz", "batch": 8})
    assert stacks.trace_files == {"course": "/a.json.gz", "today": None} and stacks.batch == 8
    old = meta_of({"trace_path": "/old.json.gz", "timing": None})
    assert old.trace_files == {"": "/old.json.gz"} and (old.timing, old.profile_measure, old.batch) == ("", "", None)

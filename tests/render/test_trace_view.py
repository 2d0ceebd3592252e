"""The trace view's tables and the host's share of the idle gaps, on hand-built runs."""

import pandas as pd
import pytest

pytest.importorskip("plotly")

from core.result import RunResult
from core.rows.trace_summary import IdleCauses, LaunchSummary, TraceSummary
from render import trace_view as view
from tests.factories import make_run


def stored(experiment: str, rows: list[dict], meta: dict | None = None) -> RunResult:
    return make_run(experiment, rows, meta)


def rank(i: int, compute_us: float) -> dict:
    times = dict.fromkeys(view.RANK_COLUMNS[3:], 1.0) | {"compute_us": compute_us}
    return {"kind": "rank", "rank": i, "file": f"rank-{i}.json", "device_name": "A100", "pid": 7, **times}


def test_host_wait_is_a_share_of_every_gap():
    causes = IdleCauses(host_wait_us=300.0, kernel_wait_us=100.0, other_wait_us=600.0)
    assert causes.host_wait_share == pytest.approx(0.3)
    assert IdleCauses().host_wait_share is None  # no gaps: no share


def test_the_rules_table_is_in_milliseconds():
    meta = {"rules": [{"rule": "gemm", "group": "matmul", "count": 12, "us": 2500.0, "pattern": "gemm|cutlass"}]}
    assert view.rules_table(TraceSummary.from_meta(meta)) == [
        {"rule": "gemm", "group": "matmul", "kernels": 12, "ms": 2.5}
    ]
    assert view.rules_table(TraceSummary.from_meta({})) == []  # stored before the rules


def test_a_kind_s_table_has_its_own_columns_without_the_kind():
    run = stored(
        "profiler-trace",
        [{"kind": "kernel", "name": "k1", "us": 5.0}, {"kind": "step", "step": 3, "wall_us": 900.0}],
    )
    assert view.trace_table(run, "kernels").to_dict("records") == [{"name": "k1", "us": 5.0}]
    assert view.trace_table(run, "steps").to_dict("records") == [{"step": 3.0, "wall_us": 900.0}]
    assert view.trace_table(stored("profiler-trace", []), "kernels").empty
    # a step the profiler stopped in before any kernel (the MI250 example's second) has no kernel time: "—", not nan
    cut = stored("profiler-trace", [{"kind": "step", "step": 1, "wall_us": 9.0, "kernel_time_us": 4.0},
                                    {"kind": "step", "step": 2, "wall_us": 0.5}])  # fmt: skip
    assert view.trace_table(cut, "steps")["kernel_time_us"].tolist() == ["4", "—"]


def test_each_rank_s_times_in_the_listed_columns():
    table = view.ranks_table(stored("profiler-trace-ranks", [rank(0, 10.0), rank(1, 20.0)]))
    assert table.columns.tolist() == view.RANK_COLUMNS  # pid is not listed
    assert table["compute_us"].tolist() == [10.0, 20.0]
    unnamed = [{k: v for k, v in rank(i, 5.0).items() if k != "device_name"} for i in (0, 1)]
    table = view.ranks_table(stored("profiler-trace-ranks", unnamed))  # files that name no GPU store no name
    assert table.columns.tolist() == view.RANK_COLUMNS and table["device_name"].tolist() == ["—", "—"]  # not nan


def test_each_step_s_wall_time_rank_by_rank_in_ms():
    steps = [
        {"kind": "step", "step": 551.0, "rank": 0.0, "wall_us": 1500.0},
        {"kind": "step", "step": 551.0, "rank": 1.0, "wall_us": 2500.0},
        {"kind": "step", "step": 552.0, "rank": 0.0, "wall_us": 1000.0},
        {"kind": "step", "step": 552.0, "rank": 1.0, "wall_us": 3000.0},
        {"kind": "step", "step": 553.0, "rank": 1.0, "wall_us": 500.0},
    ]
    walls = view.step_walls_ms(stored("profiler-trace-ranks", [rank(0, 1.0), *steps]))
    assert walls.index.tolist() == [551, 552, 553] and walls.columns.tolist() == ["rank 0", "rank 1"]
    assert walls.loc[[551, 552]].values.tolist() == [[1.5, 2.5], [1.0, 3.0]]
    assert pd.isna(walls.loc[553, "rank 0"]) and walls.loc[553, "rank 1"] == 0.5  # rank 0 has no step 553
    assert view.step_walls_ms(stored("profiler-trace-ranks", [rank(0, 1.0)])).empty  # no steps: no table


def test_the_launch_figure_says_what_it_measures():
    """A run stored before launch-bound was redefined holds HTA's short kernels under "launch_bound": named so. A
    trace whose every launch is a CUDA graph's gets no launch-bound share."""
    old = {"launched": 10, "launch_bound": 6, "launch_bound_share": 0.6, "launch_delay_p50_us": 5.0}
    assert view.launch_metric(LaunchSummary.from_dict(old))[:2] == ("Shorter than their launch call", "60.0%")
    graphs = {"launched": 4, "graph_launched": 4, "launch_bound": 0, "launch_bound_share": 0.0,
              "launch_wait_us": 0.0, "shorter_than_launch_call": 4, "shorter_than_launch_call_share": 1.0}  # fmt: skip
    label, value, _, about = view.launch_metric(LaunchSummary.from_dict(graphs))
    assert (label, value) == ("Launch-bound", "n/a: CUDA graphs") and "does not apply" in about


def test_counts_are_words_not_python_lists():
    from core.workload.trace.text import listed as _listed
    from render.trace_view import count_text

    assert (count_text([7], "stream"), count_text([0, 1, 2, 3], "GPU")) == ("1 stream", "4 GPUs")
    assert (_listed([7]), _listed([0, 2]), _listed([7, 23, 25])) == ("7", "0 and 2", "7, 23 and 25")


def test_what_each_rank_s_host_did_while_its_gpu_idled_in_ms():
    gaps = [
        {"kind": "host_gap", "rank": 0.0, "cause": "optimizer", "time_us": 1000.0},
        {"kind": "host_gap", "rank": 0.0, "cause": "data loading", "time_us": 500.0},
        {"kind": "host_gap", "rank": 1.0, "cause": "data loading", "time_us": 4000.0},
    ]
    table = view.host_gaps_ms(stored("profiler-trace-ranks", [rank(0, 1.0), *gaps]))
    assert table.index.tolist() == ["data loading", "optimizer"] and table.columns.tolist() == ["rank 0", "rank 1"]
    assert table.values.tolist() == [[0.5, 4.0], [1.0, 0.0]]
    assert view.host_gaps_ms(stored("profiler-trace-ranks", [rank(0, 1.0)])).empty  # stored before: no table


def test_each_step_s_idle_by_the_host_s_cause_in_ms():
    from core.rows.trace import WINDOW_CAUSE_KEYS

    held = dict.fromkeys(WINDOW_CAUSE_KEYS.values(), 0.0)
    steps = [
        {"kind": "step", "step": 7.0, **held, "idle_host_data_us": 2500.0, "idle_host_none_us": 500.0},
        {"kind": "step", "step": 8.0, **held, "idle_host_none_us": 1000.0},
    ]
    table = view.step_host_ms(stored("profiler-trace", steps))
    assert table.columns.tolist() == ["data loading", "no CPU event"]  # the causes no step has are left out
    assert table.index.tolist() == [7, 8] and table.values.tolist() == [[2.5, 0.5], [0.0, 1.0]]
    old = [{"kind": "step", "step": 1, "wall_us": 5.0}]
    assert view.step_host_ms(stored("profiler-trace", old)).empty  # stored before the per-step causes


def test_each_rank_s_top_operators_in_ms():
    ops = [
        {"kind": "op", "rank": 0.0, "op": "aten::mm", "gpu_time_us": 3000.0},
        {"kind": "op", "rank": 1.0, "op": "aten::mm", "gpu_time_us": 5000.0},
        {"kind": "op", "rank": 1.0, "op": "aten::add", "gpu_time_us": 9000.0},
        {"kind": "op", "rank": 0.0, "op": "aten::cat", "gpu_time_us": 100.0},
    ]
    table = view.ops_ms(stored("profiler-trace-ranks", [rank(0, 1.0), *ops]), top=2)
    assert table.index.tolist() == ["aten::add", "aten::mm"]  # 9 ms, then 3 + 5 ms; aten::cat is past the top 2
    assert table.columns.tolist() == ["rank 0", "rank 1"] and table.values.tolist() == [[0.0, 9.0], [3.0, 5.0]]
    assert view.ops_ms(stored("profiler-trace-ranks", [rank(0, 1.0)])).empty  # stored before: no table


def test_the_collectives_table_is_in_ms_and_leaves_what_nccl_tests_has_no_figure_for_missing():
    calls = [
        {"kind": "collective", "collective": "all_reduce", "size": "1 MiB", "dtype": "Float", "group_size": 2.0,
         "calls": 3.0, "median_us": 2500.0, "total_us": 9000.0, "algbw_gbs": 0.5, "busbw_gbs": 0.5},
        {"kind": "collective", "collective": "send", "size": None, "dtype": "Float", "group_size": 2.0,
         "calls": 1.0, "median_us": 5.0, "total_us": 5.0, "algbw_gbs": None, "busbw_gbs": None},
    ]  # fmt: skip
    table = view.collectives_table(stored("profiler-trace", calls))
    assert table["median ms"].tolist() == [2.5, 0.005] and table["total ms"].tolist() == [9.0, 0.005]
    assert table["group"].tolist() == [2, 2] and table["calls"].tolist() == [3, 1]
    assert table["busbw GB/s"].isna().tolist() == [False, True]
    assert view.collectives_table(stored("profiler-trace", [{"kind": "step", "step": 1}])).empty

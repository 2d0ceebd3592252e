"""The ranks of one job side by side: each rank's span split into parts that add up to it, the straggler
named, each step per rank, kernel groups per rank (ms from hand-made µs rows)."""

import pytest

pytest.importorskip("plotly")

from render.plots.profiler_trace_ranks import figures
from tests.factories import make_run


def _rank(rank, compute_us, busy_us, exposed_us, idle_us):
    row = {"kind": "rank", "rank": rank, "file": f"rank-{rank}.json", "compute_us": compute_us, "busy_us": busy_us}
    row |= {"exposed_communication_us": exposed_us, "idle_us": idle_us, "span_us": busy_us + idle_us}
    return row | {"communication_us": exposed_us, "kernel_time_us": compute_us + exposed_us}


def test_each_rank_is_a_stack_of_its_parts_and_the_straggler_is_named():
    rows = [
        _rank(0, compute_us=4000.0, busy_us=5000.0, exposed_us=500.0, idle_us=1000.0),
        _rank(1, compute_us=6000.0, busy_us=6500.0, exposed_us=500.0, idle_us=0.0),
        {"kind": "step", "rank": 0, "step": 1, "wall_us": 3000.0, "compute_us": 2000.0, "idle_us": 500.0},
        {"kind": "step", "rank": 1, "step": 1, "wall_us": 3500.0, "compute_us": 3000.0, "idle_us": 0.0},
        {"kind": "group", "rank": 0, "group": "matmul", "total_us": 3000.0},
        {"kind": "group", "rank": 1, "group": "matmul", "total_us": 5000.0},
    ]
    meta = {"straggler_rank": 1, "straggler": {"rank": 1, "margin_pct": 20.0}}
    ranks, steps, groups = figures(make_run("profiler-trace-ranks", rows, meta))
    parts = {t.name: list(t.y) for t in ranks.figure.data}
    # other busy = busy − compute − exposed communication: 5000 − 4000 − 500 and 6500 − 6000 − 500 µs
    assert parts == {
        "compute": [4.0, 6.0],
        "exposed communication": [0.5, 0.5],
        "other busy (copies alone)": [0.5, 0.0],
        "idle": [1.0, 0.0],
    }
    assert list(ranks.figure.data[0].x) == ["rank 0", "rank 1 (straggler)"]
    assert "straggler rank 1: +20.0% compute" in ranks.figure.layout.title.text
    assert [(t.name, list(t.y)) for t in steps.figure.data] == [("rank 0", [3.0]), ("rank 1 (straggler)", [3.5])]
    assert [list(t.y) for t in groups.figure.data] == [[3.0, 5.0]]


def test_a_run_without_rank_rows_draws_nothing():
    assert figures(make_run("profiler-trace-ranks", [{"kind": "other"}])) == []

"""The accumulation charts: the final error per accumulator and addend, and the running sum's error, which the
chart derives as sum − step × value (checked here by hand on a stalled fp16 sum)."""

import pytest

pytest.importorskip("plotly")

from render.plots.accumulate import figures
from tests.factories import make_run


def test_final_errors_per_accumulator_and_the_running_error_by_hand():
    rows = [
        {"accumulator": "fp32", "addend": "fp32", "result": 10.000019, "error": 1.9e-5},
        {"accumulator": "fp16", "addend": "fp16", "result": 4.0, "error": -6.0},
        {"accumulator": "torch.sum", "addend": "fp16", "result": 10.0, "error": 0.0},
    ]
    curve = {"steps": [0, 500, 1000], "series": [{"accumulator": "fp16", "addend": "fp16", "sum": [0.0, 4.0, 4.0]}]}
    bars, running = figures(make_run("accumulate", rows, {"curve": curve}, config={"value": 0.01, "steps": 1000}))
    assert [t.name for t in bars.figure.data] == ["fp32 accumulator", "fp16 accumulator", "torch.sum"]
    assert [list(t.y) for t in bars.figure.data] == [[1.9e-5], [-6.0], [0.0]]
    assert "s += 0.01 repeated 1000 times" in bars.figure.layout.title.text
    (line,) = running.figure.data
    assert line.name == "fp16 += fp16" and list(line.y) == pytest.approx([0.0, -1.0, -6.0])  # 4 − 5, 4 − 10
    assert running.figure.layout.yaxis.title.text == "running sum − exact (step × value)"

"""The health chart: every judged figure as a percentage of its reference, coloured by its verdict."""

import pytest

pytest.importorskip("plotly")

from render.plots.health import VERDICT_COLORS, figures
from tests.factories import make_run


def _row(figure, where, measured, reference, verdict, node=None):
    row = {"figure": figure, "where": where, "measured": measured, "reference": reference, "unit": "TFLOPS"}
    return row | {"fraction": measured / reference, "verdict": verdict, "node": node}


def test_each_figure_is_a_bar_at_its_percent_of_the_reference():
    rows = [
        _row("matmul bf16", "cuda:0", 760.0, 800.0, "pass"),
        _row("matmul bf16", "cuda:1", 400.0, 800.0, "far below", node="node-2"),
        {"figure": "doctor", "where": "", "measured": "ok", "verdict": "pass"},  # no fraction: not drawn
    ]
    (chart,) = figures(make_run("health", rows, {"verdict": "far below"}))
    (bars,) = chart.figure.data
    assert list(bars.x) == [95.0, 50.0]  # 760 / 800, 400 / 800
    assert list(bars.y) == ["matmul bf16 @ cuda:0", "matmul bf16 @ node-2 @ cuda:1"]
    assert list(bars.marker.color) == [VERDICT_COLORS["pass"], VERDICT_COLORS["far below"]]
    assert len(chart.figure.layout.shapes) == 2  # the pass and far-below thresholds
    assert "Health: far below" in chart.figure.layout.title.text


def test_a_run_with_nothing_judged_draws_nothing():
    assert figures(make_run("health", [{"figure": "doctor", "verdict": "pass"}])) == []

"""The planner's chart: each category stacked at each moment of the step, in MiB, the peak marked."""

import pytest

pytest.importorskip("plotly")

from core.transformer.planner import CATEGORIES
from core.units import MIB
from render.plots.estimate import figures
from tests.factories import make_run


def test_categories_stack_per_moment_and_the_peak_is_marked():
    moments = [("forward", "start", 1), ("forward", "peak", 3), ("backward", "end", 2)]
    rows = [
        {"phase": p, "moment": m, **{c: k * MIB for c in CATEGORIES}, "total_bytes": k * MIB * len(CATEGORIES)}
        for p, m, k in moments
    ]
    config = {"model": "tiny", "precision": "fp32", "optimizer": "adamw", "batch": 2}
    (chart,) = figures(make_run("estimate", rows, config=config))
    fig = chart.figure
    assert len(fig.data) == len(CATEGORIES) and fig.layout.barmode == "stack"
    assert list(fig.data[0].y) == [1.0, 3.0, 2.0]  # MiB
    assert list(fig.data[0].customdata) == ["forward: start", "forward: peak", "backward: end"]
    (peak,) = fig.layout.annotations
    assert peak.x == 1 and peak.y == 3.0 * len(CATEGORIES) and peak.text == "predicted peak: forward: peak"
    assert fig.layout.yaxis.title.text == "estimate (MiB)" and "batch 2" in fig.layout.title.text
    # the phases mark the axis where they begin; the plot has room above them and every category in its legend
    assert list(fig.layout.xaxis.tickvals) == [0, 2] and list(fig.layout.xaxis.ticktext) == ["forward", "backward"]
    assert fig.layout.height >= 500 and [t.name for t in fig.data] == [c.replace("_", " ") for c in CATEGORIES]


def test_a_plan_past_a_gib_is_drawn_in_gib():
    rows = [{"phase": "forward", "moment": "m", **dict.fromkeys(CATEGORIES, 40 * 2**30), "total_bytes": 240 * 2**30}]
    (chart,) = figures(make_run("estimate", rows, config={"model": "llama-3-8b"}))
    assert chart.figure.layout.yaxis.title.text == "estimate (GiB)" and list(chart.figure.data[0].y) == [40.0]

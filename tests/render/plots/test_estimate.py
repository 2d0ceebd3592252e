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
    assert list(fig.data[0].x) == ["00 forward: start", "01 forward: peak", "02 backward: end"]
    (peak,) = fig.layout.annotations
    assert peak.x == "01 forward: peak" and peak.y == 3.0 * len(CATEGORIES)
    assert fig.layout.yaxis.title.text == "estimate (MiB)" and "batch 2" in fig.layout.title.text

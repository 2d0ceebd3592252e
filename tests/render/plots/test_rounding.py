"""The rounding chart: the error of each supported mode on a log axis, the unsupported ones named in words."""

import pytest

pytest.importorskip("plotly")

from render.plots.rounding import figures
from tests.factories import make_run


def test_errors_per_mode_and_the_unsupported_mode_named():
    rows = [
        {"mode": "fp32", "size": 256, "status": "ok", "rel_error": 1e-7, "rel_error_vs_rounded_inputs": 1e-7,
         "unit_roundoff": 2**-24},
        {"mode": "tf32", "size": 256, "status": "unsupported", "reason": "a CPU has no TF32 units"},
        {"mode": "bf16", "size": 256, "status": "ok", "rel_error": 4e-3, "rel_error_vs_rounded_inputs": 1e-6,
         "unit_roundoff": 2**-9},
    ]  # fmt: skip
    (chart,) = figures(make_run("rounding", rows))
    fig = chart.figure
    assert len(fig.data) == 3  # error vs the fp32 inputs, vs the rounded inputs, the unit roundoff
    assert list(fig.data[0].x) == ["fp32", "bf16"] and list(fig.data[0].y) == [1e-7, 4e-3]
    assert list(fig.data[2].y) == [2**-24, 2**-9]
    assert [a.text for a in fig.layout.annotations] == ["unsupported:<br>a CPU has no<br>TF32 units"]  # lines of 16
    assert fig.layout.yaxis.type == "log" and "256×256" in fig.layout.title.text
    assert list(fig.layout.xaxis.categoryarray) == ["fp32", "tf32", "bf16"]  # the run's order, gaps kept

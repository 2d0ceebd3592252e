"""The format inspector's chart: the relative error of each supported format on a log axis, an exact store
drawn at the floor (a tenth of the smallest error) and an overflow at the top, the outcome written on each bar."""

import math

import pytest

pytest.importorskip("plotly")

from render.plots.formats import figures
from tests.factories import make_run


def _row(fmt, stored, rel_error, status):
    return {"format": fmt, "value": 70000.0, "stored": stored, "rel_error": rel_error, "bits": "", "status": status}


def test_errors_per_format_with_exact_stores_at_the_floor_and_overflow_at_the_top():
    rows = [
        _row("fp32", 70000.0, 0.0, "exact"),
        _row("bf16", 70144.0, 144 / 70000, "rounded"),  # bf16 keeps 8 bits: 70000 → 70144
        _row("fp16", math.inf, math.inf, "overflow"),  # fp16's max is 65504
        _row("fp8", None, None, "unsupported") | {"reason": "no fp8 here"},
    ]
    (chart,) = figures(make_run("formats", rows, config={"value": 70000.0}))
    (bars,) = chart.figure.data
    assert list(bars.x) == ["fp32", "bf16", "fp16"] and list(bars.text) == ["exact", "rounded", "overflow"]
    floor, top = 144 / 70000 / 10, 1.0 * 10  # a tenth of the smallest error; ten times the largest finite (or 1)
    assert list(bars.y) == pytest.approx([floor, 144 / 70000, top])
    assert (
        chart.figure.layout.yaxis.type == "log"
        and "What each format stores for 70000.0" in chart.figure.layout.title.text
    )

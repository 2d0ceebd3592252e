"""The training-memory charts: the timeline and the peak of a tiny CPU run (its own recorded figures), two runs
overlaid, and a colour per memory category that nobody confuses (CIE76 distances from the standard formulas)."""

import itertools
import math

import pytest

pytest.importorskip("plotly")

from core.experiment import Context, drive
from core.experiments.train_memory import TrainMemoryConfig, run
from render.plots.train_memory import figures, overlay, timeline_figure
from tests.factories import make_run


def test_figures_and_overlay_from_a_run():
    def record(precision):
        out, _ = drive(
            run(TrainMemoryConfig(model="tiny", precision=precision, batch=1, context=32), Context("cpu", "CPU"))
        )
        config = {"model": "tiny", "precision": precision, "optimizer": "adamw", "batch": 1, "context": 32}
        return make_run("train-memory", out.rows, out.meta, config=config)

    a, b = record("fp32"), record("bf16")
    charts = figures(a)
    assert [c.name for c in charts] == ["train-memory-timeline", "train-memory-peak"]
    timeline = charts[0].figure
    stacked = [t for t in timeline.data if t.stackgroup == "memory"]
    assert len(stacked) == 6
    assert "CPU" in timeline.layout.title.text
    peak_bar = charts[1].data
    assert peak_bar[peak_bar.source == "measured"].bytes.sum() == a.meta["trace_peak_bytes"]
    lines, bars = overlay([a, b])
    assert len(lines.figure.data) == 2
    assert list(bars.data.measured_bytes) == [a.meta["peak_measured_bytes"], b.meta["peak_measured_bytes"]]


def _lab(hex_colour: str) -> tuple[float, float, float]:
    """sRGB hex → CIE L*a*b* (D65), from the standard formulas."""
    rgb = [int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
    x = (0.4124 * lin[0] + 0.3576 * lin[1] + 0.1805 * lin[2]) / 0.95047
    y = 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]
    z = (0.0193 * lin[0] + 0.1192 * lin[1] + 0.9505 * lin[2]) / 1.08883
    f = [t ** (1 / 3) if t > (6 / 29) ** 3 else t / (3 * (6 / 29) ** 2) + 4 / 29 for t in (x, y, z)]
    return 116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])


def test_every_memory_category_has_its_own_clearly_different_colour():
    rows = [
        {
            "t_ms": 0.0,
            "total_bytes": 6,
            "parameters": 1,
            "gradients": 1,
            "optimizer_state": 1,
            "activations": 1,
            "temporaries": 1,
            "other": 1,
        }
    ]
    meta = {"bands": [], "peak_t_ms": 0.0, "trace_peak_bytes": 6, "peak_phase": "forward"}
    colours = {
        t.name: t.line.color
        for t in timeline_figure(make_run("train-memory", rows, meta)).data
        if t.stackgroup == "memory"
    }
    assert len(colours) == 6
    for (a, ca), (b, cb) in itertools.combinations(colours.items(), 2):
        delta_e = math.dist(_lab(ca), _lab(cb))  # CIE76: ≥ 20 is a difference nobody misses
        assert delta_e >= 20, (a, b, ca, cb, delta_e)

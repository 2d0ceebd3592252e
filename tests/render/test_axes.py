"""Axis numbers as the lab writes them: powers of ten, never an SI prefix ("1f", "1p", "1µ" on an error, "10B" on
a ULP, "100µ GB/s"), and a log axis over a decade or more labelled at its powers only (not "3, 2, 1000, 9")."""

import pytest

pytest.importorskip("plotly")

import plotly.graph_objects as go

from render.chart import Chart
from render.plots import formats, interconnect, rounding
from render.style import number_axes
from tests.factories import make_run
from tests.render.plots.test_interconnect import _collective, _run


def _axes(fig: go.Figure) -> list:
    return [fig.layout[k] for k in fig.layout if k.startswith(("xaxis", "yaxis"))]


def _no_si(chart: Chart) -> None:
    for axis in _axes(chart.figure):
        assert axis.exponentformat == "power", (chart.name, axis)
        if axis.type == "log":
            assert axis.minorloglabels in ("none", "complete"), (chart.name, axis)


def test_error_axes_are_powers_of_ten():
    rows = [
        {"mode": "fp32", "size": 256, "status": "ok", "rel_error": 1e-15, "rel_error_vs_rounded_inputs": 1e-12,
         "unit_roundoff": 2**-24},
        {"mode": "bf16", "size": 256, "status": "ok", "rel_error": 4e-3, "rel_error_vs_rounded_inputs": 1e-6,
         "unit_roundoff": 2**-9},
    ]  # fmt: skip
    (chart,) = rounding.figures(make_run("rounding", rows))
    _no_si(chart)
    assert chart.figure.layout.yaxis.type == "log" and chart.figure.layout.yaxis.minorloglabels == "none"
    stored = [
        {"format": f, "value": 3.14, "stored": s, "rel_error": e, "bits": "", "status": "rounded"}
        for f, s, e in (("fp32", 3.1400001, 3e-8), ("bf16", 3.140625, 2e-4))
    ]
    for chart in formats.figures(make_run("formats", stored, config={"value": 3.14})):
        _no_si(chart)


def test_a_cpu_s_tiny_bandwidth_is_not_micro_gigabytes():
    rows = [_collective("all_reduce", b, ms, 1.0) for b, ms in ((1024, 10.0), (2**20, 50.0))]  # ~0.0001 GB/s
    charts = interconnect.figures(_run(rows))
    assert charts
    for chart in charts:
        _no_si(chart)


def test_a_narrow_log_axis_writes_whole_numbers():
    fig = go.Figure(go.Scatter(x=[1, 2], y=[900.0, 3000.0]))
    fig.update_yaxes(type="log")
    assert number_axes(fig).layout.yaxis.minorloglabels == "complete"
    fig = go.Figure(go.Scatter(x=[1, 2], y=[2.0, 3000.0]))
    fig.update_yaxes(type="log")
    assert number_axes(fig).layout.yaxis.minorloglabels == "none"

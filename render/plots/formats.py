"""Charts of a ``formats`` run: the inspector's error per format and the ULP spacing of every float format."""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go

from core.result import RunResult, rows_frame
from core.rows.formats import FormatsSummary, SpacingPoint, values_of
from render.chart import Chart
from render.style import color_for, style, title

FP32_VIEW_X, FP32_VIEW_Y = (-46, 39), (-46, 33)  # log10 ranges of the initial view: fp32's whole range


def inspector_chart(run: RunResult) -> Chart:
    """Relative error per format (log axis); the outcome (overflow, underflow…) is written on each bar."""
    df = run.frame()
    value = run.config.get("value")
    values = values_of(run)
    stores = [v for v in values if not v.unsupported]  # the formats that hold the value get a bar
    # A bar of height 0 vanishes on a log axis: exact stores are drawn at the axis floor and labelled.
    errors = [v.rel_error for v in stores]
    floor = max(min([e for e in errors if e is not None and 0 < e < math.inf] or [1e-17]) / 10, 1e-18)
    top = max([e for e in errors if e is not None and math.isfinite(e)] + [1.0]) * 10
    heights = [top if e == math.inf else (floor if not e or e != e else e) for e in errors]
    fig = go.Figure(
        go.Bar(
            x=_texts([v.format for v in stores]),
            y=heights,
            marker_color=[color_for(v.format) for v in stores],
            text=_texts([v.status for v in stores]),
            textposition="outside",
            # the stored columns as the table has them: pandas's text of a NaN store stays NaN (an empty hover)
            customdata=df.loc[[not v.unsupported for v in values], ["stored", "bits"]].astype(str).values,
            hovertemplate="%{x}: stored %{customdata[0]}<br>%{customdata[1]}<br>relative error %{y:.3g}<extra></extra>",
        )
    )
    style(
        fig,
        title(f"What each format stores for {value}", run, "relative error; bar text = outcome"),
        "format",
        "relative error |stored − value| / |value|",
        yaxis_type="log",
        showlegend=False,
    )
    cols = [
        c
        for c in ("format", "value", "stored", "abs_error", "rel_error", "bits", "hex", "status", "reason")
        if c in df.columns
    ]
    return Chart("formats-inspector", fig, df.loc[:, cols])


def _texts(values: list) -> np.ndarray:
    """Text for a trace as an array, as a DataFrame's column hands it to Plotly."""
    return np.array(values, dtype=object)


def spacing_chart(run: RunResult) -> Chart:
    """ULP against magnitude, log–log, with each format's smallest normal and max marked."""
    summary = FormatsSummary.from_meta(run.meta)
    by_format: dict[str, list[SpacingPoint]] = {}
    for point in summary.spacing:
        by_format.setdefault(point.format, []).append(point)
    fig = go.Figure()
    for fmt, points in by_format.items():
        color = color_for(fmt)
        fig.add_trace(
            go.Scatter(
                x=np.array([p.magnitude for p in points]),
                y=np.array([p.ulp for p in points]),
                name=fmt,
                mode="lines",
                line_shape="hv",
                line_color=color,
                legendgroup=fmt,
            )
        )
        limits = summary.info(fmt)
        if limits is None:
            continue
        marks = [(limits.smallest_normal, "smallest normal", "triangle-up"), (limits.max, "max", "x")]
        for x, label, symbol in marks:
            if x is None or x != x:
                continue
            y = min(points, key=lambda p, x=x: abs(p.magnitude - x)).ulp  # the nearest point's (the first of ties)
            fig.add_trace(
                go.Scatter(
                    x=[x],
                    y=[y],
                    mode="markers",
                    marker=dict(symbol=symbol, size=10, color=color),
                    legendgroup=fmt,
                    showlegend=False,
                    name=f"{fmt} {label}",
                    hovertemplate=f"{fmt} {label}: %{{x:.4g}}<extra></extra>",
                )
            )
    value = run.config.get("value")
    if isinstance(value, (int, float)) and math.isfinite(value) and value != 0:
        fig.add_vline(x=abs(value), line_dash="dot", line_color="#555", annotation_text=f"|{value}|")
    style(
        fig,
        title(
            "Gap to the next representable number (ULP)",
            run,
            "▲ smallest normal · ✕ max · fp64 runs on to 5e-324 … 1.8e308: zoom out",
        ),
        "magnitude",
        "ULP (spacing)",
        xaxis_type="log",
        yaxis_type="log",
        legend_title="format",
    )
    fig.update_xaxes(range=FP32_VIEW_X)  # fp64's range would squash every other format into a dot
    fig.update_yaxes(range=FP32_VIEW_Y)
    return Chart("formats-spacing", fig, rows_frame([p.to_row() for p in summary.spacing]))


def figures(run: RunResult) -> list[Chart]:
    charts = [inspector_chart(run)]
    if FormatsSummary.from_meta(run.meta).spacing:
        charts.append(spacing_chart(run))
    return charts


__all__ = ["figures", "inspector_chart", "spacing_chart"]

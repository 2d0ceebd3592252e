"""Charts of a ``quantize`` run: the tensor's histogram, how its values land on the integer codes, the errors."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from core.result import RunResult
from core.rows.quantize import QuantizeSummary
from render.chart import Chart
from render.style import style, title

COLORS = {
    "int8 symmetric": "#e377c2",
    "int8 asymmetric": "#9c3d7f",
    "int4 symmetric": "#7f7f7f",
    "int4 asymmetric": "#3b3b3b",
}


def values_histogram(run: RunResult) -> Chart:
    hist = QuantizeSummary.from_meta(run.meta).values_hist
    edges = list(hist.edges)
    df = pd.DataFrame({"left": edges[:-1], "right": edges[1:], "count": list(hist.counts)})
    fig = go.Figure(
        go.Bar(
            x=(df["left"] + df["right"]) / 2,
            y=df["count"],
            width=df["right"] - df["left"],
            marker_color="#1f77b4",
            name="values",
        )
    )
    style(fig, title(f"The tensor: {run.config.get('distribution')}", run), "value", "count", yaxis_type="log")
    return Chart("quantize-values", fig, df)


def codes_histogram(run: RunResult) -> Chart:
    """Count per integer level, drawn at the level's dequantized value: outliers leave most levels empty."""
    parts = [
        pd.DataFrame(
            {"quantization": h.quantization, "code": list(h.codes), "value": list(h.values), "count": list(h.counts)}
        )
        for h in QuantizeSummary.from_meta(run.meta).codes_hist
    ]
    df = pd.concat(parts, ignore_index=True)
    fig = go.Figure()
    for name, part in df.groupby("quantization", sort=False):
        used = part.loc[part["count"] > 0]
        fig.add_trace(
            go.Scatter(
                x=used["value"],
                y=used["count"],
                name=f"{name} ({len(used)}/{len(part)} levels)",
                mode="markers",
                marker=dict(color=COLORS.get(str(name)), size=6),
                customdata=used[["code"]].values,
                hovertemplate="code %{customdata[0]} = %{x:.4g}: %{y} values<extra></extra>",
            )
        )
    style(
        fig,
        title("Values per integer level", run, "x = the level's dequantized value"),
        "dequantized value",
        "values on this level",
        yaxis_type="log",
        legend_title="quantization (levels used)",
    )
    return Chart("quantize-levels", fig, df)


def error_bars(run: RunResult) -> Chart:
    df = run.frame()
    fig = go.Figure(
        [
            go.Bar(x=df["quantization"], y=df["rmse"], name="RMSE, all values", marker_color="#d62728"),
            go.Bar(x=df["quantization"], y=df["rmse_bulk"], name="RMSE, without the outliers", marker_color="#ff9896"),
        ]
    )
    style(
        fig,
        title("Round-trip error", run, "dequantize(quantize(x)) − x"),
        "quantization",
        "RMSE",
        barmode="group",
        yaxis_type="log",
    )
    return Chart("quantize-error", fig, df)


def figures(run: RunResult) -> list[Chart]:
    return [values_histogram(run), codes_histogram(run), error_bars(run)]

"""Charts of an ``accumulate`` run: final error per accumulator/addend pair and the error over the steps."""

from __future__ import annotations

from typing import cast

import pandas as pd
import plotly.graph_objects as go

from core.result import RunResult
from core.rows.accumulate import AccumulateSummary
from render.chart import Chart
from render.style import color_for, style, title

DASH = {"fp64": "solid", "fp32": "dash", "fp16": "dot", "bf16": "dashdot"}


def error_bars(run: RunResult) -> Chart:
    df = run.frame()
    fig = go.Figure()
    for acc, part in df.groupby("accumulator", sort=False):
        fig.add_trace(
            go.Bar(
                x=part["addend"],
                y=part["error"],
                name=acc if acc == "torch.sum" else f"{acc} accumulator",
                marker_color=color_for(str(acc)),
                customdata=part[["result"]].values,
                hovertemplate="addend %{x}: result %{customdata[0]:.7g}, error %{y:.3g}<extra></extra>",
            )
        )
    cfg = run.config
    style(
        fig,
        title(
            f"s += {cfg.get('value')} repeated {cfg.get('steps')} times",
            run,
            "error = result − exact sum; torch.sum of the same data beside the loops",
        ),
        "addend dtype",
        "error (result − exact)",
        barmode="group",
        legend_title="accumulator",
    )
    return Chart("accumulate-error", fig, df)


def curve_frame(run: RunResult) -> pd.DataFrame:
    curve = AccumulateSummary.from_meta(run.meta)
    steps, value = list(curve.steps), float(run.config.get("value", 0))
    parts = [
        pd.DataFrame({"accumulator": s.accumulator, "addend": s.addend, "step": steps, "sum": list(s.sums)})
        for s in curve.series
    ]
    df = (
        pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["accumulator", "addend", "step", "sum"])
    )
    df["error"] = df["sum"] - df["step"] * value
    return df


def error_curve(run: RunResult) -> Chart:
    df = curve_frame(run)
    fig = go.Figure()
    for key, part in df.groupby(["accumulator", "addend"], sort=False):
        acc, add = cast(tuple[str, str], key)  # grouped by two columns: the key is a pair
        fig.add_trace(
            go.Scatter(
                x=part["step"],
                y=part["error"],
                name=f"{acc} += {add}",
                mode="lines",
                line=dict(color=color_for(acc), dash=DASH.get(add, "solid")),
            )
        )
    style(
        fig,
        title("Error of the running sum", run, "colour = accumulator, dash = addend; flat sum = stalled"),
        "step",
        "running sum − exact (step × value)",
        legend_title="accumulator += addend",
    )
    return Chart("accumulate-curve", fig, df)


def figures(run: RunResult) -> list[Chart]:
    return [error_bars(run), error_curve(run)]

"""Planner charts: the predicted step as moments (stacked by category), the predicted peak marked."""

from __future__ import annotations

from typing import cast

import pandas as pd
import plotly.graph_objects as go

from core.result import RunResult
from core.transformer.planner import CATEGORIES
from core.units import MIB
from render.chart import Chart
from render.style import color_for, style, title


def moments_figure(df: pd.DataFrame, heading: str) -> go.Figure:
    """Predicted bytes per category at each moment of the step (x: moment in order)."""
    fig = go.Figure()
    x = [f"{i:02d} {p}: {m}" for i, (p, m) in enumerate(zip(df["phase"], df["moment"]))]
    for category in CATEGORIES:
        fig.add_trace(
            go.Bar(x=x, y=df[category] / MIB, name=category.replace("_", " "), marker_color=color_for(category))
        )
    top = int(cast(int, df.loc[:, "total_bytes"].idxmax()))  # a label of the frame's RangeIndex
    fig.add_annotation(x=x[top], y=df["total_bytes"][top] / MIB, text="predicted peak", showarrow=True)
    fig.update_layout(barmode="stack", xaxis_tickangle=-45)
    return style(fig, heading, "moment of the step", "estimate (MiB)", legend_title="category")


def figures(run: RunResult) -> list[Chart]:
    df = run.frame()
    c = run.config
    detail = f"estimate · {c.get('model')} · {c.get('precision')} · {c.get('optimizer')} · batch {c.get('batch')}"
    return [Chart("estimate-moments", moments_figure(df, title("Predicted memory through the step", None, detail)), df)]

"""Planner charts: the predicted step as moments (stacked by category), the predicted peak marked."""

from __future__ import annotations

from typing import cast

import pandas as pd
import plotly.graph_objects as go

from core.result import RunResult
from core.rows.estimate import EstimatePlan
from core.transformer.planner import CATEGORIES
from core.transformer.presets import ModelPreset
from core.units import GIB, MIB, bytes_text
from render.chart import Chart
from render.style import color_for, style, title

PLANNER_HEIGHT = 520  # px: room for the plot above the moments' labels and for every category in the legend


def moments_figure(df: pd.DataFrame, heading: str) -> go.Figure:
    """Predicted bytes per category at each moment of the step (x: the moments in order, each named in its
    hover; the axis marks where each phase begins), in MiB or, from 1 GiB, in GiB — never "1×10⁵ MiB"."""
    unit, scale = ("GiB", GIB) if max(int(v) for v in df["total_bytes"]) >= GIB else ("MiB", MIB)
    x = list(range(len(df)))
    names = [f"{p}: {m}" for p, m in zip(df["phase"], df["moment"])]
    fig = go.Figure()
    for category in CATEGORIES:
        fig.add_trace(
            go.Bar(
                x=x,
                y=df[category] / scale,
                name=category.replace("_", " "),
                marker_color=color_for(category),
                customdata=names,
                hovertemplate=f"%{{customdata}}<br>%{{y:,.2f}} {unit}<extra>{category.replace('_', ' ')}</extra>",
            )
        )
    top = int(cast(int, df.loc[:, "total_bytes"].idxmax()))  # a label of the frame's RangeIndex
    fig.add_annotation(
        x=top, y=df["total_bytes"][top] / scale, text=f"predicted peak: {names[top]}", showarrow=True, ax=0, ay=-30
    )
    starts = [i for i, p in enumerate(df["phase"]) if i == 0 or p != df["phase"][i - 1]]
    fig.update_xaxes(tickvals=starts, ticktext=[str(df["phase"][i]) for i in starts])
    fig.update_layout(barmode="stack", bargap=0.1, height=PLANNER_HEIGHT)
    return style(fig, heading, "moment of the step (hover for each)", f"estimate ({unit})", legend_title="category")


def figures(run: RunResult) -> list[Chart]:
    df = run.frame()
    c = run.config
    detail = f"estimate · {c.get('model')} · {c.get('precision')} · {c.get('optimizer')} · batch {c.get('batch')}"
    return [Chart("estimate-moments", moments_figure(df, title("Predicted memory through the step", None, detail)), df)]


def activations_caption(plan: EstimatePlan) -> str:
    """Where the predicted peak falls, and what each layer (and the head, once) saves for backward."""
    saved = ", ".join(f"{k.replace('_', ' ')} {bytes_text(v)}" for k, v in plan.activations_bytes.items())
    return f"Predicted peak at *{plan.peak_moment}*. Activations per layer: " + saved


def model_caption(model: str, shape: ModelPreset) -> str:
    """The model planned, counted from its shapes: parameters, width, depth, heads (and KV heads where fewer)."""
    kv = f", {shape.kv_heads} KV heads" if shape.kv_heads != shape.num_heads else ""
    tied = ", tied embeddings" if shape.tied_embeddings else ""
    return (
        f"{model}: {shape.param_count():,} parameters (d_model {shape.d_model}, {shape.num_layers} layers, "
        f"{shape.num_heads} heads{kv}{tied})."
    )


def published_caption(arch: ModelPreset) -> str:
    """A published architecture's own parameter count (with its source) beside the one counted from its shapes."""
    return (
        f"*published*: {arch.published_params:,} parameters — {arch.source}. Counted from the shapes here: "
        f"{arch.param_count():,}."
    )

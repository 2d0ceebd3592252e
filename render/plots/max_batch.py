"""``max-batch`` chart: every probe of the search — measured peak where it fit, the estimate beside it."""

from __future__ import annotations

import plotly.graph_objects as go

from core.result import RunResult
from core.rows.max_batch import MaxBatchSummary
from core.units import GIB
from render.chart import Chart
from render.style import style, title


def figures(run: RunResult) -> list[Chart]:
    df = run.frame().sort_values("batch")
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=df["batch"],
            y=df["peak_estimated_bytes"] / GIB,
            mode="lines+markers",
            name="estimate",
            line=dict(dash="dot", color="#7f7f7f"),
        )
    )
    fit = df[df["fits"].astype(bool)]
    fig.add_trace(
        go.Scatter(
            x=fit["batch"],
            y=fit["peak_measured_bytes"] / GIB,
            mode="markers",
            name="fits (measured)",
            marker=dict(symbol="circle", size=11, color="#2ca02c"),
        )
    )
    failed = df[~df["fits"].astype(bool)]
    fig.add_trace(
        go.Scatter(
            x=failed["batch"],
            y=failed["peak_estimated_bytes"] / GIB,
            mode="markers",
            name="does not fit",
            marker=dict(symbol="x", size=12, color="#d62728"),
            text=failed.get("failure", failed.get("error")),
            hovertemplate="batch %{x}: %{text}<extra></extra>",
        )
    )
    meta = MaxBatchSummary.from_meta(run.meta)
    if meta.memory_bytes:
        fig.add_hline(y=meta.memory_bytes / GIB, line_dash="dash", annotation_text="device memory")
    c = run.config
    detail = f"{c.get('model')} · {c.get('precision')} · {c.get('optimizer')} · context {c.get('context')}"
    style(
        fig,
        title(f"Max batch that fits: {meta.max_batch_measured} (estimate {meta.max_batch_estimated})", run, detail),
        "batch (sequences)",
        "peak allocated (GiB)",
    )
    return [Chart(name="max-batch-probes", figure=fig, data=df)]

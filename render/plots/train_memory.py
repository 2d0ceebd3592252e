"""Training-memory charts: stacked category timeline with phase bands and the peak, estimate vs measured."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from core.result import RunResult, RunSummary
from core.rows.train_memory import TrainMemorySummary
from core.transformer.planner import CATEGORIES
from core.units import MIB, bytes_text, timestamp_text
from render.chart import Chart
from render.style import color_for, html_text, style, title

PHASE_COLORS = {
    "forward": "rgba(31,119,180,0.10)",
    "backward": "rgba(214,39,40,0.10)",
    "optimizer": "rgba(44,160,44,0.12)",
    "zero_grad": "rgba(127,127,127,0.12)",
}


NAMED_BAND = 0.1  # a phase band this share of the step or wider carries its name
PEAK_HEADROOM = 1.3  # the y axis runs to this times the peak: room for the phases' names above the star


def _detail(run: RunResult) -> str:
    c = run.config
    return (
        f"{c.get('model')} · {c.get('precision')} · {c.get('optimizer')} · batch {c.get('batch')} × {c.get('context')}"
    )


def timeline_figure(run: RunResult) -> go.Figure:
    df = run.frame()
    fig = go.Figure()
    meta = TrainMemorySummary.from_meta(run.meta)
    bands = meta.bands or ()
    span = max((b.end_ms for b in bands), default=0.0) - min((b.start_ms for b in bands), default=0.0)
    for band in bands:  # a phase too narrow for its name (the optimizer's, zero_grad's) is named in the legend only
        fig.add_vrect(x0=band.start_ms, x1=band.end_ms, fillcolor=PHASE_COLORS.get(band.phase, "white"), line_width=0)
        if band.end_ms - band.start_ms >= NAMED_BAND * span:
            fig.add_annotation(
                x=band.start_ms, y=1, xref="x", yref="y domain", xanchor="left", yanchor="top",
                text=band.phase, showarrow=False, font=dict(size=9),
            )  # fmt: skip
    for phase in dict.fromkeys(b.phase for b in bands):
        fig.add_trace(
            go.Scatter(
                x=[None],
                y=[None],
                mode="markers",
                marker=dict(symbol="square", size=12, color=PHASE_COLORS.get(phase, "white")),
                name=f"{phase} (shaded)",
                legendgroup="phases",
            )
        )
    for category in CATEGORIES:
        fig.add_trace(
            go.Scatter(
                x=df["t_ms"],
                y=df[category] / MIB,
                name=category.replace("_", " "),
                stackgroup="memory",
                mode="lines",
                line=dict(width=0.5, color=color_for(category)),
            )
        )
    peak = (meta.trace_peak_bytes or 0) / MIB
    late = span and meta.peak_t_ms > min(b.start_ms for b in bands) + span / 2
    fig.add_trace(
        go.Scatter(
            x=[meta.peak_t_ms],
            y=[peak],
            mode="markers+text",
            marker=dict(symbol="star", size=14, color="black"),
            name="peak",
            text=[f"peak {bytes_text(meta.trace_peak_bytes or 0)} in {meta.peak_phase}"],
            # beside the star, below the phases' names along the top (above it, it was drawn over "backward")
            textposition="middle left" if late else "middle right",
        )
    )
    fig.update_yaxes(range=[0, peak * PEAK_HEADROOM])
    return style(
        fig,
        title("Memory during the training step (measured)", run, _detail(run)),
        "time (ms)",
        "allocated (MiB)",
        legend_title="category",
        height=520,  # the legend's phases, categories and the peak, unscrolled
    )


def comparison_frame(run: RunResult) -> pd.DataFrame:
    meta = TrainMemorySummary.from_meta(run.meta)
    rows = []
    for source, breakdown in (
        ("measured", meta.breakdown_measured_bytes),
        ("estimate", meta.breakdown_estimated_bytes),
    ):
        for category in CATEGORIES:
            rows.append({"source": source, "category": category, "bytes": breakdown.get(category, 0)})
    return pd.DataFrame(rows)


def comparison_figure(run: RunResult) -> go.Figure:
    df = comparison_frame(run)
    fig = go.Figure()
    for category in CATEGORIES:
        part = df[df["category"] == category]
        fig.add_trace(
            go.Bar(
                x=part["source"],
                y=part["bytes"] / MIB,
                name=category.replace("_", " "),
                marker_color=color_for(category),
            )
        )
    meta = TrainMemorySummary.from_meta(run.meta)
    fig.update_layout(barmode="stack")
    detail = (
        f"measured {bytes_text(meta.peak_measured_bytes)} ({meta.peak_phase}) · estimate "
        f"{bytes_text(meta.peak_estimated_bytes)} ({meta.peak_phase_estimated}) · error "
        f"{meta.error_pct:+.1f}%"
    )
    return style(
        fig,
        title("Peak memory: estimate vs measured", run, detail),
        "",
        "bytes at the peak (MiB)",
        legend_title="category",
    )


def figures(run: RunResult) -> list[Chart]:
    return [
        Chart("train-memory-timeline", timeline_figure(run), run.frame()),
        Chart("train-memory-peak", comparison_figure(run), comparison_frame(run)),
    ]


def _label(run: RunResult) -> str:
    c = run.config
    return run.name or f"{c.get('precision')} · {c.get('optimizer')} · b{c.get('batch')}"


def _peak(run: RunResult, meta: TrainMemorySummary) -> dict:
    """One run's row of the peaks table: its measured and estimated peak, where, and on what."""
    return {
        "run": _label(run),
        "measured_bytes": meta.peak_measured_bytes,
        "estimated_bytes": meta.peak_estimated_bytes,
        "peak_phase": meta.peak_phase,
        "device": run.device.get("label") or run.device.get("name"),
    }


def overlay(runs: list[RunResult]) -> list[Chart]:
    """Total memory of each run over time, and their peaks side by side (e.g. fp32 vs bf16-autocast)."""
    lines = go.Figure()
    for run in runs:
        df = run.frame()
        lines.add_trace(go.Scatter(x=df["t_ms"], y=df["total_bytes"] / MIB, mode="lines", name=html_text(_label(run))))
    style(lines, title("Training-step memory, runs overlaid"), "time (ms)", "allocated (MiB)", legend_title="run")
    peaks = pd.DataFrame([_peak(run, TrainMemorySummary.from_meta(run.meta)) for run in runs])
    bars = go.Figure(
        [
            go.Bar(
                x=peaks["run"].map(html_text),
                y=peaks["measured_bytes"] / MIB,
                name="measured",
                text=peaks["peak_phase"],
            ),
            go.Bar(x=peaks["run"].map(html_text), y=peaks["estimated_bytes"] / MIB, name="estimate"),
        ]
    )
    bars.update_layout(barmode="group")
    style(bars, title("Peak memory per run"), "run", "peak (MiB)", legend_title="")
    return [Chart("train-memory-overlay", lines, None), Chart("train-memory-peaks", bars, peaks)]


def compare_label(summary: RunSummary) -> str:
    """A stored run in the page's compare list: its model, precision, optimizer, batch, when, and its id."""
    c = summary.config
    named = " · ".join(str(c.get(k, "?")) for k in ("model", "precision", "optimizer"))
    return named + f" · b{c.get('batch', '?')} · {timestamp_text(summary.started_at)} · {summary.id[:6]}"

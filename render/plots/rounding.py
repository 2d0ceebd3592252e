"""Chart of a ``rounding`` run: relative matmul error per precision mode, unsupported modes named."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from core.result import RunResult
from core.rows.rounding import modes_of
from render.chart import Chart
from render.style import color_for, html_text, style, title, wrapped

NOTE_CHARS = 16  # a line of the note under an unsupported mode that its column holds (four modes, 11 px)


def figures(run: RunResult) -> list[Chart]:
    modes = modes_of(run)
    ok = [m for m in modes if m.ok]
    names = np.array([m.mode for m in ok], dtype=object)  # arrays, as a DataFrame's columns hand them to Plotly
    fig = go.Figure()
    fig.add_trace(
        go.Bar(
            x=names,
            y=_numbers([m.rel_error for m in ok]),
            name="vs fp64 product of the fp32 inputs",
            marker_color=[color_for(m.mode) for m in ok],
        )
    )
    if any(m.rel_error_vs_rounded_inputs is not None for m in modes):  # runs before it stored none
        fig.add_trace(
            go.Bar(
                x=names,
                y=_numbers([m.rel_error_vs_rounded_inputs for m in ok]),
                marker_color="#bbbbbb",
                name="vs fp64 product of the rounded inputs (accumulation only)",
            )
        )
        fig.add_trace(
            go.Scatter(
                x=names,
                y=_numbers([m.unit_roundoff for m in ok]),
                mode="markers",
                name="unit roundoff (eps/2)",
                marker=dict(symbol="line-ew-open", size=30, color="#333"),
            )
        )
    for mode in (m for m in modes if not m.ok):
        fig.add_annotation(
            x=mode.mode,
            y=0.5,
            yref="paper",
            # in lines its mode's column holds: one line ran over the next mode's bar (tf32's over bf16's)
            text="<br>".join(["unsupported:", *map(html_text, wrapped(mode.reason or "", NOTE_CHARS))]),
            showarrow=False,
            font=dict(size=11),
        )
    fig.update_xaxes(categoryorder="array", categoryarray=[m.mode for m in modes])
    style(
        fig,
        title(f"Matmul {modes[0].size}×{modes[0].size}: error against fp64", run),
        "precision mode",
        "relative error ‖C − C_ref‖ / ‖C_ref‖",
        yaxis_type="log",
        barmode="group",
    )
    return [Chart("rounding-error", fig, run.frame())]


def _numbers(values: list[float | None]) -> np.ndarray:
    """A trace's numbers, a missing one NaN, as a DataFrame's column hands them to Plotly."""
    return np.array(values, dtype=float)

"""Chart of a ``rounding`` run: relative matmul error per precision mode, unsupported modes named."""

from __future__ import annotations

import plotly.graph_objects as go

from core.result import RunResult
from core.rows.rounding import modes_of
from render.chart import Chart
from render.style import color_for, html_text, style, title, wrapped

NOTE_CHARS = 16  # a line of the note under an unsupported mode that its column holds (four modes, 11 px)


def figures(run: RunResult) -> list[Chart]:
    df, modes = run.frame(), modes_of(run)
    ok = df[[m.ok for m in modes]]  # the stored columns of the measured modes, to plot
    fig = go.Figure()
    fig.add_trace(
        go.Bar(
            x=ok["mode"],
            y=ok["rel_error"],
            name="vs fp64 product of the fp32 inputs",
            marker_color=[color_for(m) for m in ok["mode"]],
        )
    )
    if any(m.rel_error_vs_rounded_inputs is not None for m in modes):  # runs before it stored none
        fig.add_trace(
            go.Bar(
                x=ok["mode"],
                y=ok["rel_error_vs_rounded_inputs"],
                marker_color="#bbbbbb",
                name="vs fp64 product of the rounded inputs (accumulation only)",
            )
        )
        fig.add_trace(
            go.Scatter(
                x=ok["mode"],
                y=ok["unit_roundoff"],
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
    return [Chart("rounding-error", fig, df)]

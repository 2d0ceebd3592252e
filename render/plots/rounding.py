"""Chart of a ``rounding`` run: relative matmul error per precision mode, unsupported modes named."""

from __future__ import annotations

import plotly.graph_objects as go

from core.result import RunResult
from render.chart import Chart
from render.style import color_for, html_text, style, title, wrapped

NOTE_CHARS = 16  # a line of the note under an unsupported mode that its column holds (four modes, 11 px)


def figures(run: RunResult) -> list[Chart]:
    df = run.frame()
    ok = df[df["status"] == "ok"]
    fig = go.Figure()
    fig.add_trace(
        go.Bar(
            x=ok["mode"],
            y=ok["rel_error"],
            name="vs fp64 product of the fp32 inputs",
            marker_color=[color_for(m) for m in ok["mode"]],
        )
    )
    if "rel_error_vs_rounded_inputs" in ok:
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
    for _, row in df[df["status"] != "ok"].iterrows():
        fig.add_annotation(
            x=row["mode"],
            y=0.5,
            yref="paper",
            # in lines its mode's column holds: one line ran over the next mode's bar (tf32's over bf16's)
            text="<br>".join(["unsupported:", *map(html_text, wrapped(str(row.get("reason", "")), NOTE_CHARS))]),
            showarrow=False,
            font=dict(size=11),
        )
    fig.update_xaxes(categoryorder="array", categoryarray=list(df["mode"]))
    style(
        fig,
        title(f"Matmul {int(df['size'].iloc[0])}×{int(df['size'].iloc[0])}: error against fp64", run),
        "precision mode",
        "relative error ‖C − C_ref‖ / ‖C_ref‖",
        yaxis_type="log",
        barmode="group",
    )
    return [Chart("rounding-error", fig, df)]

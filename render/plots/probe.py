"""Charts for the ``probe`` diagnostic: which steps finished, and when (rows kept from progress events)."""

from __future__ import annotations

import plotly.graph_objects as go

from core.result import RunResult
from core.rows.probe import ProbeStep
from core.units import count_text
from render.chart import Chart
from render.style import style, title


def figures(run: RunResult) -> list[Chart]:
    steps = [ProbeStep.from_row(r) for r in run.rows]
    if all(s.step is None for s in steps):
        return []
    df = run.frame()  # the chart plots the stored columns
    fig = go.Figure()
    if any(s.t is not None for s in steps):  # progress rows carry a wall-clock stamp: show the time between steps
        elapsed_s = df["t"] - df["t"].min()
        fig.add_trace(go.Scatter(x=df["step"], y=elapsed_s, mode="lines+markers", name="elapsed"))
        y_title = "time since the first step (s)"
    else:
        fig.add_trace(go.Bar(x=df["step"], y=[1] * len(df), name="finished"))
        y_title = "finished (1 = yes)"
    style(
        fig,
        title(
            f"Worker probe: {count_text(len(df), 'step')}, status {run.status}", run, f"mode={run.config.get('mode')}"
        ),
        "step",
        y_title,
    )
    return [Chart(name="probe-steps", figure=fig, data=df)]

"""Charts for a ``health`` run: every judged figure as a percentage of its like-for-like reference (per clock
for a fixed shape), thresholds drawn; what was not comparable is not drawn."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from core.hardware.health_reference import FAR_FRACTION, PASS_FRACTION
from core.health.words import at
from core.result import RunResult
from core.rows.health import HealthSummary, health_rows
from render.chart import Chart
from render.style import style, title

VERDICT_COLORS = {"pass": "#009E73", "below expected": "#E69F00", "far below": "#D55E00"}


def figures(run: RunResult) -> list[Chart]:
    judged = [r for r in health_rows(run) if r.judged]
    if not judged:
        return []
    df = pd.DataFrame(
        {
            "figure": [at(r) for r in judged],
            "percent_of_reference": [100.0 * (r.fraction or 0.0) for r in judged],
            "measured": [r.measured for r in judged],
            "reference": [r.reference for r in judged],
            "unit": [r.unit for r in judged],
            "verdict": [r.verdict for r in judged],
            "reference_kind": [r.reference_kind or "" for r in judged],
        }
    )
    fig = go.Figure(
        go.Bar(
            x=df["percent_of_reference"],
            y=df["figure"],
            orientation="h",
            marker_color=[VERDICT_COLORS.get(v, "#999999") for v in df["verdict"]],
            customdata=df[["measured", "reference", "unit", "verdict", "reference_kind"]],
            hovertemplate="%{y}: %{x:.0f}% of the reference (%{customdata[4]})<br>%{customdata[0]:.4g} "
            "%{customdata[2]}, reference %{customdata[1]:.4g} — %{customdata[3]}<extra></extra>",
        )
    )
    # each threshold named on its own side of its line (both on the right, 15 points apart, they were drawn over
    # each other): "far below" left of its line, "pass" right of its own
    for fraction, name, side in ((PASS_FRACTION, "pass", "top right"), (FAR_FRACTION, "far below", "top left")):
        fig.add_vline(
            x=100 * fraction, line_dash="dash", annotation_text=f"{name}: {fraction:.0%}", annotation_position=side
        )
    style(
        fig,
        title(
            f"Health: {HealthSummary.from_run(run).verdict or run.status}",
            run,
            "measured as % of its like-for-like reference for the SKU (a fixed shape: per clock, same shape)",
        ),
        "measured / reference (%)",
        "figure",
        height=max(300, 40 * len(df) + 140),
    )
    return [Chart(name="health-vs-reference", figure=fig, data=df)]

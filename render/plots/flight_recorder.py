"""The chart of a hung job's flight-recorder dumps: ranks × collective sequence ids of the group that stopped
the job, each cell the state the engine derived (completed, waiting, missing, mismatched, unknown), the stuck
collective outlined."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from core.result import RunResult
from core.rows.flight_recorder import HangSummary
from core.units import duration_text
from render.chart import Chart
from render.style import style, title

STATE_COLORS = {  # the engine's states (core/workload/hang/analysis.py), in the legend's order
    "completed": "#2ca02c",
    "waiting": "#ff7f0e",
    "entered": "#ffbb78",
    "missing": "#d62728",
    "mismatched": "#9467bd",
    "unknown": "#c7c7c7",
}


def grid_table(run: RunResult) -> pd.DataFrame:
    """The grid as rows: rank, seq_id, op, state."""
    g = HangSummary.from_run(run).grid
    return pd.DataFrame(
        [
            {"rank": rank, "seq_id": seq, "op": op, "state": state}
            for rank, states in zip(g.ranks, g.cells, strict=True)
            for seq, op, state in zip(g.seqs, g.ops, states, strict=True)
        ],
        columns=["rank", "seq_id", "op", "state"],
    )


def grid_chart(run: RunResult) -> Chart | None:
    table = grid_table(run)
    if table.empty:
        return None
    fig = go.Figure(
        [
            go.Scatter(
                x=part["seq_id"],
                y=[f"rank {r}" for r in part["rank"]],
                mode="markers",
                name=state,
                marker=dict(symbol="square", size=18, color=color),
                customdata=part["op"],
                hovertemplate=f"%{{y}}, #%{{x}} %{{customdata}}: {state}<extra></extra>",
            )
            for state, color in STATE_COLORS.items()
            if not (part := table[table["state"] == state]).empty
        ]
    )
    summary = HangSummary.from_run(run)
    stuck, late = summary.stuck, summary.late
    detail = "no hang: the ranks agree"
    if late:
        after = duration_text(late.after_ns / 1e9)
        detail = f"no hang: rank {late.rank} entered {late.op} #{late.seq_id} {after} after the others"
    if stuck and stuck.is_collective:
        fig.add_vrect(x0=stuck.seq_id - 0.5, x1=stuck.seq_id + 0.5, line=dict(color="#d62728", width=2))
        detail = f"stuck: {stuck.op} #{stuck.seq_id} (outlined)"
    elif stuck:
        detail = f"stuck: {stuck.op} #{stuck.seq_id} (point-to-point, not in this grid)"
    style(
        fig,
        title(f"Collectives of group {summary.group!r}, rank by rank", run, detail),
        "collective sequence id",
        "rank",
        legend_title="state at the dump",
    )
    fig.update_yaxes(autorange="reversed", type="category")
    fig.update_xaxes(dtick=1)
    return Chart("hang-grid", fig, table)


def figures(run: RunResult) -> list[Chart]:
    return [c for c in (grid_chart(run),) if c is not None]

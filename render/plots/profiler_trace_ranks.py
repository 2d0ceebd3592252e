"""Charts of a job's ranks imported together: each rank's time side by side, the straggler marked, each step
on each rank, and the kernel groups per rank (what the straggler spends its extra time on)."""

from __future__ import annotations

import plotly.graph_objects as go

from core.result import RunResult
from core.rows.trace_ranks import RankTables
from core.rows.trace_summary import RankSetSummary
from core.workload.trace.text import verdict_text
from render.chart import Chart
from render.plots.profiler_trace import COLORS
from render.style import style, title

PARTS = (  # a rank's span, split into parts that add up to it (µs columns of its row)
    ("compute", "compute_us", "#1f77b4"),
    ("exposed communication", "exposed_communication_us", "#17becf"),
    ("other busy (copies alone)", "other_busy_us", "#bcbd22"),
    ("idle", "idle_us", "#c7c7c7"),
)


def _label(rank: int, straggler: int | None) -> str:
    return f"rank {rank} (straggler)" if rank == straggler else f"rank {rank}"


def ranks_chart(run: RunResult) -> Chart | None:
    ranks = RankTables.from_run(run).frame("ranks")
    if ranks.empty:
        return None
    straggler = RankSetSummary.from_run(run).straggler_rank
    # busy = compute ∪ communication ∪ copies; compute ∪ communication = compute + exposed communication
    ranks = ranks.assign(
        other_busy_us=(ranks["busy_us"] - ranks["compute_us"] - ranks["exposed_communication_us"]).clip(lower=0)
    )
    x = [_label(int(r), straggler) for r in ranks["rank"]]
    outline = [3 if int(r) == straggler else 0 for r in ranks["rank"]]
    fig = go.Figure(
        [
            go.Bar(
                x=x,
                y=ranks[column] / 1000,
                name=name,
                marker_color=color,
                marker_line=dict(width=outline, color="#d62728"),
                hovertemplate=f"{name}: %{{y:.3f}} ms<extra></extra>",
            )
            for name, column, color in PARTS
        ]
    )
    summary = RankSetSummary.from_run(run)
    detail = verdict_text(summary)  # the judgement over every figure; runs stored before it name the most compute
    if detail is None:
        s = summary.straggler
        detail = f"straggler rank {s.rank}: {s.margin_pct:+.1f}% compute over the median rank"
    detail += " · each bar is the rank's span (first GPU activity to last)"
    style(fig, title("Ranks side by side: where each rank's time goes", run, detail), "rank", "ms", barmode="stack")
    columns = ["rank", "file", "compute_us", "exposed_communication_us", "other_busy_us", "idle_us", "span_us",
               "communication_us", "kernel_time_us"]  # fmt: skip
    return Chart("ranks-time", fig, ranks.loc[:, columns])


def steps_chart(run: RunResult) -> Chart | None:
    steps = RankTables.from_run(run).frame("steps")
    if steps.empty:
        return None
    straggler = RankSetSummary.from_run(run).straggler_rank
    fig = go.Figure(
        [
            go.Bar(
                x=part["step"].astype(int).astype(str),
                y=part["wall_us"] / 1000,
                name=_label(rank, straggler),
                customdata=(part[["compute_us", "idle_us"]] / 1000).to_numpy(),
                hovertemplate="wall %{y:.3f} ms · compute %{customdata[0]:.3f} ms · idle %{customdata[1]:.3f} ms"
                "<extra></extra>",
            )
            for rank in sorted(int(r) for r in steps["rank"].unique())
            for part in [steps.loc[steps["rank"] == rank]]
        ]
    )
    style(fig, title("Each step on each rank: wall time", run, "ProfilerStep spans"), "ProfilerStep", "ms",
          barmode="group", legend_title="")  # fmt: skip
    return Chart("ranks-steps", fig, steps)


def groups_chart(run: RunResult) -> Chart | None:
    groups = RankTables.from_run(run).frame("groups")
    if groups.empty:
        return None
    straggler = RankSetSummary.from_run(run).straggler_rank
    fig = go.Figure(
        [
            go.Bar(
                x=[_label(int(r), straggler) for r in part["rank"]],
                y=part["total_us"] / 1000,
                name=str(group),
                marker_color=COLORS.get(str(group), "#7f7f7f"),
            )
            for group, part in groups.groupby("group", sort=False)
        ]
    )
    style(fig, title("Kernel time by group, rank by rank", run, "sum of kernel durations"), "rank", "ms",
          barmode="stack", legend_title="group")  # fmt: skip
    return Chart("ranks-groups", fig, groups)


def figures(run: RunResult) -> list[Chart]:
    return [c for c in (ranks_chart(run), steps_chart(run), groups_chart(run)) if c is not None]

"""Charts of an imported profiler trace: where kernel time goes, busy vs idle over time, what overlaps, steps."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from core.result import RunResult
from core.rows.provenance import Provenance
from core.rows.trace import TraceTables
from core.rows.trace_summary import TraceSummary
from core.units import MISSING
from core.workload.trace.diff import TraceDiff, compare
from core.workload.trace.text import largest_changes
from core.workload.trace.timeline import KINDS
from render.chart import Chart
from render.plots.step_bench import GROUP_COLORS
from render.style import color_for, html_text, short_html_text, style, title

# The step benchmark's groups (runs stored before the trace had its own rules use them), the trace's groups.
COLORS = GROUP_COLORS | {
    "communication": "#17becf",
    "memcpy": "#bcbd22",
    "memset": "#8c564b",
    "compute": "#1f77b4",
    "convolution": "#aec7e8",
    "attention": "#ff7f0e",
    "memory": "#bcbd22",
    "embedding": "#e377c2",
    "reduction": "#9edae5",
}
IDLE_COLORS = {"host_wait": "#d62728", "kernel_wait": "#ff9896", "other_wait": "#c7c7c7"}
IDLE_LABELS = {"host_wait": "host wait (launched after the GPU ran dry)", "kernel_wait": "kernel wait (< threshold)",
               "other_wait": "other (events, other streams)"}  # fmt: skip


def _detail(run: RunResult) -> str:
    """Which GPU of the file the figures show (the title's device label names the file and that GPU)."""
    return f"GPU {TraceSummary.from_run(run).device}"


def groups_chart(run: RunResult) -> Chart | None:
    groups = TraceTables.from_run(run).frame("groups")
    if groups.empty:
        return None
    groups = groups.loc[groups["count"] > 0]
    fig = go.Figure(
        go.Bar(
            x=groups["group"],
            y=groups["total_us"] / 1000,
            marker_color=[COLORS.get(g, "#7f7f7f") for g in groups["group"]],
            customdata=groups[["share", "count"]].to_numpy(),
            hovertemplate="%{y:.3f} ms · %{customdata[0]:.1%} of GPU time (kernels + copies + memsets) · "
            "%{customdata[1]} launches<extra></extra>",
        )
    )
    style(
        fig,
        title("Where GPU time goes: kernel groups", run, f"{_detail(run)} · sum of durations"),
        "group",
        "ms",
        showlegend=False,
    )
    return Chart("trace-kernel-groups", fig, groups[["group", "count", "total_us", "share"]])


def kernels_chart(run: RunResult) -> Chart | None:
    kernels = TraceTables.from_run(run).frame("kernels")
    if kernels.empty:
        return None
    data = kernels.sort_values("total_us")
    fig = go.Figure(
        go.Bar(
            x=data["total_us"] / 1000,
            y=[short_html_text(n) for n in data["name"]],
            orientation="h",
            marker_color=[COLORS.get(g, "#7f7f7f") for g in data["group"]],
            customdata=data[["count", "mean_us", "share", "group"]].assign(name=data["name"].map(html_text)).to_numpy(),
            hovertemplate="%{customdata[4]}<br>%{x:.3f} ms · ×%{customdata[0]} · mean %{customdata[1]:.1f} µs · "
            "%{customdata[2]:.1%} of GPU time (kernels + copies + memsets) · %{customdata[3]}<extra></extra>",
        )
    )
    style(fig, title("Top kernels by total time", run, _detail(run)), "ms", "", height=max(400, 26 * len(data) + 150))
    return Chart("trace-top-kernels", fig, kernels)


def busy_chart(run: RunResult) -> Chart | None:
    busy = TraceTables.from_run(run).frame("busy")
    if busy.empty:
        return None
    fig = go.Figure()
    for kind in KINDS:
        column = f"{kind}_share"
        if column in busy and busy.loc[:, column].any():
            fig.add_trace(
                go.Scattergl(
                    x=busy["t_ms"],
                    y=busy[column] * 100,
                    name=kind,
                    mode="lines",
                    line=dict(color=COLORS[kind], width=1),
                )
            )
    fig.add_trace(
        go.Scattergl(
            x=busy["t_ms"],
            y=busy["busy_share"] * 100,
            name="any (busy)",
            mode="lines",
            line=dict(color="black", width=1.5),
        )
    )
    s = TraceSummary.from_run(run)
    style(
        fig,
        title(
            "GPU busy over time",
            run,
            f"{_detail(run)} · idle {s.idle_us / 1000:,.2f} ms of {s.span_us / 1000:,.2f} ms ({s.idle_share:.1%})",
        ),
        "time since the first GPU activity (ms)",
        "% of each bin busy",
        legend_title="",
    )
    return Chart("trace-busy", fig, busy)


def overlap_chart(run: RunResult) -> Chart | None:
    s = TraceSummary.from_run(run)
    if not s.gpu_activities:
        return None
    data = pd.DataFrame(
        [
            {"what": "compute", "ms": s.compute_union_us / 1000},
            {"what": "copies (memcpy + memset)", "ms": s.copy_union_us / 1000},
            {"what": "communication", "ms": s.communication_union_us / 1000},
            {"what": "compute ∩ communication", "ms": s.compute_and_communication_us / 1000},
            {"what": "compute ∩ copies", "ms": s.compute_and_copy_us / 1000},
            {"what": "communication ∩ copies", "ms": s.communication_and_copy_us / 1000},
            {"what": "exposed communication", "ms": s.exposed_communication_us / 1000},
            {"what": "idle", "ms": s.idle_us / 1000},
        ]
    )
    fig = go.Figure(
        go.Bar(x=data["ms"], y=data["what"], orientation="h", marker_color=[color_for(w) for w in data["what"]])
    )
    style(
        fig,
        title(
            "Overlap: time covered by each kind and by two at once",
            run,
            f"{_detail(run)} · unions of intervals, so overlapping kernels count once",
        ),
        "ms",
        "",
    )
    fig.update_yaxes(autorange="reversed")
    return Chart("trace-overlap", fig, data)


def steps_chart(run: RunResult) -> Chart | None:
    steps = TraceTables.from_run(run).frame("steps")
    if steps.empty:
        return None
    fig = go.Figure()
    for group in COLORS:
        column = f"{group}_us"
        if column in steps and steps.loc[:, column].any():
            fig.add_trace(
                go.Bar(x=steps["step"].astype(str), y=steps[column] / 1000, name=group, marker_color=COLORS[group])
            )
    if "idle_us" in steps:
        fig.add_trace(
            go.Scatter(
                x=steps["step"].astype(str),
                y=steps["idle_us"] / 1000,
                name="idle",
                mode="markers+lines",
                line=dict(color="black", dash="dot"),
            )
        )
    style(
        fig,
        title("Per step: kernel time by group, and idle", run, TraceSummary.from_run(run).step_basis),
        "ProfilerStep",
        "ms",
        barmode="stack",
        legend_title="",
    )
    return Chart("trace-steps", fig, steps)


def stream_text(stream: object) -> str:
    """A CUDA stream's number as a person writes it: ``7``, never ``7.0`` (the number a table of rows of several
    kinds turns into a float) or ``nan``."""
    if isinstance(stream, float):
        return MISSING if stream != stream else (str(int(stream)) if stream.is_integer() else str(stream))
    return str(stream)


def idle_causes_chart(run: RunResult) -> Chart | None:
    """Idle gaps between kernels on each stream by cause (HolisticTraceAnalysis' definitions)."""
    idle = TraceTables.from_run(run).frame("idle")
    if idle.empty:
        return None  # a run stored before the idle breakdown
    fig = go.Figure(
        [
            go.Bar(
                x=idle["stream"].map(stream_text),
                y=idle[f"{cause}_us"] / 1000,
                name=IDLE_LABELS[cause],
                marker_color=color,
            )
            for cause, color in IDLE_COLORS.items()
        ]
    )
    style(
        fig,
        title(
            "Why the GPU idles: gaps between kernels on each stream",
            run,
            f"{_detail(run)} · host wait: the kernel's launch call came after the previous kernel ended; kernel "
            f"wait: a gap < {TraceSummary.from_run(run).kernel_wait_threshold_us:g} µs",
        ),
        "stream",
        "ms",
        barmode="stack",
        legend_title="",
    )
    return Chart("trace-idle-causes", fig, idle)


def launch_chart(run: RunResult) -> Chart | None:
    """How long after its launch call each kernel started, and which ran shorter than their call."""
    bins = TraceTables.from_run(run).frame("launch_delays")
    if bins.empty:
        return None
    labels = [f"{_us(lo)}–{_us(hi)}" for lo, hi in zip(bins["from_us"], bins["to_us"])]
    launch = TraceSummary.from_run(run).launch
    if "shorter_than_launch_call" in bins:  # launch-bound: launched onto an idle GPU
        graph = bins["graph_launched"]
        parts = [
            ("queued behind earlier work", bins["count"] - bins["launch_bound"] - graph, "#1f77b4"),
            ("launch-bound (launched onto an idle GPU)", bins["launch_bound"], "#d62728"),
            ("from a CUDA/HIP graph (does not apply)", graph, "#7f7f7f"),
        ]
        verdict = f"launch-bound {launch.launch_bound_share:.1%}"
    else:  # a run stored before: its launch_bound was HolisticTraceAnalysis' short kernels
        parts = [
            ("longer than its launch call", bins["count"] - bins["launch_bound"], "#1f77b4"),
            ("shorter than its launch call (HTA's short kernels)", bins["launch_bound"], "#ff7f0e"),
        ]
        verdict = f"shorter than their launch call {launch.launch_bound_share:.1%}"
    fig = go.Figure(
        [go.Bar(x=labels, y=y, name=name, marker_color=color) for name, y, color in parts if bool((y > 0).any())]
    )
    style(
        fig,
        title(
            "Launch delay: kernel start − its launch call's start",
            run,
            f"{_detail(run)} · median {launch.launch_delay_p50_us:,.1f} µs · {verdict} of {launch.launched:,}",
        ),
        "µs after the launch call",
        "kernels and copies",
        barmode="stack",
        legend_title="",
    )
    return Chart("trace-launch-delay", fig, bins)


def _us(x: float) -> str:
    if x == float("inf"):
        return "∞"
    return f"{x / 1000:g} ms" if x >= 1000 else f"{x:g} µs"


def figures(run: RunResult) -> list[Chart]:
    charts = (
        groups_chart(run),
        busy_chart(run),
        idle_causes_chart(run),
        launch_chart(run),
        overlap_chart(run),
        steps_chart(run),
        kernels_chart(run),
    )
    return [c for c in charts if c is not None]


def overlay(runs: list[RunResult]) -> list[Chart]:
    """Kernel time by group, trace by trace."""
    records = [
        {"trace": _label(run), "group": g.group, "ms": g.total_us / 1000}
        for run in runs
        for g in TraceTables.from_run(run).groups
    ]
    data = pd.DataFrame(records)
    if data.empty:
        return []
    fig = go.Figure(
        [
            go.Bar(x=part["trace"], y=part["ms"], name=group, marker_color=COLORS.get(str(group), "#7f7f7f"))
            for group, part in data.groupby("group", sort=False)
        ]
    )
    style(fig, "Kernel time by group, trace by trace", "trace", "ms", barmode="stack", legend_title="group")
    charts = [Chart("trace-overlay", fig, data)]
    if len(runs) == 2:
        charts.append(diff_chart(runs[0], runs[1]))
        by_cause = cause_diff_chart(runs[0], runs[1])
        if by_cause is not None:
            charts.append(by_cause)
        by_op = op_diff_chart(runs[0], runs[1])
        if by_op is not None:
            charts.append(by_op)
    return charts


def _compared(base: RunResult, new: RunResult) -> TraceDiff:
    return compare(TraceTables.from_run(base), base.meta, TraceTables.from_run(new), new.meta)


def diff_chart(base: RunResult, new: RunResult) -> Chart:
    """What got slower from ``base`` to ``new``, group by group: a waterfall from one side's GPU time to the
    other's (the engine's :func:`core.workload.trace.diff.compare`)."""
    compared = _compared(base, new)
    rows, total = compared.tables.groups, compared.total
    # where the two files are not alike, said in the subtitle before any bar is read (short forms)
    unlike = [text.split(":")[0] for text in compared.mismatches]
    sides = f"{_label(base)} → {_label(new)}" + (f" · not alike: {'; '.join(unlike)}" if unlike else "")
    names = [_label(base), *[str(r.group) for r in rows], _label(new)]
    values = [total.base_us / 1000, *[r.delta_us / 1000 for r in rows], total.new_us / 1000]
    fig = go.Figure(
        go.Waterfall(
            x=[html_text(n) for n in names],
            y=values,
            measure=["absolute", *["relative"] * len(rows), "total"],
            increasing={"marker": {"color": "#d62728"}},
            decreasing={"marker": {"color": "#2ca02c"}},
            hovertemplate="%{x}: %{y:.3f} ms<extra></extra>",
        )
    )
    style(
        fig,
        title("What got slower: GPU time (kernels, copies, memsets) by group", None, sides),
        "kernel group (largest slow-down first)",
        "ms",
        showlegend=False,
    )
    return Chart("trace-diff", fig, pd.DataFrame([r.to_row() for r in rows]))


def cause_diff_chart(base: RunResult, new: RunResult) -> Chart | None:
    """Why the step changed: the median step's GPU idle by the host's cause, side by side (the engine's
    :func:`core.workload.trace.diff.causes`), under the diff's headline; None without steps on both sides."""
    compared = _compared(base, new)
    if not compared.tables.causes:
        return None
    data = pd.DataFrame([r.to_row() for r in compared.tables.causes])
    fig = go.Figure(
        [
            go.Bar(x=data["figure"], y=data[key] / 1000, name=html_text(_label(run)))
            for key, run in (("base_us", base), ("new_us", new))
        ]
    )
    said = compared.headline
    style(
        fig,
        title("Why the step changed: the GPU idle in the median step, by the host's cause", None, html_text(said)),
        "the host's cause (largest change first)",
        "ms per step",
        barmode="group",
    )
    return Chart("trace-diff-causes", fig, data)


OP_BARS = 15


def op_diff_chart(base: RunResult, new: RunResult) -> Chart | None:
    """The change by CPU operator (the engine's :func:`core.workload.trace.diff.operators`): the operators
    that changed most either way, where kernel names of two vendors do not meet; None when a side has no
    operator figures."""
    rows = _compared(base, new).tables.ops
    if not rows:
        return None
    shown = largest_changes(rows, OP_BARS)[::-1]  # rows come largest slow-down first: the bars rise to it
    data = pd.DataFrame([r.to_row() for r in rows])
    fig = go.Figure(
        go.Bar(
            x=[r.delta_us / 1000 for r in shown],
            y=[short_html_text(r.op, 40) for r in shown],
            orientation="h",
            marker_color=["#d62728" if r.delta_us > 0 else "#2ca02c" for r in shown],
            customdata=[[r.base_us / 1000, r.new_us / 1000, r.base_count, r.new_count] for r in shown],
            hovertemplate="%{y}: %{customdata[0]:.3f} → %{customdata[1]:.3f} ms (%{x:+.3f} ms), "
            "%{customdata[2]} → %{customdata[3]} calls<extra></extra>",
        )
    )
    subtitle = f"{_label(base)} → {_label(new)}; the {len(shown)} operators that changed most of {len(rows)}"
    style(
        fig,
        title("What got slower by CPU operator: its kernels' GPU time, new − base", None, subtitle),
        "change in GPU time (ms)",
        "operator",
        showlegend=False,
    )
    return Chart("trace-diff-ops", fig, data)


def _label(run: RunResult) -> str:
    return run.name or Provenance.from_run(run).file or run.id[:8]

"""Charts of a ``step-bench`` run: stacks side by side, phase times, first steps vs warm, kernel groups, the
precision sweep and the size × precision grid. A run stored before stacks existed is the course's stack."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd
import plotly.graph_objects as go

from core.result import RunResult, rows_frame
from core.rows.step_bench import ConfigRow, StackSummary, StepBenchMeta, StepBenchTables, Stored
from core.transformer.mfu import HOST_BOUND_BUSY
from core.transformer.presets import DTYPE_FOR_PRECISION
from core.units import MISSING, bytes_text, throughput_unit
from render.chart import Chart
from render.node import is_all_gpus, node_chart
from render.style import color_for, html_text, short_html_text, style, title
from render.table import with_dashes

PHASE_ORDER = ("forward", "backward", "optimizer", "zero_grad", "step")
SCOPE_LABELS = {"forward": "forward only", "step": "full step"}
GROUP_COLORS = {
    "matmul": "#1f77b4",
    "attention-softmax": "#d62728",
    "elementwise": "#ff7f0e",
    "normalisation": "#2ca02c",
    "optimizer": "#9467bd",
    "other": "#7f7f7f",
}
# One colour per dtype across the lab: a precision mode takes its matmul dtype's colour (DTYPE_FOR_PRECISION).


STACK_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")


def _detail(run: RunResult) -> str:
    c = run.config
    precision = "all precision modes" if c.get("sweep") else c.get("precision")
    batch = StepBenchMeta.from_run(run).batch or c.get("batch")
    return f"{c.get('model')} · batch {batch} × {c.get('context')} tokens · {precision} · {c.get('optimizer')}"


def table_frame(run: RunResult, rows: Sequence[Stored]) -> pd.DataFrame:
    """One table's rows as a chart plots them: the stored columns some row fills, in the order and with the types
    the run's whole frame gives them (a key other tables lack is a float column there), as every chart and export
    has drawn them."""
    if not rows:
        return pd.DataFrame()
    part = rows_frame([r.to_row() for r in rows]).dropna(axis=1, how="all")
    whole = run.frame()
    columns = [c for c in whole.columns if c in part]
    return pd.DataFrame(part[columns].astype({c: whole[c].dtype for c in columns}))


def tables(run: RunResult) -> StepBenchTables:
    return StepBenchTables.from_run(run)


def with_stack(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows with their stack named (a run stored before stacks existed ran the course's)."""
    if rows.empty:
        return rows
    return rows.assign(stack=rows["stack"].fillna("course") if "stack" in rows else "course")


def stacks_of(rows: pd.DataFrame) -> list[str]:
    return list(dict.fromkeys(with_stack(rows)["stack"])) if not rows.empty else []


def stack_color(stacks: list[str], stack: str) -> str:
    return STACK_COLORS[stacks.index(stack) % len(STACK_COLORS)]


SLOWER = 1.1  # a first step this many times the warm median or more is "slower": what it paid for is said


def cold_text(summary: StackSummary, cold_includes: str | None) -> str:
    """The first step without warm-up against the warm median, in words that follow the figures: what the
    first steps pay for (``cold_includes``, the run's) only when they were slower; else that they were not."""
    first, ratio = summary.first_step_ms, summary.first_step_over_median
    if first is None or ratio is None:
        return ""
    said = f"First step without warm-up: **{first:.1f} ms**, {ratio:.1f}× the warmed-up median"
    if ratio >= SLOWER:
        return f"{said}: slower; {cold_includes or 'the first calls set things up'}."
    if ratio > 1 / SLOWER:
        return f"{said}: no slower than the warmed-up steps, so this run shows no first-call cost."
    return (
        f"{said}: faster than the warmed-up steps, so this run shows no first-call cost; the warmed-up steps "
        "were the slow ones (the machine's other work, clocks or memory growing as the run went on)."
    )


SHARE_COLUMN = "share of profiled time (%)"  # as the kernel-group chart beside it says it


def kernel_table(run: RunResult) -> pd.DataFrame:
    """The profiled kernels (a CPU's ops) as the page lists them, each one's share of the profiled time in %,
    the unit of the charts above it (the rows keep it as a fraction)."""
    kernels = with_stack(table_frame(run, tables(run).kernels))
    if kernels.empty:
        return kernels
    columns = ["device"] * ("device" in kernels) + ["stack"] * (len(stacks_of(kernels)) > 1)
    columns += ["scope", "rank", "name", "group", "count_per_step", "ms_per_step"]
    return kernels[columns].assign(**{SHARE_COLUMN: (kernels["share"] * 100).round(2)})


def phase_chart(run: RunResult) -> Chart | None:
    samples = with_stack(table_frame(run, tables(run).samples))
    if samples.empty:
        return None
    warm = samples.loc[samples["series"] == "warm"]
    stacks = stacks_of(warm)
    fig = go.Figure()
    if len(stacks) > 1:  # each stack's boxes side by side at every phase
        for stack in stacks:
            part = warm.loc[warm["stack"] == stack]
            fig.add_trace(
                go.Box(
                    x=part["phase"],
                    y=part["ms"],
                    name=stack,
                    boxmean="sd",
                    marker_color=stack_color(stacks, stack),
                )
            )
        fig.update_layout(boxmode="group")
        fig.update_xaxes(categoryorder="array", categoryarray=list(PHASE_ORDER))
    for phase in PHASE_ORDER if len(stacks) == 1 else ():
        values = warm.loc[warm["phase"] == phase, "ms"]
        if len(values):
            fig.add_trace(
                go.Box(
                    y=values,
                    name=phase,
                    boxmean="sd",
                    boxpoints="all",
                    jitter=0.4,
                    pointpos=0,
                    marker_color=GROUP_COLORS["matmul"] if phase == "step" else "#8c8c8c",
                )
            )
    style(
        fig,
        title(
            "Time per phase (after warm-up)",
            run,
            f"{_detail(run)} · box: median and quartiles, dashed: mean ± std, dots: every timed step",
        ),
        "phase",
        "ms",
        showlegend=len(stacks) > 1,
        legend_title="stack",
    )
    return Chart("step-phase-times", fig, warm[["stack", "step", "phase", "ms"]])


COLD_SERIES = (("cold", "first steps, no warm-up", "#d62728"), ("warm", "after warm-up", "#1f77b4"))


def _numbered(run: RunResult, part: pd.DataFrame, summary: StackSummary | None) -> pd.DataFrame:
    """A stack's steps numbered as its model ran them: the warm ones after the cold ones and the warm-up."""
    warmed = run.config.get("warmup_steps", 0)
    if summary is not None and summary.warmup_steps_run is not None:
        warmed = int(summary.warmup_steps_run)
    part = part.copy()
    part["step_in_process"] = part["step"] + (part["series"] == "warm") * (run.config.get("cold_steps", 0) + warmed)
    return part


def _cold_lines(fig: go.Figure, part: pd.DataFrame, stack: str, stacks: list[str]) -> None:
    many = len(stacks) > 1
    for series, label, color in COLD_SERIES:
        line = part[part["series"] == series]
        if len(line):
            fig.add_trace(
                go.Scatter(
                    x=line["step_in_process"],
                    y=line["ms"],
                    mode="lines+markers",
                    name=f"{stack}: {label}" if many else label,
                    line=dict(
                        color=stack_color(stacks, stack) if many else color,
                        dash="dot" if many and series == "cold" else None,
                    ),
                )
            )


def _median_line(fig: go.Figure, part: pd.DataFrame, median: float, stack: str, stacks: list[str]) -> None:
    """The engine's median of the warm steps, read, not recomputed: a trace, not an annotation (a log axis reads an
    annotation's y as log10(y) and stretched to 10^77)."""
    many = len(stacks) > 1
    fig.add_trace(
        go.Scatter(
            x=[part["step_in_process"].min(), part["step_in_process"].max()],
            y=[median, median],
            mode="lines",
            name=(f"{stack}: " if many else "") + f"warm median {median:.2f} ms",
            line=dict(color=stack_color(stacks, stack) if many else "#1f77b4", dash="dash", width=1),
            hoverinfo="skip",
        )
    )


def cold_chart(run: RunResult) -> Chart | None:
    tabs = tables(run)
    samples = with_stack(table_frame(run, tabs.samples))
    if samples.empty:
        return None
    steps = samples.loc[samples["phase"] == "step"].copy()
    stacks = stacks_of(steps)
    fig = go.Figure()
    parts = []
    for stack in stacks:
        summary = next((s for s in tabs.summaries if s.stack_name == stack), None)
        part = _numbered(run, steps.loc[steps["stack"] == stack], summary)
        parts.append(part)
        _cold_lines(fig, part, stack, stacks)
        if summary is not None and summary.step_ms_median is not None:
            _median_line(fig, part, float(summary.step_ms_median), stack, stacks)
    steps = pd.DataFrame(pd.concat(parts))
    style(
        fig,
        title("First steps without warm-up vs warmed-up steps", run, _detail(run)),
        "step number of the stack's model",
        "ms per step (log)",
        legend_title="series",
    )
    fig.update_yaxes(type="log", range=log_range(pd.Series(steps["ms"])))
    return Chart("step-cold-vs-warm", fig, pd.DataFrame(steps[["stack", "series", "step", "step_in_process", "ms"]]))


def log_range(values: pd.Series, margin: float = 1.5) -> list[float] | None:
    """A log axis's range (in log10 units, as Plotly wants it) from the data: min / margin … max × margin."""
    positive = values.loc[values > 0]
    if positive.empty:
        return None
    return [math.log10(float(positive.min()) / margin), math.log10(float(positive.max()) * margin)]


def groups_chart(run: RunResult) -> Chart | None:
    groups = with_stack(table_frame(run, tables(run).groups))
    if groups.empty:
        return None
    many = len(stacks_of(groups)) > 1
    fig = go.Figure()
    for group, color in GROUP_COLORS.items():
        part = groups[groups["group"] == group]
        fig.add_trace(
            go.Bar(
                x=[
                    f"{t}<br>{SCOPE_LABELS[s]}" if many else SCOPE_LABELS[s]
                    for t, s in zip(part["stack"], part["scope"])
                ],
                y=part["share"] * 100,
                name=group,
                marker_color=color,
                customdata=part["ms_per_step"],
                hovertemplate="%{y:.1f}% · %{customdata:.3f} ms per step<extra>" + group + "</extra>",
            )
        )
    measure = StepBenchMeta.from_run(run).profile_measure
    style(
        fig,
        title("Where the time goes: kernel groups", run, f"{_detail(run)} · {measure}"),
        "",
        "share of profiled time (%)",
        barmode="stack",
        legend_title="group",
    )
    return Chart("step-kernel-groups", fig, groups.loc[:, ["stack", "scope", "group", "ms_per_step", "share"]])


def kernels_charts(run: RunResult) -> list[Chart]:
    """The full step's top kernels, one chart a stack."""
    kernels = with_stack(table_frame(run, tables(run).kernels))
    stacks = stacks_of(kernels)
    charts = []
    for stack in stacks:
        step = kernels.loc[(kernels["scope"] == "step") & (kernels["stack"] == stack)].sort_values("ms_per_step")
        fig = go.Figure(
            go.Bar(
                x=step["ms_per_step"],
                y=[short_html_text(n) for n in step["name"]],
                orientation="h",
                marker_color=[GROUP_COLORS.get(g, "#7f7f7f") for g in step["group"]],
                customdata=step[["count_per_step", "share", "group"]]
                .assign(name=step["name"].map(html_text))
                .to_numpy(),
                hovertemplate="%{customdata[3]}<br>%{x:.3f} ms per step · %{customdata[0]:.0f} calls · "
                "%{customdata[1]:.1%} · %{customdata[2]}<extra></extra>",
            )
        )
        which = f" · stack {stack}" if len(stacks) > 1 else ""
        style(
            fig,
            title(f"Top kernels of the full step (by total time){which}", run, _detail(run)),
            "ms per step",
            "",
            height=max(400, 26 * len(step) + 150),
        )
        name = "step-top-kernels" + (f"-{stack}" if len(stacks) > 1 else "")
        charts.append(Chart(name, fig, kernels.loc[kernels["stack"] == stack]))
    return charts


def time_vs_flops_chart(run: RunResult) -> Chart | None:
    groups = with_stack(table_frame(run, tables(run).groups))
    if groups.empty:
        return None
    part = groups.loc[groups["group"].isin(["matmul", "attention-softmax"])]
    many = len(stacks_of(groups)) > 1
    labels = [
        (f"{t} · " if many else "") + f"{g}<br>{SCOPE_LABELS[s]}"
        for t, g, s in zip(part["stack"], part["group"], part["scope"])
    ]
    fig = go.Figure(
        [
            go.Bar(x=labels, y=part["share"] * 100, name="share of time", marker_color="#1f77b4"),
            go.Bar(
                x=labels, y=part["flops_share"] * 100, name="share of FLOPs (softmax: estimate)", marker_color="#bcbd22"
            ),
        ]
    )
    style(fig, title("Share of time vs share of FLOPs", run, _detail(run)), "", "%", barmode="group")
    return Chart("step-time-vs-flops", fig, part[["stack", "scope", "group", "share", "flops_share"]])


MFU_COLUMNS = {  # stored figure → what it is over, as the tables and charts say it
    "mfu": "MFU (bf16 dense peak)",
    "mfu_measured": "MFU (measured bf16 ceiling)",
    "mfu_unit": "MFU (own unit's peak)",
}


def stack_table(run: RunResult) -> pd.DataFrame:
    """The stacks of a single run side by side, as the page lists them: time, throughput, the three MFUs (in %),
    the device's busy share, the warm-up it took and the memory the planner predicted against the measured."""
    summaries = with_stack(table_frame(run, tables(run).summaries))
    if summaries.empty:
        return summaries
    unit, scale = throughput_unit(run.device_info.is_cuda)
    out = pd.DataFrame({"stack": summaries["stack"]})
    out["step (ms, median)"] = summaries["step_ms_median"].round(3)
    if {"step_ms_p20", "step_ms_p80"} <= set(summaries):
        out["step p20–p80 (ms)"] = [
            f"{a:.3f}–{b:.3f}" for a, b in zip(summaries["step_ms_p20"], summaries["step_ms_p80"])
        ]
    out["tokens/s"] = summaries["tokens_per_s"].round(0)
    out[f"achieved ({unit})"] = (summaries["achieved_tflops"] * scale).round(2)
    for column, label in MFU_COLUMNS.items():  # every one, "—" where a run has none (a CPU: no datasheet peak)
        out[f"{label} (%)"] = (summaries[column] * 100).round(2) if column in summaries else None
    out["device busy (%)"] = (summaries["busy"] * 100).round(1) if "busy" in summaries else None
    if "warmup_steps_run" in summaries:
        steady = summaries["steady"] if "steady" in summaries else pd.Series([None] * len(summaries))
        out["warm-up steps"] = [
            f"{int(n)} ({'steady' if ok else 'not steady'})" if pd.notna(n) else MISSING
            for n, ok in zip(summaries["warmup_steps_run"], steady)
        ]
    if "compile_s" in summaries:
        out["compile (s)"] = summaries["compile_s"].round(1)
    if "peak_estimated_bytes" in summaries:
        none = pd.Series([None] * len(summaries))
        measured = summaries["peak_measured_bytes"] if "peak_measured_bytes" in summaries else none
        out["peak memory: planner / measured"] = [
            f"{bytes_text(e)} / {bytes_text(m) if pd.notna(m) else MISSING}"
            for e, m in zip(summaries["peak_estimated_bytes"], measured)
        ]
    return with_dashes(out.reset_index(drop=True))


def host_bound_stacks(rows: Sequence[StackSummary | ConfigRow]) -> list[str]:
    """The configurations (stack, and precision or model where a run has several) whose device was busy less than
    the host-bound threshold of the step."""
    grid = any(isinstance(r, ConfigRow) and r.in_grid for r in rows)
    names = []
    for r in rows:
        if r.busy is not None and r.busy < HOST_BOUND_BUSY:
            parts = [r.model if grid else None, r.stack_name, r.precision]
            names.append(" · ".join(str(p) for p in parts if p) + f" ({r.busy:.0%} busy)")
    return names


def stacks_chart(run: RunResult) -> Chart | None:
    """The stacks of a single run: each MFU side by side (their denominators named), tokens/s in the hover."""
    summaries = with_stack(table_frame(run, tables(run).summaries))
    if len(summaries) < 2:
        return None
    fig, y = go.Figure(), "MFU (%)"
    for column, label in MFU_COLUMNS.items():
        if column in summaries and bool(summaries[column].notna().any()):
            fig.add_trace(
                go.Bar(
                    x=summaries["stack"],
                    y=summaries[column] * 100,
                    name=label,
                    customdata=summaries["tokens_per_s"],
                    hovertemplate="%{y:.1f}% · %{customdata:,.0f} tokens/s<extra>" + label + "</extra>",
                )
            )
    if not fig.data:  # no peak and no measured ceiling (a CPU without a matmul run): tokens/s instead
        fig.add_trace(go.Bar(x=summaries["stack"], y=summaries["tokens_per_s"], name="tokens/s"))
        y = "tokens/s"
    style(fig, title("Stacks side by side", run, _detail(run)), "stack", y, barmode="group", legend_title="figure")
    columns = ["stack", "step_ms_median", "tokens_per_s", *[c for c in MFU_COLUMNS if c in summaries]]
    return Chart("step-stacks", fig, pd.DataFrame(summaries[columns]))


def _config_label(row: pd.Series, stacks: list[str]) -> str:
    return str(row["precision"]) + (f" · {row['stack']}" if len(stacks) > 1 else "")


def _say_why_not(fig: go.Figure, modes: Sequence[ConfigRow], precisions: list[str]) -> None:
    """A precision no stack ran: its status at the foot of its bar, the reason in the hover."""
    for precision in precisions:
        mine = [m for m in modes if m.precision == precision]
        failed = [m for m in mine if not m.ok]
        if len(failed) == len(mine):
            fig.add_annotation(
                x=precision,
                y=0,
                yref="paper",
                yanchor="bottom",
                text=failed[0].status,
                hovertext=failed[0].reason,
                showarrow=False,
                textangle=-90,
                font=dict(color="#7f7f7f"),
            )


def sweep_charts(run: RunResult) -> list[Chart]:
    typed = tables(run).precisions
    modes = with_stack(table_frame(run, typed))
    if modes.empty:
        return []
    stacks = stacks_of(modes)
    precisions = list(dict.fromkeys(modes["precision"]))
    ms, tokens = go.Figure(), go.Figure()
    for stack in stacks:
        ok = modes.loc[(modes["status"] == "ok") & (modes["stack"] == stack)]
        many = len(stacks) > 1
        colors = stack_color(stacks, stack) if many else [color_for(DTYPE_FOR_PRECISION[p]) for p in ok["precision"]]
        patterns = ["/" if p == "bf16" else "" for p in ok["precision"]]
        bars = dict(x=ok["precision"], name=stack, marker_color=colors, marker_pattern_shape=patterns)
        spread = dict(
            array=ok["step_ms_p80"] - ok["step_ms_median"], arrayminus=ok["step_ms_median"] - ok["step_ms_p20"]
        )
        ms.add_trace(go.Bar(**bars, y=ok["step_ms_median"], error_y=dict(type="data", symmetric=False, **spread)))
        tokens.add_trace(
            go.Bar(
                **bars,
                y=ok["tokens_per_s"],
                text=[f"{s:.2f}× fp32" if s == s else "" for s in ok.get("speedup_vs_fp32", [])],
                textposition="outside",
            )
        )
    for fig in (ms, tokens):
        fig.update_xaxes(categoryorder="array", categoryarray=precisions)
        fig.update_layout(barmode="group", showlegend=len(stacks) > 1, legend_title_text="stack")
        _say_why_not(fig, typed, precisions)
    style(
        ms,
        title("Precision sweep: ms per step", run, f"{_detail(run)} · median, bars p20–p80"),
        "precision mode",
        "ms per step",
    )
    style(tokens, title("Precision sweep: tokens per second", run, _detail(run)), "precision mode", "tokens/s")
    table = config_columns(modes)
    return [Chart("step-precision-ms", ms, table), Chart("step-precision-tokens", tokens, table)]


CONFIG_COLUMNS = (
    "model",
    "params",
    "batch",
    "precision",
    "stack",
    "status",
    "reason",
    "step_ms_median",
    "step_ms_p20",
    "step_ms_p80",
    "tokens_per_s",
    "speedup_vs_fp32",
    "achieved_tflops",
    *MFU_COLUMNS,
    "busy",
    "warmup_steps_run",
    "steady",
)


def config_columns(rows: pd.DataFrame) -> pd.DataFrame:
    """A sweep's or a grid's rows, the columns a reader compares (the figures as stored, fractions as fractions):
    what its charts export."""
    return rows.loc[:, [c for c in CONFIG_COLUMNS if c in rows]].reset_index(drop=True)


def config_table(run: RunResult) -> pd.DataFrame:
    """A sweep's or a grid's :func:`config_columns` as the page lists them: a value a configuration lacks (one that
    did not run has no time) written "—", never None or nan."""
    rows = table_frame(run, tables(run).configs)
    return rows if rows.empty else with_dashes(config_columns(rows))


def grid_charts(run: RunResult) -> list[Chart]:
    """Tokens/s and MFU against parameters, a line per precision (and stack): where bf16 starts to pay."""
    grid = with_stack(table_frame(run, tables(run).grid))
    if grid.empty:
        return []
    ok = grid.loc[grid["status"] == "ok"]
    stacks = stacks_of(grid)
    charts = []
    for column, y_title, name in (
        ("tokens_per_s", "tokens/s (log)", "step-grid-tokens"),
        ("mfu", "MFU over the bf16 dense peak (%)", "step-grid-mfu"),
    ):
        if column not in ok or ok[column].isna().all():
            continue
        fig = go.Figure()
        for (precision, stack), line in ok.groupby(["precision", "stack"], sort=False):
            line = line.sort_values("params")
            fig.add_trace(
                go.Scatter(
                    x=line["params"],
                    y=line[column] * (100 if column == "mfu" else 1),
                    mode="lines+markers",
                    name=str(precision) + (f" · {stack}" if len(stacks) > 1 else ""),
                    text=line["model"],
                    line=dict(color=color_for(DTYPE_FOR_PRECISION.get(str(precision), str(precision)))),
                    hovertemplate="%{text}: %{y:,.1f}<extra>%{fullData.name}</extra>",
                )
            )
        style(
            fig,
            title("Size × precision: " + ("tokens per second" if column == "tokens_per_s" else "MFU"), run),
            "parameters (log)",
            y_title,
            legend_title="precision",
        )
        fig.update_xaxes(type="log")
        if column == "tokens_per_s":
            fig.update_yaxes(type="log")
        charts.append(Chart(name, fig, config_columns(grid)))
    return charts


def per_gpu_chart(run: RunResult) -> Chart | None:
    """A run on every GPU: each GPU's warm step times side by side (a sweep: tokens/s per mode and GPU)."""
    if run.config.get("sweep"):
        modes = table_frame(run, tables(run).precisions)
        if modes.empty or "tokens_per_s" not in modes:
            return None
        ok = modes.loc[modes["status"] == "ok"]
        fig = go.Figure(
            [
                go.Bar(x=g["precision"], y=g["tokens_per_s"], name=device)
                for device, g in ok.groupby("device", sort=False)
            ]
        )
        style(
            fig,
            title("Precision sweep on every GPU", run, _detail(run)),
            "precision mode",
            "tokens/s",
            barmode="group",
            legend_title="GPU",
        )
        return Chart("step-per-gpu-tokens", fig, ok[["device", "precision", "tokens_per_s", "step_ms_median"]])
    samples = table_frame(run, tables(run).samples)
    if samples.empty:
        return None
    steps = samples.loc[(samples["series"] == "warm") & (samples["phase"] == "step")]
    fig = go.Figure(
        [
            go.Box(y=g["ms"], name=device, boxpoints="all", jitter=0.4, pointpos=0)
            for device, g in steps.groupby("device", sort=False)
        ]
    )
    style(
        fig,
        title("Step time on every GPU (after warm-up)", run, f"{_detail(run)} · every timed step"),
        "GPU",
        "ms per step",
        showlegend=False,
    )
    return Chart("step-per-gpu-times", fig, steps[["device", "step", "ms"]])


def figures(run: RunResult) -> list[Chart]:
    if is_all_gpus(run):
        return [c for c in (node_chart(run), per_gpu_chart(run)) if c is not None]
    if run.config.get("models"):
        return grid_charts(run)
    if run.config.get("sweep"):
        return sweep_charts(run)
    charts = (stacks_chart(run), phase_chart(run), cold_chart(run), groups_chart(run), time_vs_flops_chart(run))
    return [c for c in charts if c is not None] + kernels_charts(run)


def _answered(run: RunResult) -> Sequence[StackSummary | ConfigRow]:
    """What a run answers: every point of a grid, every mode of a sweep, every stack of a single run."""
    tabs = tables(run)
    return tabs.grid if run.config.get("models") else tabs.precisions if run.config.get("sweep") else tabs.summaries


def overlay(runs: list[RunResult]) -> list[Chart]:
    """Median ms per step of each run (every stack of single runs, every mode of sweeps, every point of grids)."""
    records = []
    for run in runs:
        grid = bool(run.config.get("models"))
        for row in _answered(run):
            if isinstance(row, ConfigRow) and not row.ok:
                continue
            where = f"{run.name or run.id[:8]} · {run.device.get('name', '')}"
            model = f" · {row.model}" if grid else ""
            stack = "" if row.stack_name == "course" else f" · {row.stack_name}"
            records.append(
                {
                    "run": where + model + stack,
                    "precision": row.precision,
                    "step_ms_median": row.step_ms_median,
                    "tokens_per_s": row.tokens_per_s,
                }
            )
    data = pd.DataFrame(records)
    if data.empty:
        return []
    fig = go.Figure(
        [
            go.Bar(
                x=part["run"].map(html_text),
                y=part["step_ms_median"],
                name=precision,
                marker_color=color_for(DTYPE_FOR_PRECISION.get(str(precision), str(precision))),
            )
            for precision, part in data.groupby("precision", sort=False)
        ]
    )
    style(fig, "Step time across runs", "run", "median ms per step", barmode="group", legend_title="precision")
    return [Chart("step-bench-overlay", fig, data)]

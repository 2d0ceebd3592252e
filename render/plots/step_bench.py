"""Charts of a ``step-bench`` run: phase times, first steps vs warm, kernel groups, precision sweep."""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go

from core.result import RunResult
from core.transformer.presets import DTYPE_FOR_PRECISION
from render.chart import Chart, kind_rows
from render.node import is_all_gpus, node_chart
from render.style import color_for, html_text, short_html_text, style, title

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


def _detail(run: RunResult) -> str:
    c = run.config
    precision = "all precision modes" if c.get("sweep") else c.get("precision")
    return f"{c.get('model')} · batch {c.get('batch')} × {c.get('context')} tokens · {precision} · {c.get('optimizer')}"


SLOWER = 1.1  # a first step this many times the warm median or more is "slower": what it paid for is said


def cold_text(summary: dict, meta: dict) -> str:
    """The first step without warm-up against the warm median, in words that follow the figures: what the
    first steps pay for (``meta["cold_includes"]``) only when they were slower; else that they were not."""
    first, ratio = summary.get("first_step_ms"), summary.get("first_step_over_median")
    if first is None or ratio is None:
        return ""
    said = f"First step without warm-up: **{first:.1f} ms**, {ratio:.1f}× the warmed-up median"
    if ratio >= SLOWER:
        return f"{said}: slower; {meta.get('cold_includes') or 'the first calls set things up'}."
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
    kernels = kind_rows(run, "kernel")
    if kernels.empty:
        return kernels
    columns = ["device"] * ("device" in kernels) + ["scope", "rank", "name", "group", "count_per_step", "ms_per_step"]
    return kernels[columns].assign(**{SHARE_COLUMN: (kernels["share"] * 100).round(2)})


def phase_chart(run: RunResult) -> Chart | None:
    samples = kind_rows(run, "sample")
    if samples.empty:
        return None
    warm = samples.loc[samples["series"] == "warm"]
    fig = go.Figure()
    for phase in PHASE_ORDER:
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
        showlegend=False,
    )
    return Chart("step-phase-times", fig, warm[["step", "phase", "ms"]])


def cold_chart(run: RunResult) -> Chart | None:
    samples = kind_rows(run, "sample")
    if samples.empty:
        return None
    steps = samples.loc[samples["phase"] == "step"].copy()
    # warm steps come after the cold ones and the untimed warm-up: number them as the process ran them
    offset = run.config.get("cold_steps", 0) + run.config.get("warmup_steps", 0)
    steps["step_in_process"] = steps["step"] + (steps["series"] == "warm") * offset
    fig = go.Figure()
    for series, label, color in (("cold", "first steps, no warm-up", "#d62728"), ("warm", "after warm-up", "#1f77b4")):
        part = steps[steps["series"] == series]
        if len(part):
            fig.add_trace(
                go.Scatter(
                    x=part["step_in_process"], y=part["ms"], mode="lines+markers", name=label, line=dict(color=color)
                )
            )
    summary = kind_rows(run, "summary")
    if len(summary) and "step_ms_median" in summary:  # the engine's median of the warm steps, read, not recomputed
        # a trace, not an annotation: a log axis reads an annotation's y as log10(y) and stretched to 10^77
        median = float(summary["step_ms_median"].iloc[0])
        fig.add_trace(
            go.Scatter(
                x=[steps["step_in_process"].min(), steps["step_in_process"].max()],
                y=[median, median],
                mode="lines",
                name=f"warm median {median:.2f} ms",
                line=dict(color="#1f77b4", dash="dash", width=1),
                hoverinfo="skip",
            )
        )
    style(
        fig,
        title("First steps without warm-up vs warmed-up steps", run, _detail(run)),
        "step number since the process started",
        "ms per step (log)",
        legend_title="series",
    )
    fig.update_yaxes(type="log", range=log_range(steps["ms"]))
    return Chart("step-cold-vs-warm", fig, steps[["series", "step", "step_in_process", "ms"]])


def log_range(values: pd.Series, margin: float = 1.5) -> list[float] | None:
    """A log axis's range (in log10 units, as Plotly wants it) from the data: min / margin … max × margin."""
    positive = values.loc[values > 0]
    if positive.empty:
        return None
    return [math.log10(float(positive.min()) / margin), math.log10(float(positive.max()) * margin)]


def groups_chart(run: RunResult) -> Chart | None:
    groups = kind_rows(run, "group")
    if groups.empty:
        return None
    fig = go.Figure()
    for group, color in GROUP_COLORS.items():
        part = groups[groups["group"] == group]
        fig.add_trace(
            go.Bar(
                x=[SCOPE_LABELS[s] for s in part["scope"]],
                y=part["share"] * 100,
                name=group,
                marker_color=color,
                customdata=part["ms_per_step"],
                hovertemplate="%{y:.1f}% · %{customdata:.3f} ms per step<extra>" + group + "</extra>",
            )
        )
    measure = run.meta.get("profile_measure", "")
    style(
        fig,
        title("Where the time goes: kernel groups", run, f"{_detail(run)} · {measure}"),
        "",
        "share of profiled time (%)",
        barmode="stack",
        legend_title="group",
    )
    return Chart("step-kernel-groups", fig, groups.loc[:, ["scope", "group", "ms_per_step", "share"]])


def kernels_chart(run: RunResult) -> Chart | None:
    kernels = kind_rows(run, "kernel")
    if kernels.empty:
        return None
    step = kernels.loc[kernels["scope"] == "step"].sort_values("ms_per_step")
    fig = go.Figure(
        go.Bar(
            x=step["ms_per_step"],
            y=[short_html_text(n) for n in step["name"]],
            orientation="h",
            marker_color=[GROUP_COLORS.get(g, "#7f7f7f") for g in step["group"]],
            customdata=step[["count_per_step", "share", "group"]].assign(name=step["name"].map(html_text)).to_numpy(),
            hovertemplate="%{customdata[3]}<br>%{x:.3f} ms per step · %{customdata[0]:.0f} calls · "
            "%{customdata[1]:.1%} · %{customdata[2]}<extra></extra>",
        )
    )
    style(
        fig,
        title("Top kernels of the full step (by total time)", run, _detail(run)),
        "ms per step",
        "",
        height=max(400, 26 * len(step) + 150),
    )
    return Chart("step-top-kernels", fig, kernels)


def time_vs_flops_chart(run: RunResult) -> Chart | None:
    groups = kind_rows(run, "group")
    if groups.empty:
        return None
    part = groups.loc[groups["group"].isin(["matmul", "attention-softmax"])]
    labels = [f"{g}<br>{SCOPE_LABELS[s]}" for g, s in zip(part["group"], part["scope"])]
    fig = go.Figure(
        [
            go.Bar(x=labels, y=part["share"] * 100, name="share of time", marker_color="#1f77b4"),
            go.Bar(
                x=labels, y=part["flops_share"] * 100, name="share of FLOPs (softmax: estimate)", marker_color="#bcbd22"
            ),
        ]
    )
    style(fig, title("Share of time vs share of FLOPs", run, _detail(run)), "", "%", barmode="group")
    return Chart("step-time-vs-flops", fig, part[["scope", "group", "share", "flops_share"]])


def sweep_charts(run: RunResult) -> list[Chart]:
    modes = kind_rows(run, "precision")
    if modes.empty:
        return []
    ok = modes.loc[modes["status"] == "ok"]
    colors = [color_for(DTYPE_FOR_PRECISION[p]) for p in ok["precision"]]
    patterns = ["/" if p == "bf16" else "" for p in ok["precision"]]
    ms = go.Figure(
        go.Bar(
            x=ok["precision"],
            y=ok["step_ms_median"],
            marker_color=colors,
            marker_pattern_shape=patterns,
            error_y=dict(
                type="data",
                symmetric=False,
                array=ok["step_ms_p80"] - ok["step_ms_median"],
                arrayminus=ok["step_ms_median"] - ok["step_ms_p20"],
            ),
        )
    )
    tokens = go.Figure(
        go.Bar(
            x=ok["precision"],
            y=ok["tokens_per_s"],
            marker_color=colors,
            marker_pattern_shape=patterns,
            text=[f"{s:.2f}× fp32" if s == s else "" for s in ok.get("speedup_vs_fp32", [])],
            textposition="outside",
        )
    )
    for fig in (ms, tokens):
        fig.update_xaxes(categoryorder="array", categoryarray=list(modes["precision"]))
        for _, row in modes[modes["status"] != "ok"].iterrows():
            fig.add_annotation(
                x=row["precision"],
                y=0,
                yref="paper",
                yanchor="bottom",
                text=row["status"],
                hovertext=row["reason"],
                showarrow=False,
                textangle=-90,
                font=dict(color="#7f7f7f"),
            )
    style(
        ms,
        title("Precision sweep: ms per step", run, f"{_detail(run)} · median, bars p20–p80"),
        "precision mode",
        "ms per step",
    )
    style(tokens, title("Precision sweep: tokens per second", run, _detail(run)), "precision mode", "tokens/s")
    cols = [
        c
        for c in (
            "precision",
            "status",
            "reason",
            "step_ms_median",
            "step_ms_p20",
            "step_ms_p80",
            "tokens_per_s",
            "speedup_vs_fp32",
            "achieved_tflops",
            "mfu",
        )
        if c in modes
    ]
    return [
        Chart("step-precision-ms", ms, modes.loc[:, cols]),
        Chart("step-precision-tokens", tokens, modes.loc[:, cols]),
    ]


def per_gpu_chart(run: RunResult) -> Chart | None:
    """A run on every GPU: each GPU's warm step times side by side (a sweep: tokens/s per mode and GPU)."""
    if run.config.get("sweep"):
        modes = kind_rows(run, "precision")
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
    samples = kind_rows(run, "sample")
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
    if run.config.get("sweep"):
        return sweep_charts(run)
    charts = (phase_chart(run), cold_chart(run), groups_chart(run), time_vs_flops_chart(run), kernels_chart(run))
    return [c for c in charts if c is not None]


def overlay(runs: list[RunResult]) -> list[Chart]:
    """Median ms per step of each run (single runs and every mode of sweeps), side by side."""
    records = []
    for run in runs:
        kind = "precision" if run.config.get("sweep") else "summary"
        for _, row in kind_rows(run, kind).iterrows():
            if row.get("status", "ok") == "ok":
                records.append(
                    {
                        "run": f"{run.name or run.id[:8]} · {run.device.get('name', '')}",
                        "precision": row["precision"],
                        "step_ms_median": row["step_ms_median"],
                        "tokens_per_s": row["tokens_per_s"],
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

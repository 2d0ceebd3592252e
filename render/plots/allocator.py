"""Charts for the ``allocator`` experiment: step timeline, segment map, history, settings overlay, tables."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from core.result import RunResult
from core.rows.allocator import AllocatorMeta, AllocatorStep, steps_of
from core.units import MIB, bytes_text, count_text
from render.chart import Chart
from render.style import color_for, style, title

NESTED = ("segment_map", "trace")  # per-step JSON structures: drawn, never put in a CSV
GPU_LINES = (
    ("allocated_bytes", "allocated (tensors)"),
    ("reserved_bytes", "reserved (cached segments)"),
    ("driver_used_bytes", "driver used (nvidia-smi, all processes)"),
    ("peak_allocated_bytes", "peak allocated"),
)
CPU_LINES = (
    ("rss_bytes", "process RSS"),
    ("max_rss_bytes", "RSS high-water mark"),
    ("live_host_bytes", "live tensor bytes (host)"),
)
COUNTERS = (
    "step",
    "status",
    "segments",
    "alloc_count",
    "free_count",
    "inactive_split_bytes",
    "largest_free_block_bytes",
    "free_in_reserved_bytes",
    "fragmentation_ratio",
    "alloc_retries",
    "ooms",
    "device_alloc_count",
    "device_free_count",
    "note",
)
# Block states as snapshots write them (torch's _snapshot docstring still says "active_awaiting_free"; real
# snapshots say "active_pending_free": freed by its tensor, waiting for another stream's work to finish).
BLOCK_COLORS = {"active_allocated": "#d62728", "active_pending_free": "#ff7f0e", "inactive": "#c7e9c0"}


def steps(run: RunResult) -> list[AllocatorStep]:
    return steps_of(run.rows)


def is_cuda_run(run: RunResult) -> bool:
    return any(s.on_cuda for s in steps(run))


def setting_seen(run: RunResult) -> str:
    """The setting the worker saw, from the meta, else from the first step."""
    first = next(iter(steps(run)), None)
    seen = first.alloc_conf_seen if first else None
    return AllocatorMeta.from_meta(run.meta).alloc_conf_seen or ("?" if seen is None else str(seen))


def flat_frame(run: RunResult) -> pd.DataFrame:
    """The rows without their nested segment maps and traces (what tables and exports show)."""
    df = run.frame()
    return df.drop(columns=[c for c in NESTED if c in df.columns])


def timeline(run: RunResult) -> Chart:
    """Memory after every step, the step names on the x axis; an out-of-memory step is marked."""
    df = flat_frame(run)
    cuda = is_cuda_run(run)
    lines = GPU_LINES + (("rss_bytes", "process RSS (host)"),) if cuda else CPU_LINES
    fig = go.Figure()
    for column, name in lines:
        if column in df.columns:
            fig.add_trace(
                go.Scatter(
                    x=df["step"],
                    y=df[column] / MIB,
                    mode="lines+markers",
                    name=name,
                    line=dict(dash="dot") if column in ("peak_allocated_bytes", "max_rss_bytes") else None,
                )
            )
    oom = df[df["status"] == "oom"] if "status" in df.columns else df.iloc[0:0]
    if len(oom):
        y = oom["allocated_bytes" if cuda else "rss_bytes"] / MIB
        fig.add_trace(
            go.Scatter(
                x=oom["step"],
                y=y,
                mode="markers",
                name="out of memory",
                marker=dict(symbol="x", size=14, color="#d62728"),
            )
        )
    detail = f"{run.config.get('scenario')} · setting {setting_seen(run)}"
    what = "Allocator timeline" if cuda else "CPU memory timeline (no caching allocator: frees go back at once)"
    style(fig, title(what, run, detail), "step", "MiB", legend_title="")
    fig.update_xaxes(type="category", tickangle=-35)
    return Chart(name="allocator-timeline", figure=fig, data=df)


def segment_steps(run: RunResult) -> list[int]:
    """Row positions that carry a segment map."""
    return [i for i, s in enumerate(steps(run)) if s.segment_map is not None]


def segment_map(run: RunResult, position: int) -> Chart:
    """Each cached segment a bar, its blocks coloured allocated / free, after the chosen step."""
    step = steps(run)[position]
    fig = go.Figure()
    shown: set[str] = set()
    records = []
    for s_index, seg in enumerate(step.segment_map or ()):
        label = f"seg {s_index} · {bytes_text(seg.total_size, 0)}{' · expandable' if seg.expandable else ''}"
        for block in seg.blocks:
            state = block.state
            records.append({"segment": label, "offset_bytes": block.offset, "size_bytes": block.size, "state": state})
            fig.add_trace(
                go.Bar(
                    y=[label],
                    x=[block.size / MIB],
                    base=[block.offset / MIB],
                    orientation="h",
                    name=state,
                    legendgroup=state,
                    showlegend=state not in shown,
                    marker=dict(color=BLOCK_COLORS.get(state, "#7f7f7f"), line=dict(color="white", width=1)),
                    hovertemplate=f"{state}: %{{x:.1f}} MiB at +%{{base:.1f}} MiB<extra></extra>",
                )
            )
            shown.add(state)
    style(
        fig,
        title(f"Segment map after {step.step}", run, count_text(len(step.segment_map or ()), "segment")),
        "offset in segment (MiB)",
        "",
    )
    fig.update_layout(barmode="overlay")
    fig.update_yaxes(autorange="reversed")
    return Chart(name="allocator-segments", figure=fig, data=pd.DataFrame(records))


def history(run: RunResult) -> Chart | None:
    """Active and reserved memory over time from the allocator's own event history (GPU, if recorded)."""
    events = []
    for step in steps(run):
        for e in step.trace or ():
            events.append((e.time_us, e.action, e.size, step.step))
    if not events:
        return None
    events.sort(key=lambda e: e[0])
    active = reserved = 0
    records = []
    for t_us, action, size, step in events:
        active += size if action == "alloc" else -size if action == "free_completed" else 0
        reserved += (
            size
            if action in ("segment_alloc", "segment_map")
            else -size
            if action in ("segment_free", "segment_unmap")
            else 0
        )
        records.append(
            {
                "time_ms": (t_us - events[0][0]) / 1000,
                "action": action,
                "size_bytes": size,
                "active_bytes": active,
                "reserved_bytes": reserved,
                "step": step,
            }
        )
    df = pd.DataFrame(records)
    fig = go.Figure()
    for column, name in (("active_bytes", "active (allocated)"), ("reserved_bytes", "reserved (segments)")):
        fig.add_trace(
            go.Scatter(
                x=df["time_ms"],
                y=df[column] / MIB,
                mode="lines",
                line_shape="hv",
                name=name,
                text=df["step"] + " · " + df["action"],
                hovertemplate="%{text}<br>%{y:.1f} MiB",
            )
        )
    style(
        fig,
        title(
            "Allocation history (torch.cuda.memory._record_memory_history)",
            run,
            f"{len(df)} events since recording began",
        ),
        "time (ms)",
        "MiB",
    )
    return Chart(name="allocator-history", figure=fig, data=df)


def counters_frame(run: RunResult) -> pd.DataFrame:
    df = flat_frame(run)
    return df.loc[:, [c for c in COUNTERS if c in df.columns]]


def seed_claims_frame(run: RunResult) -> pd.DataFrame:
    """The lifecycle's measured change per step next to what was expected (read from nvidia-smi when these steps
    were first run by hand: docs/methods/allocator.md, "Where the expectations come from")."""
    df = flat_frame(run)
    if "seed_claim" not in df.columns:
        return pd.DataFrame()
    out = pd.DataFrame({"step": df["step"], "expected": df["seed_claim"]})
    columns = (
        ("driver_used_bytes", "Δ driver used (MiB)"),
        ("reserved_bytes", "Δ reserved (MiB)"),
        ("allocated_bytes", "Δ allocated (MiB)"),
        ("rss_bytes", "Δ RSS (MiB)"),
        ("live_host_bytes", "Δ live host tensors (MiB)"),
    )
    for column, name in columns:
        if column in df.columns and df.loc[:, column].notna().all():
            out[name] = (df[column].astype(float).diff() / MIB).round(1)
    return out.iloc[1:]


def backward_frame(run: RunResult) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "form": r.form,
                "measured peak / size(x)": round(r.peak_over_x, 3),
                "expected / size(x)": r.seed_claim_over_x,
                "autograd count": r.autograd_count_over_x,
                "tensors alive at the peak": r.autograd_tensors,
                "peak (MiB)": round(r.peak_bytes / MIB, 1),
            }
            for r in AllocatorMeta.from_meta(run.meta).backward_peak
        ]
    )


def figures(run: RunResult) -> list[Chart]:
    charts = [timeline(run)]
    mapped, all_steps = segment_steps(run), steps(run)
    if mapped:
        busiest = max(mapped, key=lambda i: all_steps[i].reserved_bytes or 0)
        charts.append(segment_map(run, busiest))
    hist = history(run)
    if hist:
        charts.append(hist)
    return charts


def overlay(runs: list[RunResult]) -> list[Chart]:
    """Settings A/B: reserved (solid) and allocated (dashed) per setting; RSS on a CPU."""
    fig = go.Figure()
    frames = []
    cuda = all(is_cuda_run(r) for r in runs)
    for run in runs:
        df = flat_frame(run)
        setting = setting_seen(run)
        color = color_for(setting)
        lines = (
            (("reserved_bytes", "reserved", "solid"), ("allocated_bytes", "allocated", "dash"))
            if cuda
            else (("rss_bytes", "RSS", "solid"),)
        )
        for column, what, dash in lines:
            fig.add_trace(
                go.Scatter(
                    x=df["step"],
                    y=df[column] / MIB,
                    mode="lines+markers",
                    name=f"{setting} · {what}",
                    line=dict(color=color, dash=dash),
                )
            )
        frames.append(df.assign(setting=setting, run_id=run.id))
    scenario = (runs[0].config.get("scenario") or "") if runs else ""
    style(
        fig,
        title(
            "Allocator settings side by side"
            if cuda
            else "Settings side by side (CPU: the setting has no effect, each still ran in its own process)",
            runs[0] if runs else None,
            scenario,
        ),
        "step",
        "MiB",
        legend_title="PYTORCH_CUDA_ALLOC_CONF",
    )
    # upright: runs of several scenarios put all their steps on one axis, and at -35° their names overprinted
    fig.update_xaxes(type="category", tickangle=-90)
    return [Chart(name="allocator-settings", figure=fig, data=pd.concat(frames, ignore_index=True) if frames else None)]

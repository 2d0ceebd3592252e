"""Charts of an imported memory snapshot: allocated vs reserved with the peak and its stack, categories,
fragmentation, the sites holding memory at a moment, the segment map, and two snapshots on one axis.

The figure builders take arrays (any window of the trace, at most a few thousand points); ``figures``
draws a stored run from its rows and summary, which is what Compare and the HTML report use.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from core.result import RunResult
from core.rows.allocator import Segment, SegmentNumbers
from core.rows.provenance import Provenance
from core.rows.snapshot import Site, SnapshotSummary
from core.units import GIB, MIB, bytes_text
from core.workload.snapshot.analysis import CATEGORIES, peak_differences
from render.chart import Chart
from render.plots.allocator import BLOCK_COLORS
from render.snapshot_view import time_text
from render.style import color_for, html_lines, html_text, style, title

STATE_NAMES = {
    "active_allocated": "allocated",
    "active_pending_free": "freed, awaiting stream",
    "inactive": "free (cached)",
}


def _x_title(s: SnapshotSummary) -> str:
    return "time since the first event (ms)" if s.has_times else "event number"


def _stack_hover(frames: Sequence[str], limit: int = 12) -> str:
    shown = [*frames[:limit]] + ([f"… {len(frames) - limit} more frames"] if len(frames) > limit else [])
    return html_lines(shown) or "(no Python stack recorded)"


def timeline_figure(
    t_ms, allocated, reserved, s: SnapshotSummary, run: RunResult | None = None, detail: str = ""
) -> go.Figure:
    """Allocated (the tensors) and reserved (the cache) over time, the peak starred with its stack."""
    fig = go.Figure()
    fig.add_trace(
        go.Scattergl(
            x=t_ms,
            y=np.asarray(reserved) / GIB,
            name="reserved (segments)",
            mode="lines",
            line=dict(color="#7f7f7f", shape="hv"),
        )
    )
    fig.add_trace(
        go.Scattergl(
            x=t_ms,
            y=np.asarray(allocated) / GIB,
            name="allocated (live blocks)",
            mode="lines",
            line=dict(color="#1f77b4", shape="hv"),
            fill="tozeroy",
        )
    )
    if s.baseline_allocated_bytes:
        fig.add_hline(
            y=s.baseline_allocated_bytes / GIB,
            line_dash="dot",
            line_color="#8c564b",
            annotation_text=f"allocated before recording {bytes_text(s.baseline_allocated_bytes)}",
            annotation_position="bottom right",
        )
    fig.add_trace(
        go.Scatter(
            x=[s.peak_time_ms],
            y=[s.peak_allocated_bytes / GIB],
            mode="markers",
            marker=dict(symbol="star", size=16, color="black"),
            name="peak allocated",
            hovertext=[_stack_hover(s.peak_stack)],
            hovertemplate="peak %{y:.3f} GiB at %{x:.3f}<br>%{hovertext}<extra></extra>",
        )
    )
    style(
        fig,
        title(
            "Memory over time",
            run,
            detail
            or f"peak {bytes_text(s.peak_allocated_bytes)} allocated "
            f"at {time_text(s.peak_time_ms, s.has_times)} · reserved up to "
            f"{bytes_text(s.peak_reserved_bytes)}",
        ),
        _x_title(s),
        "GiB",
        legend_title="",
    )
    return fig


def categories_figure(t_ms, categories: dict, s: SnapshotSummary, run: RunResult | None = None) -> go.Figure:
    fig = go.Figure()
    for name in CATEGORIES:
        if name in categories:
            fig.add_trace(
                go.Scatter(
                    x=t_ms,
                    y=np.asarray(categories[name]) / GIB,
                    name=name.replace("_", " "),
                    stackgroup="cat",
                    mode="lines",
                    line=dict(width=0.5, color=color_for(name), shape="hv"),  # steps, as the memory timeline
                )
            )
    style(
        fig,
        title(
            "Allocated by category (inferred from stacks)",
            run,
            "unknown: no stack, or no rule matched — see the rules table",
        ),
        _x_title(s),
        "GiB",
        legend_title="category",
    )
    return fig


def fragmentation_figure(t_ms, reserved, allocated, s: SnapshotSummary, run: RunResult | None = None) -> go.Figure:
    frag = (np.asarray(reserved) - np.asarray(allocated)) / GIB
    fig = go.Figure(
        go.Scattergl(
            x=t_ms,
            y=frag,
            mode="lines",
            line=dict(color="#ff7f0e", shape="hv"),
            name="reserved − allocated",
            fill="tozeroy",
        )
    )
    style(
        fig,
        title(
            "Cached but unused: reserved − allocated",
            run,
            f"largest {bytes_text(s.peak_fragmentation_bytes)} at "
            f"{time_text(s.peak_fragmentation_time_ms, s.has_times)}",
        ),
        _x_title(s),
        "GiB",
        showlegend=False,
    )
    return fig


SITE_COLUMNS = ("site", "GiB", "blocks", "before recording", "category", "rule", "bytes", "stack")


def sites_frame(sites: Sequence[Site]) -> pd.DataFrame:
    """One line per allocation site; the same columns when nothing is live (an empty table, not a frame
    without columns)."""
    return pd.DataFrame(
        [
            {
                "site": s.label,
                "GiB": round(s.bytes / GIB, 4),
                "blocks": s.blocks,
                "before recording": s.before_recording_blocks,
                "category": s.category,
                "rule": s.rule,
                "bytes": s.bytes,
                "stack": "\n".join(s.stack),
            }
            for s in sites
        ],
        columns=list(SITE_COLUMNS),
    )


def sites_figure(sites: Sequence[Site], when: str, run: RunResult | None = None) -> go.Figure:
    data = sites_frame(sites).iloc[::-1]
    if data.empty:
        fig = go.Figure()
        fig.add_annotation(text=f"nothing live {when}", showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
        style(fig, title(f"Allocation sites holding memory {when}", run, "nothing live"), "GiB", "", height=360)
        return fig
    fig = go.Figure(
        go.Bar(
            x=data["bytes"] / GIB,
            y=data["site"].map(html_text),
            orientation="h",
            marker_color=[color_for(c) for c in data["category"]],
            customdata=data[["blocks", "category", "rule"]].to_numpy(),
            hovertext=[html_lines(s.split("\n")) for s in data["stack"]],
            hovertemplate="%{x:.3f} GiB in %{customdata[0]} block(s) · %{customdata[1]} "
            "(%{customdata[2]})<br>%{hovertext}<extra></extra>",
        )
    )
    style(
        fig,
        title(f"Allocation sites holding memory {when}", run, "colour: category"),
        "GiB",
        "",
        height=max(360, 26 * len(data) + 140),
    )
    return fig


def segment_map_figure(
    segments: Sequence[Segment], when: str, numbers: SegmentNumbers, run: RunResult | None = None
) -> go.Figure:
    """Each segment a row, its blocks coloured by state: one trace per state, so thousands of blocks stay fast."""
    per_state: dict[str, dict[str, list]] = {}
    labels = []
    for i, seg in enumerate(segments):
        label = f"{i}: {bytes_text(seg.total_size, 0)}{' · exp' if seg.expandable else ''}"
        labels.append(label)
        for block in seg.blocks:
            d = per_state.setdefault(block.state, {"x": [], "base": [], "y": []})
            d["x"].append(block.size / MIB)
            d["base"].append(block.offset / MIB)
            d["y"].append(label)
    fig = go.Figure()
    for state, d in per_state.items():
        fig.add_trace(
            go.Bar(
                x=d["x"],
                base=d["base"],
                y=d["y"],
                orientation="h",
                name=STATE_NAMES.get(state, state),
                marker=dict(color=BLOCK_COLORS.get(state, "#7f7f7f"), line=dict(color="white", width=0.5)),
                hovertemplate="%{x:.2f} MiB at +%{base:.2f} MiB<extra>" + STATE_NAMES.get(state, state) + "</extra>",
            )
        )
    frag = numbers.fragmentation_ratio
    dropped = sum(seg.blocks_dropped for seg in segments)
    style(
        fig,
        title(
            f"Segment map {when}",
            run,
            (f"{dropped:,} small blocks not drawn · " if dropped else "")
            + f"{len(segments)} segment(s) shown, largest first · largest free block "
            f"{bytes_text(numbers.largest_free_block_bytes)} · fragmentation {frag:.0%}",
        ),
        "offset in segment (MiB)",
        "",
        barmode="overlay",
        height=max(360, 18 * len(labels) + 160),
        legend_title="block",
    )
    fig.update_yaxes(autorange="reversed", categoryorder="array", categoryarray=labels)
    return fig


def rules_frame(s: SnapshotSummary) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "rule": r.rule,
                "category": r.category,
                "allocations": r.allocations,
                "GiB allocated": round(r.bytes_allocated / GIB, 4),
                "means": r.means,
            }
            for r in s.category_rules
        ]
    )


def figures(run: RunResult) -> list[Chart]:
    """A stored import, from its points (≤ a few thousand) and summary."""
    df = run.frame()
    summary = SnapshotSummary.from_run(run)
    charts = [
        Chart(
            "snapshot-timeline",
            timeline_figure(df["t_ms"], df["allocated_bytes"], df["reserved_bytes"], summary, run),
            df.loc[:, ["t_ms", "allocated_bytes", "reserved_bytes"]],
        )
    ]
    cats = {c: df[f"{c}_bytes"] for c in CATEGORIES if f"{c}_bytes" in df}
    charts.append(
        Chart(
            "snapshot-categories",
            categories_figure(df["t_ms"], cats, summary, run),
            df.loc[:, ["t_ms"] + [f"{c}_bytes" for c in cats]],
        )
    )
    charts.append(
        Chart(
            "snapshot-fragmentation",
            fragmentation_figure(df["t_ms"], df["reserved_bytes"], df["allocated_bytes"], summary, run),
            df.loc[:, ["t_ms", "fragmentation_bytes"]],
        )
    )
    sites = summary.top_sites_at_peak
    charts.append(
        Chart(
            "snapshot-sites-at-peak",
            sites_figure(sites, "at the peak", run),
            sites_frame(sites).drop(columns=["stack"], errors="ignore"),
        )
    )
    return charts


def _label(run: RunResult) -> str:
    return run.name or f"{Provenance.from_run(run).file or run.id[:8]} · {run.id[:6]}"


def site_differences(a: RunResult, b: RunResult) -> pd.DataFrame:
    """Bytes each allocation site holds at each snapshot's peak and B − A, largest growth first (sites matched
    by their Python stack; :func:`core.workload.snapshot.analysis.peak_differences`)."""
    rows = peak_differences(a.meta, b.meta)["sites"]
    df = pd.DataFrame(rows, columns=["site", "A_bytes", "B_bytes", "delta_bytes", "category", "stack"])
    return df.assign(stack=df["stack"].map("\n".join)) if not df.empty else df


def category_differences(a: RunResult, b: RunResult) -> pd.DataFrame:
    """Bytes each category holds at each snapshot's peak and B − A, largest growth first."""
    rows = peak_differences(a.meta, b.meta)["categories"]
    return pd.DataFrame(rows, columns=["category", "A_bytes", "B_bytes", "delta_bytes"])


def _growth_bars(names, deltas, hover, heading: str, detail: str) -> go.Figure:
    fig = go.Figure(
        go.Bar(
            x=np.asarray(deltas) / GIB,
            y=[html_text(str(n)) for n in names],
            orientation="h",
            marker_color=["#d62728" if d > 0 else "#2ca02c" for d in deltas],
            hovertext=hover,
            hovertemplate="%{x:+.3f} GiB<br>%{hovertext}<extra></extra>",
        )
    )
    style(fig, title(heading, detail=detail), "GiB (B − A)", "", height=max(360, 26 * len(names) + 140))
    return fig


def overlay(runs: list[RunResult]) -> list[Chart]:
    """Snapshots on one time axis (ms since each one's first event) and, for two, the difference by site."""
    fig = go.Figure()
    frames = []
    for run in runs:
        df = run.frame()
        colour = color_for(_label(run))
        fig.add_trace(
            go.Scattergl(
                x=df["t_ms"],
                y=df["allocated_bytes"] / GIB,
                mode="lines",
                name=f"{_label(run)} · allocated",
                line=dict(color=colour, shape="hv"),
            )
        )
        fig.add_trace(
            go.Scattergl(
                x=df["t_ms"],
                y=df["reserved_bytes"] / GIB,
                mode="lines",
                name=f"{_label(run)} · reserved",
                line=dict(color=colour, dash="dot", shape="hv"),
            )
        )
        frames.append(df[["t_ms", "allocated_bytes", "reserved_bytes"]].assign(run=_label(run)))
    style(
        fig,
        title("Snapshots on one time axis"),
        "time since each snapshot's first event (ms)",
        "GiB",
        legend_title="snapshot",
    )
    charts = [Chart("snapshot-overlay", fig, pd.concat(frames, ignore_index=True) if frames else None)]
    if len(runs) == 2:
        sides = f"A = {_label(runs[0])}, B = {_label(runs[1])}; each at its own peak"
        diff = site_differences(*runs)
        if not diff.empty:
            top = diff.head(20).iloc[::-1]
            bars = _growth_bars(
                top["site"],
                top["delta_bytes"],
                [html_lines(s.split("\n")) if s else "" for s in top["stack"]],
                "Who grew: B − A by allocation site",
                f"{sides}, top 20 sites of each; largest growth first",
            )
            charts.append(Chart("snapshot-site-differences", bars, diff.drop(columns=["stack"])))
        cats = category_differences(*runs)
        if not cats.empty:
            hover = [f"A {bytes_text(x)} → B {bytes_text(y)}" for x, y in zip(cats["A_bytes"], cats["B_bytes"])]
            bars = _growth_bars(
                cats["category"].iloc[::-1],
                cats["delta_bytes"].iloc[::-1],
                hover[::-1],
                "Who grew: B − A by category",
                f"{sides}; categories inferred from stacks",
            )
            charts.append(Chart("snapshot-category-differences", bars, cats))
    return charts

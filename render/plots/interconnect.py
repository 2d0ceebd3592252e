"""Figures of an ``interconnect`` run: bandwidth and time per call vs message size (log–log), the peer
matrix as a heatmap, host↔GPU copies pinned vs pageable."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import plotly.graph_objects as go

from core.result import RunResult
from core.rows.interconnect import InterconnectMeta, InterconnectTables, PeerCopy, Stored
from core.units import exact_size_text
from render.chart import Chart
from render.plots.step_bench import table_frame
from render.style import color_for, style, title

COLLECTIVE_COLORS = {
    "all_reduce": "#1f77b4",
    "all_gather": "#ff7f0e",
    "reduce_scatter": "#2ca02c",
    "broadcast": "#d62728",
    "all_to_all": "#9467bd",
}


def tables(run: RunResult) -> InterconnectTables:
    return InterconnectTables.from_run(run)


def frame_of(run: RunResult, rows: Sequence[Stored], measured: bool = True) -> pd.DataFrame:
    """One table's rows as the charts and the page's tables show them (:func:`table_frame`), without the raw
    samples; only the measured points (status ok) unless ``measured`` is off."""
    df = table_frame(run, [r for r in rows if r.ok or not measured])
    return df.drop(columns=["samples_ms"], errors="ignore").dropna(axis=1, how="all").reset_index(drop=True)


def _detail(run: RunResult) -> str:
    m = InterconnectMeta.from_meta(run.meta)
    where = f" on {m.nodes} nodes ({', '.join(m.hosts)})" if (m.nodes or 1) > 1 else ""
    return f"{_known(m.backend)} · {_known(m.world_size)} ranks{where}"


def _known(value: object) -> str:
    return "?" if value is None else str(value)


def _size_axis(fig: go.Figure, sizes) -> None:
    """Log x axis ticked at the measured sizes, in KiB/MiB/GiB as nccl-tests and the CLI write them."""
    ticks = sorted({int(b) for b in sizes})
    fig.update_xaxes(type="log", tickvals=ticks, ticktext=[exact_size_text(b) for b in ticks])


def _color(name: str) -> str:
    return COLLECTIVE_COLORS.get(name) or color_for(name)


def bandwidth_chart(run: RunResult, df: pd.DataFrame) -> Chart:
    fig = go.Figure()
    for collective, g in df.groupby("collective", sort=False):
        name = str(collective)
        g = g.sort_values("bytes")
        color = _color(name)
        fig.add_trace(
            go.Scatter(
                x=g["bytes"],
                y=g["busbw_gbs"],
                name=f"{name} busbw",
                mode="lines+markers",
                line=dict(color=color),
                error_y=dict(
                    type="data",
                    symmetric=False,
                    array=g["busbw_gbs_p80"] - g["busbw_gbs"],
                    arrayminus=g["busbw_gbs"] - g["busbw_gbs_p20"],
                ),
                customdata=g[["size", "median_ms", "busbw_factor"]],
                hovertemplate="%{customdata[0]}: busbw %{y:.3g} GB/s (algbw × %{customdata[2]:.3g})<br>"
                "median %{customdata[1]:.4g} ms<extra>" + name + "</extra>",
            )
        )
        fig.add_trace(
            go.Scatter(
                x=g["bytes"],
                y=g["algbw_gbs"],
                name=f"{name} algbw",
                mode="lines",
                line=dict(color=color, dash="dot", width=1),
                customdata=g[["size"]],
                hovertemplate="%{customdata[0]}: algbw %{y:.3g} GB/s<extra>" + name + "</extra>",
            )
        )
    style(
        fig,
        title(
            "Collective bandwidth vs message size",
            run,
            f"{_detail(run)} · solid: busbw (nccl-tests), dotted: algbw = bytes / time; bars p20–p80",
        ),
        "message size (log)",
        "GB/s (log)",
        legend_title="collective",
    )
    _size_axis(fig, df["bytes"])
    fig.update_yaxes(type="log")
    return Chart("interconnect-bandwidth", fig, df)


def latency_chart(run: RunResult, df: pd.DataFrame) -> Chart:
    fig = go.Figure()
    for collective, g in df.groupby("collective", sort=False):
        name = str(collective)
        g = g.sort_values("bytes")
        fig.add_trace(
            go.Scatter(
                x=g["bytes"],
                y=g["median_ms"] * 1e3,
                name=name,
                mode="lines+markers",
                line=dict(color=_color(name)),
                error_y=dict(
                    type="data",
                    symmetric=False,
                    array=(g["p80_ms"] - g["median_ms"]) * 1e3,
                    arrayminus=(g["median_ms"] - g["p20_ms"]) * 1e3,
                ),
                customdata=g[["size", "reps", "slowest_rank"]],
                hovertemplate="%{customdata[0]}: %{y:.4g} µs over %{customdata[1]} calls, slowest rank "
                "%{customdata[2]}<extra>" + name + "</extra>",
            )
        )
    style(
        fig,
        title("Time per call vs message size", run, f"{_detail(run)} · the slowest rank's median, bars p20–p80"),
        "message size (log)",
        "µs per call (log)",
        legend_title="collective",
    )
    _size_axis(fig, df["bytes"])
    fig.update_yaxes(type="log")
    return Chart("interconnect-time", fig, df)


def peer_chart(run: RunResult, cells: Sequence[PeerCopy]) -> Chart:
    """The measured cells of the peer matrix as a heatmap: rows the source GPU, columns the destination."""
    gpus = sorted({c.src for c in cells if c.src is not None} | {c.dst for c in cells if c.dst is not None})
    labels = [f"cuda:{i}" for i in gpus]
    cell = {(c.src, c.dst): c for c in cells}
    z = [[cell[(s, d)].gbs if (s, d) in cell else None for d in gpus] for s in gpus]
    path = {True: "P2P", False: "via host", None: "local"}
    text = [
        [f"{cell[(s, d)].gbs or 0:.0f}<br>{path[cell[(s, d)].peer_access]}" if (s, d) in cell else "" for d in gpus]
        for s in gpus
    ]
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=labels,
            y=labels,
            text=text,
            texttemplate="%{text}",
            colorscale="Viridis",
            colorbar=dict(title="GB/s"),
            hovertemplate="%{y} → %{x}: %{z:.1f} GB/s<extra></extra>",
        )
    )
    style(
        fig,
        title(
            "GPU→GPU copy bandwidth",
            run,
            f"{exact_size_text(cells[0].nbytes)} per copy · P2P: peer access possible (can_device_access_peer), via host: it is not",
        ),
        "destination GPU",
        "source GPU",
    )
    fig.update_yaxes(autorange="reversed")
    return Chart("interconnect-peer-matrix", fig, frame_of(run, cells))


def host_chart(run: RunResult, df: pd.DataFrame) -> Chart:
    largest = df.loc[df["bytes"] == df["bytes"].max()]
    fig = go.Figure()
    for memory, color in (("pinned", "#1f77b4"), ("pageable", "#aec7e8")):
        g = largest[largest["memory"] == memory]
        x = [f"cuda:{int(gpu)} {'host→GPU' if d == 'h2d' else 'GPU→host'}" for gpu, d in zip(g["gpu"], g["direction"])]
        fig.add_trace(
            go.Bar(
                x=x,
                y=g["gbs"],
                name=memory,
                marker_color=color,
                error_y=dict(
                    type="data", symmetric=False, array=g["gbs_p80"] - g["gbs"], arrayminus=g["gbs"] - g["gbs_p20"]
                ),
            )
        )
    style(
        fig,
        title(
            "Host↔GPU copy bandwidth",
            run,
            f"{exact_size_text(int(largest['bytes'].iloc[0]))} per copy · pinned vs pageable host memory · bars p20–p80",
        ),
        "",
        "GB/s",
        barmode="group",
        legend_title="host memory",
    )
    return Chart("interconnect-host-copies", fig, df)


def figures(run: RunResult) -> list[Chart]:
    charts = []
    t = tables(run)
    collectives = frame_of(run, t.collectives)
    if not collectives.empty:
        charts += [bandwidth_chart(run, collectives), latency_chart(run, collectives)]
    peers = [c for c in t.peers if c.ok]
    if peers:
        charts.append(peer_chart(run, peers))
    copies = frame_of(run, t.host_copies)
    if not copies.empty:
        charts.append(host_chart(run, copies))
    return charts


def overlay(runs: list[RunResult]) -> list[Chart]:
    """busbw vs size of each run's collectives, one colour per run (boxes, backends, world sizes side by side)."""
    fig = go.Figure()
    records = []
    for i, run in enumerate(runs):
        df = frame_of(run, tables(run).collectives)
        for name, g in df.groupby("collective", sort=False) if not df.empty else []:
            g = g.sort_values("bytes")
            label = f"{run.name or run.id[:8]} · {_detail(run)} · {name}"
            fig.add_trace(
                go.Scatter(
                    x=g["bytes"],
                    y=g["busbw_gbs"],
                    name=label,
                    mode="lines+markers",
                    line=dict(color=_color(str(name)), dash=("solid", "dash", "dot", "dashdot")[i % 4]),
                )
            )
            records += [
                {"run": run.id, "collective": name, "bytes": b, "busbw_gbs": v}
                for b, v in zip(g["bytes"], g["busbw_gbs"])
            ]
    style(fig, "busbw across runs", "message size (log)", "busbw GB/s (log)", legend_title="run · collective")
    _size_axis(fig, [r["bytes"] for r in records])
    fig.update_yaxes(type="log")
    return [Chart("interconnect-overlay", fig, pd.DataFrame(records))]

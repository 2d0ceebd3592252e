"""Figures of a ``matmul`` run: throughput vs size, speed vs accuracy, roofline, clocks under throughput."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from core.hardware import published
from core.result import RunResult
from core.rows.matmul import TFLOPS, MatmulMeta, MatmulPoint, PublishedComparison
from core.units import throughput_unit
from render.chart import Chart
from render.node import is_all_gpus, node_chart
from render.style import color_for, html_text, style, title

ZERO_ERROR = 1e-17  # where an exactly-zero relative error is drawn on the log axis


def published_for(run: RunResult, accelerator: str | None = None) -> list[published.Published]:
    """Published maximum-achievable figures for the run's GPU, or for ``accelerator`` when one is chosen."""
    return published.for_accelerator(accelerator) if accelerator else published.for_device(run.device)


def _compared(run: RunResult, accelerator: str | None) -> list[tuple[dict, MatmulPoint, PublishedComparison]]:
    """Each measured point (its stored row beside it), held against the published maximum like for like; with
    ``accelerator``, against that GPU's published figures instead of the run's own."""
    entries = published_for(run, accelerator)
    searched = bool(run.config.get("mamf"))  # a --mamf search's best may meet the published maximum
    out = []
    for row in run.rows:
        point = MatmulPoint.from_row(row)
        if point.ok:
            point = point.against(entries) if accelerator else point
            out.append((row, point, point.compared(entries, searched, run.device)))
    return out


def best_points(run: RunResult, accelerator: str | None = None) -> list[tuple[MatmulPoint, PublishedComparison]]:
    """Each dtype's best point as the engine ranked it (``is_best``; where several GPUs ran, the fastest GPU's), in
    the order the sweep met the dtypes, with its published comparison."""
    best: dict[str, tuple[MatmulPoint, PublishedComparison]] = {}
    for _, point, said in _compared(run, accelerator):
        if point.is_best and (point.dtype not in best or (point.tflops or 0) > (best[point.dtype][0].tflops or 0)):
            best[point.dtype] = (point, said)
    return list(best.values())


def throughput(run: RunResult, point: MatmulPoint) -> float:
    """The point's median throughput in the unit the run's charts use (TFLOPS on a GPU, GFLOPS on a CPU)."""
    return (point.tflops or 0.0) * _scale(run)


def measured(run: RunResult, accelerator: str | None = None) -> pd.DataFrame:
    """The measured points with display columns, as the engine stored them (:mod:`core.rows.matmul`; the store
    fills what a run stored by an earlier version lacks). With ``accelerator``, ``published_tflops`` and
    ``pct_of_published`` compare with that GPU's published figures instead of the run's own."""
    compared = _compared(run, accelerator)
    rows = [
        row | {"published_tflops": point.published_tflops, "pct_of_published": point.pct_of_published}
        for row, point, _ in compared
    ]
    said = [s for _, _, s in compared]
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    df["shape"] = df["m"].astype(str) + "×" + df["n"].astype(str) + "×" + df["k"].astype(str)
    df["throughput"] = df[TFLOPS] * _scale(run)
    # a run on every GPU draws one line per dtype and GPU (same colour per dtype)
    df["series"] = df["dtype"] + (" · " + df["device"] if is_all_gpus(run) else "")
    df["published_tflops"] = df["published_tflops"].astype(float)
    df["published_note"] = [s.note for s in said]
    df["pct_of_published"] = [s.pct for s in said]
    df["pct_of_published"] = df["pct_of_published"].astype(float)
    df["published_text"] = [s.text for s in said]
    return df.drop(columns=["samples_ms"], errors="ignore")


def _scale(run: RunResult) -> float:
    return throughput_unit(_is_cuda(run))[1]


def _is_cuda(run: RunResult) -> bool:
    return run.device_info.is_cuda


def _unit(run: RunResult) -> str:
    return f"{throughput_unit(_is_cuda(run))[0]} ({throughput_unit(_is_cuda(run), ops=True)[0]} for int8)"


def _x(df: pd.DataFrame, run: RunResult) -> tuple[str, str]:
    mode = run.config.get("model") or ("search" if run.config.get("search") else "")
    if run.config.get("search"):
        return "m", f"M (N={df['n'].iloc[0]}, K={df['k'].iloc[0]})"
    if mode or run.config.get("mnk"):
        return "shape", "GEMM M×N×K"
    return "m", "size (M = N = K)"


def _series_trace(g: pd.DataFrame, xcol: str, scale: float) -> go.Scatter:
    """One dtype's (and GPU's) medians, with p20–p80 bars and the hover a point reads."""
    return go.Scatter(
        x=g[xcol],
        y=g["throughput"],
        name=str(g["series"].iloc[0]),
        mode="lines+markers",
        line=dict(color=color_for(g["dtype"].iloc[0])),
        error_y=dict(
            type="data",
            symmetric=False,
            array=(g["tflops_p80"] - g[TFLOPS]) * scale,
            arrayminus=(g[TFLOPS] - g["tflops_p20"]) * scale,
        ),
        customdata=g[["median_ms", "pct_of_peak", "pct_of_best", "label", "published_text"]],
        hovertemplate="%{x}: %{y:.1f}<br>median %{customdata[0]:.4f} ms<br>"
        "%{customdata[1]:.1f}% of datasheet, %{customdata[2]:.1f}% of this run's best<br>"
        "%{customdata[4]}<br>%{customdata[3]}",
    )


def _published_line(fig: go.Figure, run: RunResult, accelerator: str | None, dtype: str, scale: float) -> None:
    best = published.figure(published_for(run, accelerator), dtype)
    if best is not None:  # the card once, in its provenance: named twice, the label ran past the chart
        fig.add_hline(
            y=best.tflops * scale,
            line=dict(color=color_for(dtype), dash="dot", width=2),
            annotation_text=html_text(
                f"{dtype} best of a shape search {best.tflops:g} (published {best.date}, "
                f"{published.provenance(best, run.device)})"
            ),
            annotation_position="bottom right",
        )


def _peak_lines(fig: go.Figure, peaks: dict[float, list[str]]) -> None:
    for value, dtypes in peaks.items():  # fp8, fp8-fast-accum and int8 share 1978.9 on an H200: drawn once
        fig.add_hline(
            y=value,
            line=dict(color=color_for(dtypes[0]), dash="dash", width=1),
            annotation_text=html_text(f"{', '.join(dtypes)} datasheet {value:g}"),
            annotation_position="top left",
        )


def _above_peak_marks(fig: go.Figure, df: pd.DataFrame, xcol: str) -> None:
    wrong = df[df["above_peak"].fillna(False).astype(bool)]
    if len(wrong):
        fig.add_trace(
            go.Scatter(
                x=wrong[xcol],
                y=wrong["throughput"],
                mode="markers",
                name="above the datasheet peak: measurement error",
                marker=dict(symbol="x-thin-open", size=18, color="#d62728", line=dict(width=3)),
                text=wrong["measurement_error"],
                hovertemplate="%{text}<extra></extra>",
            )
        )


def throughput_figure(run: RunResult, df: pd.DataFrame, accelerator: str | None = None) -> go.Figure:
    fig = go.Figure()
    scale = _scale(run)
    xcol, xtitle = _x(df, run)
    peaks: dict[float, list[str]] = {}  # a datasheet peak and the dtypes that share it: one line, one label
    for _, g in df.groupby("series", sort=False):
        dtype = g["dtype"].iloc[0]
        fig.add_trace(_series_trace(g, xcol, scale))
        peak = g["peak_tflops"].dropna()
        if len(peak) and dtype not in peaks.setdefault(float(peak.iloc[0]), []):
            peaks[float(peak.iloc[0])].append(dtype)
        _published_line(fig, run, accelerator, dtype, scale)
    _peak_lines(fig, peaks)
    _above_peak_marks(fig, df, xcol)
    detail = (
        "median, bars p20–p80; dashed: datasheet dense peak"
        if _is_cuda(run)
        else "median, bars p20–p80; CPU: no datasheet peak"
    )
    if not df.loc[:, "published_tflops"].isna().all():
        detail += (
            "; dotted: published best of a shape search (mamf-finder, ml-engineering), comparable only with a search"
        )
    style(fig, title("Matmul throughput", run, detail), xtitle, _unit(run), legend_title="dtype")
    if xcol == "m" and not run.config.get("search"):
        fig.update_xaxes(type="log")
    return fig


def accuracy_figure(run: RunResult, df: pd.DataFrame) -> go.Figure:
    fig = go.Figure()
    for series, g in df.groupby("series", sort=False):
        err = g["rel_error"].astype(float)
        fig.add_trace(
            go.Scatter(
                x=err.clip(lower=ZERO_ERROR),
                y=g["throughput"],
                name=series,
                mode="markers",
                marker=dict(color=color_for(g["dtype"].iloc[0]), size=9),
                customdata=g[["shape", "rel_error"]],
                hovertemplate="%{customdata[0]}<br>rel. error %{customdata[1]:.3g}<br>%{y:.1f}",
            )
        )
    style(
        fig,
        title("Speed vs accuracy", run, f"‖C−C_ref‖/‖C_ref‖ vs fp64; an error of 0 is drawn at {ZERO_ERROR:g}"),
        "relative error (log)",
        _unit(run),
        legend_title="dtype",
    )
    fig.update_xaxes(type="log")
    return fig


def roofline_figure(run: RunResult, df: pd.DataFrame) -> go.Figure:
    fig = go.Figure()
    scale = _scale(run)
    bw = MatmulMeta.from_run(run).bandwidth_gbs  # memory traffic (read + write) of the device copy
    lo, hi = df["intensity_flop_per_byte"].min(), df["intensity_flop_per_byte"].max()
    for series, g in df.groupby("series", sort=False):
        color = color_for(g["dtype"].iloc[0])
        fig.add_trace(
            go.Scatter(
                x=g["intensity_flop_per_byte"],
                y=g["throughput"],
                name=series,
                mode="markers",
                marker=dict(color=color, size=8),
                customdata=g[["shape"]],
                hovertemplate="%{customdata[0]}<br>%{x:.1f} FLOP/B<br>%{y:.1f}",
            )
        )
        fig.add_trace(
            go.Scatter(
                x=[lo / 2, hi * 2],
                y=[g["throughput"].max()] * 2,
                mode="lines",
                showlegend=False,
                line=dict(color=color, dash="dot", width=1),
                hoverinfo="skip",
                name=f"{series} measured ceiling",
            )
        )
    if bw:
        xs = [lo / 2, hi * 2]
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=[bw * x / 1e3 * scale for x in xs],
                mode="lines",
                name=f"copy traffic {bw:.0f} GB/s",
                line=dict(color="black", width=2),
            )
        )
    detail = (
        f"slope: memory traffic of a measured device copy (read + write) {bw:.0f} GB/s; dotted: best measured per dtype"
        if bw
        else "copy bandwidth not measured"
    )
    style(
        fig,
        title("Roofline", run, detail),
        "arithmetic intensity (FLOP per byte moved, log)",
        _unit(run) + " (log)",
        legend_title="dtype",
    )
    fig.update_xaxes(type="log")
    fig.update_yaxes(type="log")
    return fig


def clocks_figure(run: RunResult, df: pd.DataFrame) -> go.Figure | None:
    samples = pd.DataFrame(list(MatmulMeta.from_run(run).clocks))
    if samples.empty:
        return None
    fig = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        row_heights=[0.55, 0.45],
        vertical_spacing=0.06,
        specs=[[{}], [{"secondary_y": True}]],
    )
    mid = (df["t_start_s"] + df["t_end_s"]) / 2
    for dtype, g in df.assign(t_mid=mid).groupby("dtype", sort=False):
        fig.add_trace(
            go.Scatter(
                x=g["t_mid"],
                y=g["throughput"],
                name=dtype,
                mode="markers",
                marker=dict(color=color_for(str(dtype))),
                customdata=g[["shape"]],
                hovertemplate="%{customdata[0]}: %{y:.1f}",
            ),
            row=1,
            col=1,
        )
    fig.add_trace(
        go.Scatter(x=samples["t_s"], y=samples["sm_clock_mhz"], name="SM clock (MHz)", line=dict(color="#444")),
        row=2,
        col=1,
    )
    fig.add_trace(
        go.Scatter(x=samples["t_s"], y=samples["power_w"], name="power (W)", line=dict(color="#d62728", dash="dot")),
        row=2,
        col=1,
        secondary_y=True,
    )
    throttled = samples.loc[samples["reasons"].apply(lambda r: bool(set(r or ()) - {"gpu_idle", "sync_boost"}))]
    if len(throttled):
        fig.add_trace(
            go.Scatter(
                x=throttled["t_s"],
                y=throttled["sm_clock_mhz"],
                mode="markers",
                name="throttled",
                marker=dict(symbol="x", color="#d62728"),
                text=throttled["reasons"].apply(", ".join),
            ),
            row=2,
            col=1,
        )
    style(
        fig, title("Clocks under the throughput curve", run, "NVML samples; × = a slowdown reason was active"), "", ""
    )
    fig.update_xaxes(title_text="time since run start (s)", row=2, col=1)
    fig.update_yaxes(title_text=_unit(run), row=1, col=1)
    fig.update_yaxes(title_text="MHz", row=2, col=1)
    fig.update_yaxes(title_text="W", row=2, col=1, secondary_y=True)
    return fig


def figures(run: RunResult, accelerator: str | None = None) -> list[Chart]:
    """The run's charts; published figures for the run's GPU, or for ``accelerator`` when one is chosen."""
    df = measured(run, accelerator)
    if df.empty:
        return []
    charts = [c for c in [node_chart(run)] if c is not None]
    charts.append(Chart("matmul-throughput", throughput_figure(run, df, accelerator), df))
    if df.loc[:, "rel_error"].notna().any():
        charts.append(Chart("matmul-accuracy", accuracy_figure(run, df.dropna(subset=["rel_error"])), df))
    charts.append(Chart("matmul-roofline", roofline_figure(run, df), df))
    clocks = clocks_figure(run, df)
    if clocks is not None:
        charts.append(Chart("matmul-clocks", clocks, pd.DataFrame(list(MatmulMeta.from_run(run).clocks))))
    return charts


def overlay(runs: list[RunResult]) -> list[Chart]:
    """Best throughput per dtype of each run, side by side (runs on different devices compare here).
    One unit for the chart: TFLOPS if any run is on a GPU, GFLOPS when all are CPU runs."""
    cuda = any(_is_cuda(run) for run in runs)
    unit, scale = throughput_unit(cuda)
    records = []
    for run in runs:
        df = measured(run)
        for dtype, g in df.groupby("dtype", sort=False):
            records.append(
                {"run": f"{run.id[:8]} {run.device_info.name}", "dtype": dtype, "best_tflops": g[TFLOPS].max()}
            )
    data = pd.DataFrame(records)
    fig = go.Figure()
    for dtype, g in data.groupby("dtype", sort=False) if not data.empty else []:
        fig.add_trace(
            go.Bar(
                x=g["run"].map(html_text), y=g["best_tflops"] * scale, name=dtype, marker_color=color_for(str(dtype))
            )
        )
    style(
        fig,
        "Best matmul throughput per run",
        "run",
        f"{unit} ({throughput_unit(cuda, ops=True)[0]} for int8)",
        legend_title="dtype",
        barmode="group",
    )
    return [Chart("matmul-overlay", fig, data)]

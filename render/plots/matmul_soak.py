"""Figures of a ``matmul-soak`` run: throughput per second with the burst and sustained lines, and the SM
clock, temperature and power NVML read in the same seconds (where it could) on panels beneath."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from core.result import RunResult
from core.rows.matmul import TFLOPS
from core.rows.matmul_soak import SoakMeta, SoakSample, SoakSummary
from core.rows.matmul_soak import samples as samples_of
from core.units import throughput_unit
from render.chart import Chart
from render.node import is_all_gpus, node_chart
from render.style import color_for, html_text, style, title

# NVML columns of a sample (core.hardware.clocks.ClockSampler.window) drawn under the throughput, with units.
PANELS = (("sm_clock_mhz", "SM clock (MHz)"), ("temp_c", "temp. (°C)"), ("power_w", "power (W)"))
BURST_COLOR, SUSTAINED_COLOR, FLAG_COLOR, THROUGHPUT_COLOR = "#2ca02c", "#1f77b4", "#d62728", "#444444"


def unit(run: RunResult) -> tuple[str, float]:
    """The run's throughput unit and the factor a stored TFLOPS value is multiplied by."""
    return throughput_unit(run.device_info.is_cuda, ops=SoakMeta.from_run(run, is_all_gpus(run)).dtype == "int8")


def summaries(run: RunResult) -> dict[str, SoakSummary]:
    """Each device's burst/sustained summary (the engine's meta): one entry, or one per GPU of an all-GPU run."""
    return dict(SoakMeta.from_run(run, is_all_gpus(run)).summaries)


def change_figure(s: SoakSummary) -> tuple[str, str]:
    """The change from burst to sustained as a figure a person reads (label, value): "drop" "18.0%" where throughput
    fell, "rise" "10.0%" where it rose after the burst window — never "drop" "-10.0%"."""
    return ("drop", f"{s.drop_pct:.1f}%") if s.drop_pct >= 0 else ("rise", f"{-s.drop_pct:.1f}%")


def samples(run: RunResult) -> pd.DataFrame:
    df = run.frame()
    if df.empty or TFLOPS not in df:
        return pd.DataFrame()
    if "device" not in df:
        df["device"] = run.device_info.torch_device or "device"
    df["throughput"] = df[TFLOPS] * unit(run)[1]
    return df


def by_device(run: RunResult) -> dict[str, list[SoakSample]]:
    """The samples of each device, in order (one device unless the run is on every GPU)."""
    out: dict[str, list[SoakSample]] = {}
    for sample in samples_of(run.rows):
        out.setdefault(sample.device or run.device_info.torch_device or "device", []).append(sample)
    return out


def soak_figure(run: RunResult) -> go.Figure:
    name, scale = unit(run)
    groups = by_device(run)
    panels = [(c, label) for c, label in PANELS if any(s.clocks.get(c) is not None for g in groups.values() for s in g)]
    fig = make_subplots(
        rows=1 + len(panels),
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.05,
        row_heights=[0.5] + [0.5 / len(panels)] * len(panels) if panels else None,
    )
    found = summaries(run)
    several = len(groups) > 1
    for i, (device, g) in enumerate(groups.items()):
        color = color_for(f"gpu{i}") if several else THROUGHPUT_COLOR
        label = html_text(device) if several else "throughput"
        _throughput(fig, g, label, color, (name, scale))
        summary = found.get(device)
        if summary:
            _summary_lines(fig, g, summary, (name, scale), label if several else "")
        _panel_lines(fig, g, panels, color, label if several else "")
    _burst_window(fig, next((s.burst_s for s in found.values()), None))
    _layout(fig, run, panels, name)
    return fig


def _throughput(fig: go.Figure, g: list[SoakSample], label: str, color: str, unit: tuple[str, float]) -> None:
    """One device's samples, and a cross on each second NVML gave a slowdown reason for."""
    name, scale = unit
    fig.add_trace(
        go.Scatter(
            x=[s.t_s for s in g],
            y=[s.tflops * scale for s in g],
            name=label,
            mode="lines+markers",
            line=dict(color=color),
            customdata=[[s.second, s.calls, s.interval_s] for s in g],
            hovertemplate="second %{customdata[0]}: %{y:,.1f} " + name + "<br>%{customdata[1]} calls in "
            "%{customdata[2]:.3f} s<extra></extra>",
        ),
        row=1,
        col=1,
    )
    hot = [s for s in g if s.throttled]
    if hot:
        fig.add_trace(
            go.Scatter(
                x=[s.t_s for s in hot],
                y=[s.tflops * scale for s in hot],
                mode="markers",
                name=f"{label}: slowdown reason active",
                marker=dict(symbol="x", size=10, color=FLAG_COLOR),
                text=[", ".join(s.throttle_reasons) for s in hot],
                hovertemplate="%{text}<extra></extra>",
            ),
            row=1,
            col=1,
        )


def _panel_lines(fig: go.Figure, g: list[SoakSample], panels: list[tuple[str, str]], color: str, who: str) -> None:
    """One device's NVML readings, one panel each under the throughput."""
    for row, (col, axis) in enumerate(panels, start=2):
        fig.add_trace(
            go.Scatter(
                x=[s.t_s for s in g],
                y=[s.clocks.get(col) for s in g],
                name=f"{who} {axis}" if who else axis,
                mode="lines",
                line=dict(color=color),
                showlegend=False,
                hovertemplate=f"%{{y:.0f}} {axis}<extra></extra>",
            ),
            row=row,
            col=1,
        )


def _burst_window(fig: go.Figure, burst_s: float | None) -> None:
    if burst_s:
        fig.add_shape(
            type="rect",
            xref="x",
            yref="y domain",
            x0=0,
            x1=burst_s,
            y0=0,
            y1=1,
            fillcolor=BURST_COLOR,
            opacity=0.08,
            line_width=0,
        )


def _layout(fig: go.Figure, run: RunResult, panels: list[tuple[str, str]], name: str) -> None:
    """Title (saying why there are no NVML panels where there are none), height and axis titles."""
    detail = "one point per second (whole calls ÷ the sample's measured length); shaded: burst window"
    if not panels:
        detail += "; no clock, temperature or power: NVML not read" + (" (a CPU)" if run.device_info.is_cpu else "")
    style(fig, title("Matmul soak: burst vs sustained", run, detail), "", name)
    fig.update_layout(height=420 + 170 * len(panels))
    fig.update_xaxes(title_text="seconds since sampling began", row=1 + len(panels), col=1)
    for row, (_, axis) in enumerate(panels, start=2):
        fig.update_yaxes(title_text=html_text(axis), row=row, col=1)


def _summary_lines(fig: go.Figure, g: list[SoakSample], s: SoakSummary, unit: tuple[str, float], who: str) -> None:
    """The burst level across the run and the sustained level across its last half, as segments."""
    name, scale = unit
    end = max(sample.t_s for sample in g)
    start = min((sample.t_start_s for sample in g if sample.second >= s.sustained_from_second), default=0.0)
    for label, x, y, color in (
        ("burst", [0.0, end], s.burst_tflops, BURST_COLOR),
        ("sustained", [start, end], s.sustained_tflops, FLAG_COLOR if s.drop_flagged else SUSTAINED_COLOR),
    ):
        fig.add_trace(
            go.Scatter(
                x=x,
                y=[y * scale] * 2,
                mode="lines",
                name=f"{who} {label} {y * scale:,.1f} {name}".strip(),
                line=dict(color=color, dash="dash" if label == "burst" else "solid", width=2),
                hoverinfo="name",
            ),
            row=1,
            col=1,
        )


def figures(run: RunResult) -> list[Chart]:
    df = samples(run)
    if df.empty:
        return []
    charts = [c for c in [node_chart(run)] if c is not None]
    charts.append(Chart("matmul-soak", soak_figure(run), df))
    return charts


def overlay(runs: list[RunResult]) -> list[Chart]:
    """Burst and sustained of each run (each GPU of an all-GPU run), side by side; one unit for the chart."""
    cuda = any(run.device_info.is_cuda for run in runs)
    name, scale = throughput_unit(cuda)
    records = [
        {
            "run": f"{run.id[:8]} {device if is_all_gpus(run) else run.device_info.name}",
            "burst_tflops": s.burst_tflops,
            "sustained_tflops": s.sustained_tflops,
            "drop_pct": s.drop_pct,
        }
        for run in runs
        for device, s in summaries(run).items()
    ]
    data = pd.DataFrame(records)
    fig = go.Figure()
    for col, label, color in (
        ("burst_tflops", "burst", BURST_COLOR),
        ("sustained_tflops", "sustained", SUSTAINED_COLOR),
    ):
        if not data.empty:
            fig.add_trace(go.Bar(x=data["run"].map(html_text), y=data[col] * scale, name=label, marker_color=color))
    style(fig, "Matmul soak: burst vs sustained per run", "run", name, legend_title="figure", barmode="group")
    return [Chart("matmul-soak-overlay", fig, data)]

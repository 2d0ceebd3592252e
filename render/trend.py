"""The trend of each figure over a box's runs (Compare): one line per box, regressions marked.

The figures and the regression rule are the engine's (:mod:`core.health.figures`, :mod:`core.health.history`):
a point is marked where it fell below the box's earlier runs beyond their spread, with both numbers in its hover.
"""

from __future__ import annotations

from collections import defaultdict

import pandas as pd
import plotly.graph_objects as go

from core.hardware.identity import box_key, box_label
from core.health.figures import figures_of
from core.health.history import MAX_EARLIER, compare
from core.result import DeviceInfo, RunResult
from core.units import count_text
from render.chart import Chart
from render.style import color_for, html_text, style, title


def trend_frame(runs: list[RunResult]) -> pd.DataFrame:
    """One row per figure per run: when, which box, the value, and whether it regressed against the runs of the
    same box and settings before it (the engine's rule)."""
    series: dict[tuple, list[tuple[str, float]]] = defaultdict(list)
    records = []
    for run in sorted(runs, key=lambda r: r.started_at):
        box = box_key(run.device)
        for figure in figures_of(run):
            key = (box, repr(sorted(run.config.items())), figure.key)
            earlier = series[key][-MAX_EARLIER:] if box else []
            found = compare(figure, earlier)
            records.append(
                {
                    "figure": figure.figure,
                    "where": figure.where,
                    "started_at": run.started_at,
                    "value": figure.value,
                    "unit": figure.unit,
                    "box": box_label(run.device),
                    "box_name": box_name(run.device_info),
                    "run_id": run.id,
                    "regressed": bool(found and found.regressed),
                    "history": found.text if found else "",
                }
            )
            series[key].append((run.id, figure.value))
    return pd.DataFrame.from_records(records)


def box_name(device: DeviceInfo) -> str:
    """A box as a legend names it: its host and its GPUs' (or CPU's) names, the UUIDs left to the hover."""
    parts = [DeviceInfo.of(d) for d in device.devices] or [device]
    names = list(dict.fromkeys(str(d.name or "?") for d in parts))
    count = f"{len(parts)} × " if len(parts) > 1 and len(names) == 1 else ""
    return f"{device.host or 'unknown box'}: {count}{', '.join(names)}"


TIME_TICKS = "%Y-%m-%d<br>%H:%M"  # a run's start to the minute: a trend spans hours to months, never milliseconds
ONE_MOMENT_SPAN = pd.Timedelta(hours=12)  # either side of a trend whose runs all started at one time


def trend_charts(runs: list[RunResult]) -> list[Chart]:
    """One chart per figure (its unit on the axis), a line per box and device."""
    df = trend_frame(runs)
    if df.empty:
        return []
    charts = []
    for figure, part in df.groupby("figure", sort=True):
        fig = go.Figure()
        for _, line in part.groupby(["box", "where"], sort=True):
            box, where = line["box_name"].iloc[0], line["where"].iloc[0]
            name = f"{box} · {where}"
            fig.add_trace(
                go.Scatter(
                    x=pd.to_datetime(line["started_at"]),
                    y=line["value"],
                    mode="lines+markers",
                    name=html_text(name),
                    line_color=color_for(name),
                    customdata=line[["run_id", "history", "box"]],
                    hovertemplate="%{y:.4g} · run %{customdata[0]}<br>%{customdata[2]}<br>%{customdata[1]}<extra></extra>",
                )
            )
            bad = line[line["regressed"]]
            if not bad.empty:
                fig.add_trace(
                    go.Scatter(
                        x=pd.to_datetime(bad["started_at"]),
                        y=bad["value"],
                        mode="markers",
                        marker=dict(symbol="x", size=14, color="#D55E00"),
                        name=html_text(f"regressed ({where})"),
                        customdata=bad[["history"]],
                        hovertemplate="%{customdata[0]}<extra></extra>",
                    )
                )
        unit = part["unit"].iloc[0]
        times = pd.to_datetime(part["started_at"])
        if times.nunique() == 1:  # one moment: a day around it, not an axis of milliseconds
            fig.update_xaxes(range=[times.iloc[0] - ONE_MOMENT_SPAN, times.iloc[0] + ONE_MOMENT_SPAN])
        fig.update_xaxes(tickformat=TIME_TICKS)
        style(
            fig,
            title(f"Trend: {figure}", None, count_text(len(part), "point")),
            "run started (UTC)",
            f"{figure} ({unit})",
        )
        charts.append(Chart(name=f"trend-{figure}".replace(" ", "-"), figure=fig, data=part.reset_index(drop=True)))
    return charts

"""A run on every GPU of the box (``device="all"``): the per-GPU bars against the node median, and the
flagged GPUs with their clocks. Shared by the matmul and step-benchmark plots and pages.

:func:`node_chart` is pure Plotly (the pages, compare and the HTML report use it); the page's verdict
above the charts is ``pages.common.node``.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from core.experiment import ALL, SLOW_FRACTION
from core.result import RunResult
from render.chart import Chart
from render.style import style, title

OK_COLOR, SLOW_COLOR = "#1f77b4", "#d62728"


def is_all_gpus(run: RunResult) -> bool:
    return run.device_info.torch_device == ALL


def node_table(run: RunResult) -> pd.DataFrame:
    per = (run.meta.get("node") or {}).get("per_device") or []
    return pd.DataFrame(per)


def node_chart(run: RunResult) -> Chart | None:
    """Each GPU's median ratio to the node median, in %, with the median (100%) and the flag line."""
    node = run.meta.get("node") or {}
    df = node_table(run)
    if df.empty or df.loc[:, "relative"].isna().all():
        return None
    df = df.dropna(subset=["relative"])
    threshold = 100 * (1 - node.get("threshold", SLOW_FRACTION))
    hover = [clock_text(r) for _, r in df.iterrows()]
    fig = go.Figure(
        go.Bar(
            x=df["device"],
            y=df["relative"] * 100,
            marker_color=[SLOW_COLOR if f else OK_COLOR for f in df["flagged"]],
            text=[f"{v * 100:.1f}%" for v in df["relative"]],
            textposition="outside",
            hovertext=hover,
            hovertemplate="%{x}: %{y:.1f}% of the node median<br>%{hovertext}<extra></extra>",
        )
    )
    fig.add_hline(
        y=100, line=dict(color="black", width=2), annotation_text="node median", annotation_position="top left"
    )
    fig.add_hline(
        y=threshold,
        line=dict(color=SLOW_COLOR, dash="dash", width=1),
        annotation_text=f"{threshold:.0f}%: flagged below",
        annotation_position="bottom left",
    )
    low = min(90.0, float(df.loc[:, "relative"].min() * 100) - 5)
    style(
        fig,
        title(
            "Every GPU against the node median",
            run,
            f"{node.get('label', node.get('metric'))}: median over {node.get('points', 0)} point(s) of "
            f"each GPU's value / the median of all GPUs at that point",
        ),
        "GPU",
        "% of the node median",
        showlegend=False,
    )
    fig.update_yaxes(range=[low, max(110.0, float(df.loc[:, "relative"].max() * 100) + 5)])
    return Chart("node-per-gpu", fig, df)


def _num(value, unit: str) -> str:
    return f"{value:.0f} {unit}" if isinstance(value, (int, float)) and value == value else f"? {unit}"


def clock_text(r) -> str:
    """What NVML said about one GPU while it ran (or why it said nothing)."""
    if not isinstance(r.get("sm_clock_mhz"), (int, float)) or r.get("sm_clock_mhz") != r.get("sm_clock_mhz"):
        return str(r.get("clocks_note") or "no clock samples")
    reasons = r.get("throttle_reasons")
    return (
        f"SM clock {_num(r.get('sm_clock_mhz'), 'MHz')} (min {_num(r.get('sm_clock_min_mhz'), 'MHz')}), "
        f"{_num(r.get('temp_c'), '°C')}, {_num(r.get('power_w'), 'W')}, throttle reasons: "
        f"{', '.join(reasons) if isinstance(reasons, list) and reasons else 'none'}"
    )

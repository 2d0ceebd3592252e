"""A run on every GPU of the box (``device="all"``): the per-GPU bars against the node median, and the
flagged GPUs with their clocks. Shared by the matmul and step-benchmark plots and pages.

:func:`node_chart` is pure Plotly (the pages, compare and the HTML report use it); the page's verdict
above the charts is ``pages.common.node``.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from core.experiment import ALL
from core.result import RunResult
from core.rows.node import NodeComparison, NodeDevice
from render.chart import Chart
from render.style import style, title

OK_COLOR, SLOW_COLOR = "#1f77b4", "#d62728"


def is_all_gpus(run: RunResult) -> bool:
    return run.device_info.torch_device == ALL


def node_table(node: NodeComparison) -> pd.DataFrame:
    """Each GPU's figures as the chart's data and the page's table."""
    return pd.DataFrame([d.to_dict() for d in node.per_device])


def node_chart(run: RunResult) -> Chart | None:
    """Each GPU's median ratio to the node median, in %, with the median (100%) and the flag line."""
    node = NodeComparison.from_run(run)
    shown = [d for d in node.per_device if d.relative is not None] if node else []
    if node is None or not shown:
        return None
    relative = [100 * (d.relative or 0.0) for d in shown]
    threshold = 100 * (1 - node.threshold)
    fig = go.Figure(
        go.Bar(
            x=[d.device for d in shown],
            y=relative,
            marker_color=[SLOW_COLOR if d.flagged else OK_COLOR for d in shown],
            text=[f"{v:.1f}%" for v in relative],
            textposition="outside",
            hovertext=[clock_text(d) for d in shown],
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
    style(
        fig,
        title(
            "Every GPU against the node median",
            run,
            f"{node.named}: median over {node.points} point(s) of each GPU's value / the median of all GPUs at "
            "that point",
        ),
        "GPU",
        "% of the node median",
        showlegend=False,
    )
    fig.update_yaxes(range=[min(90.0, min(relative) - 5), max(110.0, max(relative) + 5)])
    df = node_table(node).dropna(subset=["relative"])
    return Chart("node-per-gpu", fig, df)


def _num(value, unit: str) -> str:
    return f"{value:.0f} {unit}" if isinstance(value, (int, float)) and value == value else f"? {unit}"


def clock_text(d: NodeDevice) -> str:
    """What NVML said about one GPU while it ran (or why it said nothing)."""
    if not d.sampled:
        return str(d.clocks_note or "no clock samples")
    return (
        f"SM clock {_num(d.sm_clock_mhz, 'MHz')} (min {_num(d.sm_clock_min_mhz, 'MHz')}), "
        f"{_num(d.temp_c, '°C')}, {_num(d.power_w, 'W')}, throttle reasons: "
        f"{', '.join(d.throttle_reasons) if d.throttle_reasons else 'none'}"
    )

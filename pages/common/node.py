"""The verdict above an all-GPU run's charts (Streamlit); the chart itself is :mod:`render.node`."""

from __future__ import annotations

import streamlit as st

from core.result import RunResult
from core.rows.node import NodeComparison, concurrency_note
from render.node import clock_text


def show(run: RunResult) -> None:
    """The verdict above an all-GPU run's charts: which GPUs are slow, with what their clocks said."""
    node = NodeComparison.from_run(run)
    if node is None or not node.per_device:
        return
    flagged = [d for d in node.per_device if d.flagged]
    if flagged:
        st.warning(
            "\n".join(
                [f"More than {node.threshold:.0%} below the node median ({node.named}):"]
                + [f"- **{d.device}** at {(d.relative or 0.0) * 100:.1f}% — {clock_text(d)}" for d in flagged]
            )
        )
    elif any(d.relative is not None for d in node.per_device):
        st.success(f"All {len(node.per_device)} GPUs within {node.threshold:.0%} of the node median.")
    if note := concurrency_note(run):
        st.caption(note)

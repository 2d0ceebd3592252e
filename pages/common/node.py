"""The verdict above an all-GPU run's charts (Streamlit); the chart itself is :mod:`render.node`."""

from __future__ import annotations

import streamlit as st

from core.experiment import SLOW_FRACTION
from core.result import RunResult
from render.node import clock_text, node_table


def show(run: RunResult) -> None:
    """The verdict above an all-GPU run's charts: which GPUs are slow, with what their clocks said."""
    node = run.meta.get("node") or {}
    df = node_table(run)
    if df.empty:
        return
    share = node.get("threshold", SLOW_FRACTION)
    flagged = df[df["flagged"]]
    if len(flagged):
        st.warning(
            "\n".join(
                [f"More than {share:.0%} below the node median ({node.get('label', node.get('metric'))}):"]
                + [
                    f"- **{r['device']}** at {r['relative'] * 100:.1f}% — {clock_text(r)}"
                    for _, r in flagged.iterrows()
                ]
            )
        )
    elif df["relative"].notna().any():
        st.success(f"All {len(df)} GPUs within {share:.0%} of the node median.")
    note = (run.meta.get("concurrency") or {}).get("note")
    if note:
        st.caption(note)

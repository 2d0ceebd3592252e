"""A figure with a plain fact under it (where, when, of what): never a metric's delta, whose arrow (↑, ↓) reads
as a change."""

from __future__ import annotations

from typing import Any


def fact(col: Any, label: str, value: Any, note: str | None = None, help: str | None = None) -> None:
    """``st.metric`` without a delta in ``col`` (a column or ``st``), ``note`` written under it as a caption."""
    col.metric(label, value, help=help)
    if note:
        col.caption(note)

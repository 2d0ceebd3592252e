"""The stack's switches as widgets, one way on every page that offers them (Step benchmark, Training memory)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from core.transformer.stack import ATTENTION_IMPLS, ATTENTION_NOTES, OPTIMIZER_IMPLS, OPTIMIZER_NOTES, Stack


def switches(cols: Sequence[Any], key: str, compile_help: str) -> Stack:
    """Attention, AdamW implementation and torch.compile in three columns; checkpointing is the page's own."""
    attention = cols[0].selectbox(
        "Attention",
        ATTENTION_IMPLS,
        key=f"{key}.attention",
        help="; ".join(f"{k}: {v}" for k, v in ATTENTION_NOTES.items()),
    )
    optimizer_impl = cols[1].selectbox(
        "AdamW implementation",
        OPTIMIZER_IMPLS,
        key=f"{key}.optimizer_impl",
        help="; ".join(f"{k}: {v}" for k, v in OPTIMIZER_NOTES.items()),
    )
    compiled = cols[2].checkbox("torch.compile", key=f"{key}.compile", help=compile_help)
    return Stack(attention, optimizer_impl, compiled)

"""The analysed GPU's name as a trace's run stores it: the engine's diff and every summary line read it alike,
without the analysis (and its numpy) the trace's import runs in the worker."""

from __future__ import annotations

import re


def named_gpu(meta: dict) -> str | None:
    """The analysed GPU's name as the file gave it (or the shipped example's), None where nobody named it. Runs
    stored before an unnamed GPU was stored as None hold "GPU <n>" there: that is no name either."""
    name = meta.get("device_name")
    return name if isinstance(name, str) and not re.fullmatch(r"GPU \d+", name) else None


def gpu_text(meta: dict) -> str:
    """The analysed GPU's name, or that the file names none: what every summary line says of it."""
    return named_gpu(meta) or "the file names no GPU"

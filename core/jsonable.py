"""Plain data made strict-JSON-ready: what the worker sends, the store keeps and the exports write."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def json_ready(value: Any) -> Any:
    """Recursively turn tuples into lists and non-finite floats into strings ("inf", "nan").

    Strict JSON has no Infinity/NaN; the lab's values legitimately overflow (65536 in fp16), so they
    travel as strings and :func:`core.result.rows_frame` turns them back into floats.
    """
    if isinstance(value, float):
        if value != value:
            return "nan"
        if value in (float("inf"), float("-inf")):
            return "inf" if value > 0 else "-inf"
        return value
    if isinstance(value, Mapping):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    return value

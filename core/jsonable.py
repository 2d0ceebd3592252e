"""Plain data made strict-JSON-ready: what the worker sends, the store keeps and the exports write."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any


def json_ready(value: Any) -> Any:
    """Recursively turn tuples into lists and non-finite floats into strings ("inf", "nan").

    Strict JSON has no Infinity/NaN; the lab's values legitimately overflow (65536 in fp16), so they
    travel as strings and :func:`core.result.rows_frame` turns them back into floats. The plain types are told by
    their exact type first: every result passes through here (a trace's thousands of rows), and an ``isinstance``
    chain per value tripled the time.
    """
    kind = type(value)
    if kind is float:
        return value if value - value == 0.0 else _non_finite(value)  # inf - inf and nan - nan are nan
    if kind is dict:
        return {k if type(k) is str else str(k): json_ready(v) for k, v in value.items()}
    if kind is list or kind is tuple:
        return [json_ready(v) for v in value]
    if kind is str or kind is int or kind is bool or value is None:
        return value
    return _subclassed(value)


def _subclassed(value: Any) -> Any:
    """:func:`json_ready` of what is not exactly a plain type: a float, mapping or sequence of a subclass (numpy's
    float64, a read-only mapping), or anything else, which is kept as it is."""
    if isinstance(value, float):
        return value if math.isfinite(value) else _non_finite(value)
    if isinstance(value, Mapping):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    return value


def _non_finite(value: float) -> str:
    return "nan" if value != value else "inf" if value > 0 else "-inf"

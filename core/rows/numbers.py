"""A stored number read back: strict JSON holds no infinity or NaN, so runs store them as "inf", "-inf", "nan"
(:func:`core.jsonable.json_ready`); a row class reads them as the floats the engine wrote. Torch-free."""

from __future__ import annotations

from typing import Any

_SPECIAL = {"inf": float("inf"), "-inf": float("-inf"), "nan": float("nan")}


def real(value: Any) -> Any:
    """``value`` with a stored "inf", "-inf" or "nan" as the float it stands for; anything else as it is."""
    return _SPECIAL.get(value, value) if isinstance(value, str) else value

"""Tables as a page shows them: every missing value written :data:`core.units.MISSING` ("—"), never
``None`` or ``nan``. Pure pandas: no Streamlit."""

from __future__ import annotations

import math

import pandas as pd

from core.units import MISSING, numbers_text


def _text(value: object, fmt: str | None) -> object:
    if isinstance(value, float) and fmt:
        return fmt.format(value) if math.isfinite(value) else str(value)
    return value


def with_dashes(df: pd.DataFrame, formats: dict[str, str] | None = None) -> pd.DataFrame:
    """A copy of ``df`` whose missing values (None, NaN) read "—". A column with none keeps its values (and its
    numeric type); one with some becomes text, its numbers written with ``formats[column]`` (a ``str.format``
    pattern, e.g. ``"{:,.2f}"``) where given, else in one notation (:func:`core.units.numbers_text`)."""
    out = df.copy()
    formats = formats or {}
    for column in out.columns:
        missing = out[column].isna().to_numpy(dtype=bool)
        if not missing.any():
            continue
        values = out[column].tolist()
        if column in formats:
            out[column] = [
                MISSING if gone else _text(v, formats[column]) for v, gone in zip(values, missing, strict=True)
            ]
        elif all(gone or isinstance(v, (int, float)) and not isinstance(v, bool) for v, gone in zip(values, missing)):
            out[column] = numbers_text([None if gone else v for v, gone in zip(values, missing, strict=True)])
        else:
            out[column] = [MISSING if gone else v for v, gone in zip(values, missing, strict=True)]
        out[column] = out[column].astype(str)
    return out

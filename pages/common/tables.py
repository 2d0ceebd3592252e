"""Every table of the dashboard through one call, so its numbers read as the rest of the lab writes them: a missing
value is "—" (:func:`render.table.with_dashes`) and a number of four digits or more has its thousands separated
("3,072,871,424", where ``st.dataframe`` drew 3072871424), still sorting as a number. Identifiers (a rank, a step, a
sequence id) are written as they are."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from render.table import with_dashes

IDENTIFIERS = frozenset({"rank", "step", "seq_id", "second", "pid", "gpu_index", "line", "last_completed_seq",
                         "last_entered_seq", "size", "m", "n", "k", "world_size"})  # fmt: skip
SEPARATED_FROM = 1000  # a column with a number this large or larger has its thousands separated


def separated(df: pd.DataFrame) -> list[str]:
    """The numeric columns whose numbers a person reads with separators: any of them ≥ 1,000, not an identifier."""
    out = []
    for column, values in df.items():
        if (
            str(column) in IDENTIFIERS
            or pd.api.types.is_bool_dtype(values)
            or not pd.api.types.is_numeric_dtype(values)
        ):
            continue
        if (values.abs() >= SEPARATED_FROM).any():
            out.append(column)
    return out


def show_table(df: pd.DataFrame | list[dict], where=None, **kwargs) -> None:
    """``st.dataframe`` of ``df`` (rows as dicts too; in ``where``, a column, else the page) with "—" for what it
    lacks and thousands separated (the browser's locale)."""
    shown = with_dashes(df if isinstance(df, pd.DataFrame) else pd.DataFrame(df))
    config = {c: st.column_config.NumberColumn(format="localized") for c in separated(shown)}
    (where or st).dataframe(shown, column_config=config | kwargs.pop("column_config", {}), **kwargs)

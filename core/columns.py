"""What a run's row columns are: sweep *keys* (size, dtype, step) or measured *metrics* (``median_ms``,
``tflops``, ``peak_bytes``), and the one figure a run is known by (its headline).

The store writes each run's headline into its summary when the run is saved, so the history lists
runs without reading their rows; the comparison pages split columns with the same rules. pandas is
imported when called, so ``core`` still imports on a box with only PyTorch.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass
from typing import cast

from core.rows.kinds import of_kinds
from core.rows.matmul import TFLOPS
from core.units import bytes_text, throughput_unit

# Name tokens of a throughput stored in TFLOPS (TOPS for int8): the rows' column and its kin (``burst_tflops``).
THROUGHPUT_TOKENS = frozenset({TFLOPS, "tops"})
# Name tokens that mark a measured quantity (``time_ms``, ``ms_median``, ``peak_bytes``).
MEASURE_TOKENS = frozenset(
    {
        "ms",
        "us",
        "ns",
        "s",
        "sec",
        "seconds",
        "bytes",
        "kib",
        "mib",
        "gib",
        "kb",
        "mb",
        "gb",
        "flops",
        "gflops",
        "gbs",
        "pct",
        "percent",
        "ratio",
        "error",
        "err",
        "ulp",
        "rate",
        "throughput",
        "median",
        "mean",
        "std",
        "min",
        "max",
        "p20",
        "p80",
        "time",
        "peak",
        "allocated",
        "reserved",
        "memory",
        "loss",
    }
    | THROUGHPUT_TOKENS
)
# Free-text columns: never join keys, never plotted.
TEXT_COLUMNS = frozenset({"reason", "error", "message", "note", "notes", "status", "traceback"})


def tokens(name: str) -> set[str]:
    return set(str(name).lower().replace("-", "_").split("_"))


def _hashable(series) -> bool:
    return all(isinstance(v, Hashable) for v in series.dropna())


def split_columns(df) -> tuple[list[str], list[str]]:
    """(keys, metrics) of a rows frame (:func:`core.result.rows_frame`), in column order."""
    import pandas as pd

    keys, metrics = [], []
    for col in df.columns:
        series = df[col]
        if str(col) in TEXT_COLUMNS or not _hashable(series):
            continue
        numeric = pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_bool_dtype(series)
        if numeric and (pd.api.types.is_float_dtype(series) or tokens(col) & MEASURE_TOKENS):
            metrics.append(col)
        else:
            keys.append(col)
    return keys, metrics


def headline_metric(metrics: list[str]) -> tuple[str, str] | None:
    """(column, "max"|"min"): the figure a run is known by — throughput up, time down, memory up."""
    preference = (
        (tuple(THROUGHPUT_TOKENS), "max"),
        (("gflops", "flops"), "max"),
        (("gbs",), "max"),
        (("ms", "us", "ns", "s", "time"), "min"),
        (("bytes", "gib", "mib", "peak"), "max"),
    )
    for names, how in preference:
        found = [m for m in metrics if tokens(m) & set(names)]
        if found:
            return next((m for m in found if "median" in tokens(m)), found[0]), how
    return (metrics[0], "max") if metrics else None


def fmt(value) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return f"{value:.4g}"


# Columns that hold a reference a measurement is held against (a datasheet's peak, a published maximum, a roofline's
# ceiling, a plan), never what a run measured: no headline is read from them.
REFERENCE_COLUMNS = frozenset(
    {
        "peak_tflops",
        "published_tflops",
        "bandwidth_bound_tflops",
        "unit_peak_tflops",
        "measured_ceiling_tflops",
        "peak_estimated_bytes",
    }
)


@dataclass(frozen=True)
class Headline:
    """The figure an experiment's run is known by: which column of which rows, the best of them, and its name."""

    column: str
    how: str  # "max" | "min"
    label: str = ""  # as a person reads it ("" : the column's name; a throughput: TFLOPS or GFLOPS)
    kinds: tuple[str, ...] = ()  # the kinds of rows it reads (empty: every row)


# By experiment: what its rows measure, never a column picked by its name.
HEADLINES = {
    "matmul": Headline(TFLOPS, "max"),
    "matmul-soak": Headline(TFLOPS, "max"),
    "step-bench": Headline("tokens_per_s", "max", "tokens/s", ("summary", "precision", "grid")),
    "train-memory": Headline("total_bytes", "max", "peak"),
    "estimate": Headline("total_bytes", "max", "peak (estimate)"),
    "allocator": Headline("peak_allocated_bytes", "max", "peak allocated"),
    "reference": Headline("lab_median_ms", "min", "lab median (ms)"),
}


# Imports whose rows describe the files, one per rank, and measure nothing: the headline counts them (a dump's
# times picked by the naming rules read "min last_created_ns 1795737141624708358"), without importing pandas.
COUNTED = {"flight-recorder": "rank"}


def headline(rows: list[dict], is_cuda: bool = True, experiment: str = "") -> str:
    """E.g. 'max TFLOPS 312.4' (a CPU run: 'max GFLOPS 95.1') — the history's one-number summary of a run: the
    experiment's own figure (:data:`HEADLINES`), else the best measured column by the naming rules."""
    if not rows:
        return ""
    if experiment in COUNTED:
        return f"{len(rows):,} {COUNTED[experiment]}{'s' if len(rows) != 1 else ''}"
    import pandas as pd

    from core.result import rows_frame

    chosen = HEADLINES.get(experiment)
    if chosen and chosen.kinds:
        rows = of_kinds(rows, chosen.kinds)
    rows = [r for r in rows if r.get("status", "ok") == "ok"]  # a row that did not run measured nothing
    df = rows_frame(rows)
    if chosen is None or chosen.column not in df:
        metric = headline_metric([m for m in split_columns(df)[1] if m not in REFERENCE_COLUMNS]) if len(df) else None
        chosen = Headline(*metric) if metric else None
    if chosen is None:
        return f"{len(df):,} row{'s' if len(df) != 1 else ''}"
    col, how = chosen.column, chosen.how
    values = cast("pd.Series", pd.to_numeric(df[col], errors="coerce")).dropna()  # a Series for a Series
    if values.empty:
        return f"{col}: no value"
    value = values.max() if how == "max" else values.min()
    if tokens(col) & THROUGHPUT_TOKENS:  # stored in TFLOPS; shown under core.units' rule
        unit, scale = throughput_unit(is_cuda, ops="tops" in tokens(col))
        return f"{how} {unit} {fmt(value * scale)}"
    if tokens(col) & {"bytes"}:
        return f"{how} {chosen.label or col} {bytes_text(value)}"
    if chosen.label == "tokens/s":
        return f"{how} {value:,.0f} tokens/s"
    return f"{how} {chosen.label or col} {fmt(value)}"

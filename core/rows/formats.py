"""A ``formats`` run as the engine stores it: the inspector's rows (what each format stores for the value), and in
its meta the format table, the spacing (ULP) points, the typed decimal and the device the casts ran on.

The engine builds these records and stores ``to_row()`` / ``to_meta()``, the keys and order runs have always had;
the charts and the page read the fields. A stored "inf"/"nan" reads back as the float the engine wrote. Torch-free.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from core.result import RunResult
from core.rows.numbers import real
from core.rows.stored import split


@dataclass(frozen=True)
class FormatInfo:
    """A row of the format table: field widths, range and epsilon of one format, and where they come from."""

    format: str = ""  # "fp32", "tf32", "int4", ...
    kind: str = "float"  # float | int
    torch_dtype: str | None = None  # None where torch has no dtype (tf32) or cannot cast (int4)
    note: str = ""  # where torch.finfo disagrees with the measured gap
    bits: int | None = None  # None: torch could not describe the format (the source says why)
    sign_bits: int | None = None
    exponent_bits: int | None = None
    mantissa_bits: int | None = None
    bytes: float | None = None  # 0.5 for a 4-bit format
    max: float | None = None
    min: float | None = None
    smallest_normal: float | None = None  # None for an integer format
    smallest_subnormal: float | None = None  # None where the format has none
    eps: float | None = None
    source: str = ""
    decimal_digits: float | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)  # keys no version of the engine wrote
    # the stored keys in the stored order: a range from a definition (tf32, fp4) stores min after eps, a format
    # torch cannot describe stores its source alone
    stored_keys: tuple[str, ...] = field(default=(), compare=False, repr=False)

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    def to_row(self) -> dict:
        return _stored(self, _TABLE_KEYS)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> FormatInfo:
        """A stored row as a format; keys it lacks take their defaults, keys it does not name stay in ``extra``."""
        return _from_row(cls, row, _TABLE_NUMBERS)


_TABLE_KEYS = tuple(f.name for f in dataclasses.fields(FormatInfo) if f.name not in ("extra", "stored_keys"))
_TABLE_NUMBERS = frozenset("max min smallest_normal smallest_subnormal eps decimal_digits".split())


@dataclass(frozen=True)
class FormatValue:
    """A row of the value inspector: what one format stores for the typed value, its error, bits and outcome."""

    format: str = ""
    value: float = 0.0  # the typed value
    stored: float | None = None  # None: the format cannot hold it (``reason`` says why)
    abs_error: float | None = None  # against the typed decimal, in exact decimal arithmetic
    rel_error: float | None = None
    sign: str | None = None  # the bit pattern's fields, as text
    exponent: str | None = None
    mantissa: str | None = None
    bits: str | None = None  # the fields joined by "|"
    hex: str | None = None
    status: str = ""  # exact rounded subnormal overflow saturated underflow "sign lost" nan unsupported
    reason: str | None = None  # why a format cannot store the value
    overflow: bool | None = None
    underflow: bool | None = None
    is_nan: bool | None = None
    subnormal: bool | None = None
    method: str | None = None  # how the cast was made
    extra: Mapping[str, Any] = field(default_factory=dict)
    stored_keys: tuple[str, ...] = field(default=(), compare=False, repr=False)

    @property
    def unsupported(self) -> bool:
        return self.status == "unsupported"

    def to_row(self) -> dict:
        """The stored row: a cast's fields, or the reason a format cannot store the value."""
        return _stored(self, _UNSUPPORTED_KEYS if self.unsupported else _CAST_KEYS)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> FormatValue:
        return _from_row(cls, row, _VALUE_NUMBERS)


_CAST_KEYS = (
    "format value stored abs_error rel_error sign exponent mantissa bits hex status overflow underflow is_nan "
    "subnormal method"
).split()
_UNSUPPORTED_KEYS = "format value stored abs_error rel_error bits status reason".split()
_VALUE_NUMBERS = frozenset("value stored abs_error rel_error".split())


@dataclass(frozen=True)
class SpacingPoint:
    """A point of the spacing chart: the gap (ULP) above a representable magnitude of a float format."""

    format: str
    magnitude: float
    ulp: float

    def to_row(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> SpacingPoint:
        return cls(row["format"], real(row["magnitude"]), real(row["ulp"]))


@dataclass(frozen=True)
class FormatsSummary:
    """What a formats run's meta holds for the views, in the stored order."""

    table: tuple[FormatInfo, ...] = ()
    spacing: tuple[SpacingPoint, ...] = ()
    exact_value: str | None = None  # the typed decimal the errors are against ("None" for inf or NaN)
    cast_device: str | None = None

    def info(self, name: str) -> FormatInfo | None:
        """The table's row of format ``name``, if it has one."""
        return next((i for i in self.table if i.format == name), None)

    def to_meta(self) -> dict:
        return {
            "table": [i.to_row() for i in self.table],
            "spacing": [p.to_row() for p in self.spacing],
            "exact_value": self.exact_value,
            "cast_device": self.cast_device,
        }

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any]) -> FormatsSummary:
        return cls(
            tuple(FormatInfo.from_row(r) for r in meta.get("table") or ()),
            tuple(SpacingPoint.from_row(r) for r in meta.get("spacing") or ()),
            meta.get("exact_value"),
            meta.get("cast_device"),
        )


def values_of(run: RunResult) -> list[FormatValue]:
    """A formats run's inspector rows, typed."""
    return [FormatValue.from_row(row) for row in run.rows]


def _stored(record: Any, layout: Sequence[str]) -> dict:
    """The record's stored dict: its keys as stored, or (built by the engine) ``layout`` and then ``extra``."""
    named = {f.name for f in dataclasses.fields(record)}
    keys = record.stored_keys or (*layout, *record.extra)
    return {k: getattr(record, k) if k in named else record.extra[k] for k in keys}


def _from_row(cls: Any, row: Mapping[str, Any], numbers: frozenset[str]) -> Any:
    values, extra = split(cls, row, skip=frozenset({"stored_keys"}))
    return cls(**{k: real(v) if k in numbers else v for k, v in values.items()}, extra=extra, stored_keys=tuple(row))

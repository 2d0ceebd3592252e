"""An ``accumulate`` run's rows and meta: one final sum per accumulator/addend pair (a loop or torch.sum) and the
running sums the error curve draws. The engine builds them and stores ``to_row()``/``to_meta()``; the charts read
the fields. Torch-free."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class SumRow:
    """One pair's final sum against the exact one (``error`` = result − exact)."""

    method: str  # "loop" or "torch.sum"
    accumulator: str  # a dtype, or "torch.sum"
    addend: str
    pair: str  # "fp16 += fp32", "torch.sum(bf16)"
    steps: int
    result: float
    exact: float
    addend_stored: float  # the addend as its dtype holds it
    error: float
    abs_error: float
    rel_error: float
    error_vs_stored_addend: float  # result − steps × the stored addend: the rounding of the additions alone
    stalled_at_step: int | None  # first step the sum stopped moving; None: it never did (or torch.sum)
    result_dtype: str
    extra: Mapping[str, Any] = field(default_factory=dict)  # keys others add (the fan-out's GPU)

    def to_row(self) -> dict:
        """The stored row, with the keys and order runs have always had."""
        return {f: getattr(self, f) for f in _FIELDS} | dict(self.extra)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> SumRow:
        """A stored row; keys it lacks read as empty, keys it does not name stay in ``extra``."""
        return cls(
            **{f: row.get(f, _DEFAULTS.get(f)) for f in _FIELDS},
            extra={k: v for k, v in row.items() if k not in _FIELDS},
        )


_FIELDS = tuple(f.name for f in dataclasses.fields(SumRow) if f.name != "extra")
_DEFAULTS: dict[str, Any] = {"method": "", "accumulator": "", "addend": "", "pair": "", "result_dtype": ""}
_DEFAULTS |= dict.fromkeys(("steps",), 0) | dict.fromkeys(_FIELDS[5:12], float("nan"))


@dataclass(frozen=True)
class CurveSeries:
    """A loop pair's running sum at the curve's checkpoints."""

    accumulator: str
    addend: str
    sums: tuple[float, ...]

    def to_meta(self) -> dict:
        return {"accumulator": self.accumulator, "addend": self.addend, "sum": list(self.sums)}

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any]) -> CurveSeries:
        return cls(str(meta.get("accumulator", "")), str(meta.get("addend", "")), tuple(meta.get("sum") or ()))


CURVE_NOTE = "running sum of each loop pair at meta.curve.steps"


@dataclass(frozen=True)
class AccumulateSummary:
    """The run's meta: the checkpoints, each loop pair's running sums there, and the exact sum as a decimal."""

    steps: tuple[int, ...] = ()
    series: tuple[CurveSeries, ...] = ()
    exact: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)  # the worker's keys (requested_device, ...)

    def to_meta(self) -> dict:
        curve = {"steps": list(self.steps), "series": [s.to_meta() for s in self.series]}
        return {"curve": curve, "exact": self.exact, "curve_note": CURVE_NOTE} | dict(self.extra)

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any]) -> AccumulateSummary:
        curve = meta.get("curve") or {}
        return cls(
            steps=tuple(curve.get("steps") or ()),
            series=tuple(CurveSeries.from_meta(s) for s in curve.get("series") or ()),
            exact=str(meta.get("exact", "")),
            extra={k: v for k, v in meta.items() if k not in ("curve", "exact", "curve_note")},
        )

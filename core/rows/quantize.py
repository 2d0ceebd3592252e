"""A ``quantize`` run's rows and meta: one row per int8/int4 scheme with its round-trip error and the levels it
used, and the histograms the charts draw (the tensor's values, the values per integer level) with, for a small
tensor, every value's code. The engine builds them and stores ``to_row()``/``to_meta()``; the charts and the page
read the fields. Torch-free."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class QuantizeRow:
    """One scheme's round trip: dequantize(quantize(x)) − x over the whole tensor and without its outliers."""

    quantization: str  # "int8 symmetric"
    bits: int = 8
    scheme: str = "symmetric"
    distribution: str = ""
    elements: int = 0
    outliers: int = 0
    scale: float = 0.0
    zero_point: int = 0
    qmin: int = 0
    qmax: int = 0
    rmse: float = 0.0
    max_abs_error: float = 0.0
    rel_rmse: float = 0.0
    sqnr_db: float = 0.0
    rmse_bulk: float | None = None  # None: every value is an outlier
    levels_used: int = 0
    levels_total: int = 0
    at_limits: int = 0
    extra: Mapping[str, Any] = field(default_factory=dict)  # keys others add (the fan-out's GPU)

    def to_row(self) -> dict:
        """The stored row, with the keys and order runs have always had."""
        return {f: getattr(self, f) for f in _ROW} | dict(self.extra)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> QuantizeRow:
        return cls(**{k: row[k] for k in _ROW if k in row}, extra={k: v for k, v in row.items() if k not in _ROW})


_ROW = tuple(f.name for f in dataclasses.fields(QuantizeRow) if f.name != "extra")


@dataclass(frozen=True)
class Histogram:
    """The tensor's values: ``counts[i]`` between ``edges[i]`` and ``edges[i + 1]``."""

    edges: tuple[float, ...] = ()
    counts: tuple[int, ...] = ()

    def to_meta(self) -> dict:
        return {"edges": list(self.edges), "counts": list(self.counts)}


@dataclass(frozen=True)
class LevelCounts:
    """How many values one scheme put on each integer level, and the level's dequantized value."""

    quantization: str
    codes: tuple[int, ...] = ()
    counts: tuple[int, ...] = ()
    values: tuple[float, ...] = ()

    def to_meta(self) -> dict:
        return {"quantization": self.quantization, "codes": list(self.codes), "counts": list(self.counts),
                "values": list(self.values)}  # fmt: skip


@dataclass(frozen=True)
class RoundTripValue:
    """A value of a small tensor, its code and what dequantizing gives back."""

    quantization: str
    x: float
    code: int
    dequantized: float


@dataclass(frozen=True)
class QuantizeSummary:
    values_hist: Histogram = Histogram()
    codes_hist: tuple[LevelCounts, ...] = ()
    round_trip: tuple[RoundTripValue, ...] = ()  # a small tensor's every value; none for a large one

    def to_meta(self) -> dict:
        meta: dict[str, Any] = {
            "values_hist": self.values_hist.to_meta(),
            "codes_hist": [h.to_meta() for h in self.codes_hist],
        }
        if self.round_trip:
            meta["round_trip"] = [dataclasses.asdict(r) for r in self.round_trip]
        return meta

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any]) -> QuantizeSummary:
        hist = meta.get("values_hist") or {}
        return cls(
            Histogram(tuple(hist.get("edges") or ()), tuple(hist.get("counts") or ())),
            tuple(
                LevelCounts(h["quantization"], tuple(h["codes"]), tuple(h["counts"]), tuple(h["values"]))
                for h in meta.get("codes_hist") or ()
            ),
            tuple(RoundTripValue(**r) for r in meta.get("round_trip") or ()),
        )

"""A ``rounding`` run's rows as the engine stores them: one precision mode's matmul against the fp64 reference, or
the reason the mode cannot run here. The engine builds a :class:`RoundingMode` and stores ``to_row()``, the keys and
order runs have always had; the chart reads the fields. Torch-free.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from core.result import RunResult
from core.rows.numbers import real
from core.rows.stored import split


@dataclass(frozen=True)
class RoundingMode:
    mode: str = ""  # fp32 | tf32 | bf16 | fp16
    size: int = 0  # n of the n×n @ n×n matmul
    input_dtype: str = "fp32"
    compute_dtype: str = ""
    status: str = "ok"  # ok | unsupported
    reason: str | None = None  # why the mode cannot run here
    rel_error: float | None = None  # ‖C − C_ref‖_F / ‖C_ref‖_F
    max_rel_error: float | None = None  # max |C − C_ref| / max |C_ref|
    rel_error_vs_rounded_inputs: float | None = None  # against the fp64 product of the rounded inputs
    unit_roundoff: float | None = None  # eps / 2 of the compute dtype
    extra: Mapping[str, Any] = field(default_factory=dict)  # keys no version of the engine wrote

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_row(self) -> dict:
        """The stored row: the mode, then its errors or the reason it cannot run (an error an earlier version did
        not store stays out)."""
        row = {name: getattr(self, name) for name in _MODE}
        if self.ok:
            row |= {name: getattr(self, name) for name in _ERRORS if getattr(self, name) is not None}
        else:
            row["reason"] = self.reason
        return row | dict(self.extra)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> RoundingMode:
        """A stored row as a mode; keys it lacks take their defaults, keys it does not name stay in ``extra``."""
        values, extra = split(cls, row)
        return cls(**{k: real(v) if k in _ERRORS else v for k, v in values.items()}, extra=extra)


_MODE = ("mode", "size", "input_dtype", "compute_dtype", "status")
_ERRORS = ("rel_error", "max_rel_error", "rel_error_vs_rounded_inputs", "unit_roundoff")


def modes_of(run: RunResult) -> list[RoundingMode]:
    """A rounding run's rows, typed."""
    return [RoundingMode.from_row(row) for row in run.rows]

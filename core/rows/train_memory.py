"""A ``train-memory`` run's meta as the engine stores it: the measured peak against the planner's, the phases.

The engine builds a :class:`TrainMemorySummary` once (the error against the estimate derived there) and stores
``to_meta()`` under the keys and order runs have always had; the charts and the page read fields. Keys a run
stored by an earlier version lacks read as ``None`` (or empty) and are not written back. Torch-free.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from core.rows.estimate import EstimatePlan
from core.rows.stored import split

# the meta's keys in the order the engine has always stored them; the optional ones are left out when None
_META = (
    "peak_measured_bytes",
    "peak_estimated_bytes",
    "error_pct",
    "peak_phase",
    "peak_phase_estimated",
    "peak_moment_estimated",
    "peak_t_ms",
    "breakdown_measured_bytes",
    "breakdown_estimated_bytes",
    "trace_peak_bytes",
    "bands",
    "params",
    "allocations",
    "estimate",
    "byte_columns",
    "method",
)


@dataclass(frozen=True)
class PhaseBand:
    """One phase of one recorded step on the timeline (ms from the recording's start)."""

    step: int
    phase: str  # forward | backward | optimizer | zero_grad
    start_ms: float
    end_ms: float

    def to_row(self) -> dict:
        return {"step": self.step, "phase": self.phase, "start_ms": self.start_ms, "end_ms": self.end_ms}

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> PhaseBand:
        return cls(row.get("step", 0), row["phase"], row["start_ms"], row["end_ms"])


@dataclass(frozen=True)
class TrainMemorySummary:
    """The step's measured peak (the allocator's counter on a GPU, the trace's on a CPU) against the estimate."""

    peak_measured_bytes: int = 0
    peak_estimated_bytes: int = 0
    error_pct: float = 0.0  # (estimate − measured) / measured, in percent
    peak_phase: str = ""
    peak_phase_estimated: str | None = None
    peak_moment_estimated: str | None = None
    peak_t_ms: float = 0.0  # where the trace's peak falls on the timeline
    breakdown_measured_bytes: Mapping[str, int] = field(default_factory=dict)
    breakdown_estimated_bytes: Mapping[str, int] = field(default_factory=dict)
    trace_peak_bytes: int | None = None  # the timeline's own peak (equals the measured one on a CPU)
    bands: tuple[PhaseBand, ...] | None = None  # None: a run that stored none
    params: int | None = None
    allocations: int | None = None
    estimate: EstimatePlan | None = None
    byte_columns: tuple[str, ...] | None = None  # the rows' category columns
    method: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)  # keys others add (the worker, the requested device)

    def to_meta(self) -> dict:
        """The stored meta: the keys and order runs have always had."""
        meta: dict[str, Any] = {}
        for name in _META:
            value = getattr(self, name)
            if name == "bands" and self.bands is not None:
                value = [band.to_row() for band in self.bands]
            elif name == "estimate":
                value = None if self.estimate is None else self.estimate.to_meta()
            elif name == "byte_columns" and value is not None:
                value = list(value)
            if value is not None:
                meta[name] = value
        return meta | dict(self.extra)

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any]) -> TrainMemorySummary:
        values, extra = split(cls, meta)
        if values.get("bands") is not None:
            values["bands"] = tuple(PhaseBand.from_row(b) for b in values["bands"])
        if values.get("estimate") is not None:
            values["estimate"] = EstimatePlan.from_meta(values["estimate"])
        if values.get("byte_columns") is not None:
            values["byte_columns"] = tuple(values["byte_columns"])
        return cls(**values, extra=extra)

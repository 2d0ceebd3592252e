"""A ``max-batch`` run's rows and meta as the engine stores them: each real step probed, and the search's answer.

The engine builds a :class:`BatchProbe` per fresh-process step and a :class:`MaxBatchSummary` once, and stores
``to_row()``/``to_meta()`` under the keys and order runs have always had; the chart reads fields. Torch-free.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class BatchProbe:
    """One real training step at ``batch`` in a fresh process: whether it fit, its peak, and the planner's."""

    batch: int
    fits: bool
    peak_measured_bytes: int | None = None  # None where the step did not fit
    peak_estimated_bytes: int | None = None
    failure: str | None = None  # why it did not fit (out of memory, …)
    error: str | None = None  # the step's own error text, where it gave one
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_row(self) -> dict:
        """The stored row: the keys and order runs have always had (None kept, as stored)."""
        return {
            "batch": self.batch,
            "fits": self.fits,
            "peak_measured_bytes": self.peak_measured_bytes,
            "peak_estimated_bytes": self.peak_estimated_bytes,
            "failure": self.failure,
            "error": self.error,
        } | dict(self.extra)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> BatchProbe:
        named = ("batch", "fits", "peak_measured_bytes", "peak_estimated_bytes", "failure", "error")
        return cls(
            row["batch"],
            bool(row["fits"]),
            row.get("peak_measured_bytes"),
            row.get("peak_estimated_bytes"),
            row.get("failure"),
            row.get("error"),
            {k: v for k, v in row.items() if k not in named},
        )


@dataclass(frozen=True)
class MaxBatchSummary:
    """The search's answer: the largest batch that ran, the planner's guess it started from, the device's memory."""

    max_batch_measured: int | None = None  # 0: not even batch 1
    max_batch_estimated: int | None = None
    memory_bytes: int | None = None
    config: Mapping[str, Any] = field(default_factory=dict)  # the run's config, as the search saw it
    extra: Mapping[str, Any] = field(default_factory=dict)  # keys others add (the worker, the requested device)

    def to_meta(self) -> dict:
        return {
            "max_batch_measured": self.max_batch_measured,
            "max_batch_estimated": self.max_batch_estimated,
            "memory_bytes": self.memory_bytes,
            "config": dict(self.config),
        } | dict(self.extra)

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any]) -> MaxBatchSummary:
        named = ("max_batch_measured", "max_batch_estimated", "memory_bytes", "config")
        rest = {k: v for k, v in meta.items() if k not in named}
        return cls(
            meta.get("max_batch_measured"),
            meta.get("max_batch_estimated"),
            meta.get("memory_bytes"),
            meta.get("config") or {},
            rest,
        )

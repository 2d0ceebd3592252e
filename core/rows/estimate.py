"""An ``estimate`` run's rows and meta as the engine stores them: the step's predicted moments, and the plan.

The planner (core.transformer.planner) builds an :class:`EstimatePlan` once — the peak, where it falls, the
allowances, the max batch for the memory given, the fp32 and fused-attention peaks for comparison — and the
engine stores ``to_meta()`` under the keys and order runs have always had. The answer text, the page and the
charts read fields. Keys a run stored by an earlier version lacks read as ``None`` and are not written back.
Torch-free.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from core.rows.stored import split

# the plan's keys in the order the planner has always stored them; the optional ones are left out when None
_PLAN = (
    "model",
    "params",
    "precision",
    "optimizer",
    "batch",
    "context",
    "target",
    "peak_estimated_bytes",
    "peak_phase",
    "peak_moment",
    "breakdown_bytes",
    "activations_bytes",
    "cuda_context_allowance_bytes",
    "device_total_estimated_bytes",
    "label",
    "stack",
    "attention_note",
    "attention_scores_bytes",
    "memory_bytes",
    "max_batch_estimated",
    "fits",
    "batch_1_device_total_estimated_bytes",
    "byte_columns",
    "memory_note",
    "fp32_peak_estimated_bytes",
    "fused_attention_peak_estimated_bytes",
)


@dataclass(frozen=True)
class EstimateMoment:
    """One predicted moment of the step: its live bytes per category (the planner's CATEGORIES, in order)."""

    moment: str
    phase: str
    total_bytes: int
    bytes: Mapping[str, int] = field(default_factory=dict)

    def to_row(self) -> dict:
        return {"moment": self.moment, "phase": self.phase, "total_bytes": self.total_bytes, **self.bytes}

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> EstimateMoment:
        rest = {k: v for k, v in row.items() if k not in ("moment", "phase", "total_bytes")}
        return cls(row["moment"], row["phase"], row["total_bytes"], rest)


@dataclass(frozen=True)
class EstimatePlan:
    """The planner's answer for one step: counts, the predicted peak and its breakdown, whether it fits."""

    model: str = ""
    params: int = 0
    precision: str = ""
    optimizer: str = ""
    batch: int = 0
    context: int = 0
    target: str | None = None
    peak_estimated_bytes: int = 0
    peak_phase: str | None = None
    peak_moment: str = ""
    breakdown_bytes: Mapping[str, int] = field(default_factory=dict)  # at the peak, per category
    activations_bytes: Mapping[str, int] = field(default_factory=dict)  # saved for backward, per layer and once
    cuda_context_allowance_bytes: int | None = None
    device_total_estimated_bytes: int = 0  # the peak with the fragmentation and CUDA context allowances
    label: str | None = None
    stack: str | None = None  # None: a plan stored before stacks (the course's)
    attention_note: str | None = None
    attention_scores_bytes: int | None = None  # the b·h·s² scores a written-out attention saves
    memory_bytes: int | None = None  # the memory planned for; None: none given
    max_batch_estimated: int | None = None
    fits: bool | None = None
    batch_1_device_total_estimated_bytes: int | None = None  # only where not even batch 1 fits
    byte_columns: tuple[str, ...] | None = None  # the rows' category columns
    memory_note: str | None = None
    fp32_peak_estimated_bytes: int | None = None
    fused_attention_peak_estimated_bytes: int | None = None  # only where the written-out attention saves scores
    fused_attention_max_batch_estimated: int | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)  # keys others add (the job's requested device)

    def to_meta(self) -> dict:
        """The stored meta: the keys and order runs have always had."""
        meta: dict[str, Any] = {}
        for name in _PLAN:
            value = getattr(self, name)
            if value is not None:
                meta[name] = list(value) if name == "byte_columns" else value
        if self.fused_attention_peak_estimated_bytes is not None:  # stored with it, even as None (no memory)
            meta["fused_attention_max_batch_estimated"] = self.fused_attention_max_batch_estimated
        return meta | dict(self.extra)

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any]) -> EstimatePlan:
        values, extra = split(cls, meta)
        if values.get("byte_columns") is not None:
            values["byte_columns"] = tuple(values["byte_columns"])
        return cls(**values, extra=extra)

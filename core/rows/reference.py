"""A reference run's rows: one round of the lab's timer against the independent tool on one matmul. Torch-free."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ReferenceRound:
    round: int
    dtype: str
    m: int
    n: int
    k: int
    tool: str  # the reference's name (core.experiments.reference: DO_BENCH, CUDA_EVENTS, TORCH_BENCHMARK)
    lab_median_ms: float
    lab_reps: int
    reference_median_ms: float

    def to_row(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> ReferenceRound:
        return cls(**{f.name: row[f.name] for f in dataclasses.fields(cls)})

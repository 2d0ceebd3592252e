"""A probe run's rows: the steps that finished (with the wall clock at each, where a progress event brought it).
Torch-free."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ProbeStep:
    step: int | None  # None: a row no probe wrote
    t: float | None = None  # time.time() when the step finished; the final rows carry none

    def to_row(self) -> dict:
        return ({} if self.step is None else {"step": self.step}) | ({} if self.t is None else {"t": self.t})

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> ProbeStep:
        return cls(row.get("step"), row.get("t"))

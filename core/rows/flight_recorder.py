"""A flight-recorder import's row: one rank of the hung job, in the group the diagnosis is about.

The analysis (:mod:`core.workload.hang.analysis`) builds a :class:`HangRank` and stores ``to_row()``, the keys runs
have always had; the findings, the text and the page read its fields. Torch-free.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from core.result import RunResult

_KEYS = (
    "kind rank file state last_completed_seq last_entered_seq first_seq_in_buffer wrapped last_op last_frames "
    "last_created_ns entries"
).split()


@dataclass(frozen=True)
class HangRank:
    rank: int
    file: str = ""
    state: str = "idle"  # missing | mismatched | waiting | entered | completed | idle | not in the group
    last_completed_seq: int | None = None  # None: the rank recorded no collective of the group
    last_entered_seq: int | None = None
    first_seq_in_buffer: int | None = None  # the oldest collective its ring buffer still holds
    wrapped: bool = False  # the buffer dropped older collectives of the group
    last_op: str | None = None
    last_frames: tuple[str, ...] = ()  # the last collective's stack, innermost first
    last_created_ns: int | None = None
    entries: int = 0  # entries in the rank's dump, every group
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> HangRank:
        known = {k: row[k] for k in _KEYS[1:] if k in row}
        known["last_frames"] = tuple(known.get("last_frames") or ())
        return cls(**known, extra={k: v for k, v in row.items() if k not in _KEYS})

    def to_row(self) -> dict:
        """The stored row, with the keys and order runs have always had."""
        out = {"kind": "rank", **{k: getattr(self, k) for k in _KEYS[1:]}}
        return out | {"last_frames": list(self.last_frames)} | dict(self.extra)

    @classmethod
    def of(cls, rows: Sequence[Mapping[str, Any]]) -> list[HangRank]:
        return [cls.from_row(r) for r in rows]

    @classmethod
    def from_run(cls, run: RunResult) -> list[HangRank]:
        return cls.of(run.rows)

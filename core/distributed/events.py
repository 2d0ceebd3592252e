"""The records of a one-box distributed job's event file: :mod:`core.distributed.rank` writes them, one JSON line
each, and :mod:`core.distributed.launch` reads them with :func:`core.protocol.decode` (keyed by ``type``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from core.protocol import Message


@dataclass(frozen=True)
class RankStart(Message):
    """Rank 0 joined and planned ``total`` points; ``meta`` describes every rank."""

    TAG: ClassVar[str] = "start"
    total: int
    meta: dict


@dataclass(frozen=True)
class RankStep(Message):
    """Rank 0 begins point ``index`` (what a hung job was doing)."""

    TAG: ClassVar[str] = "step"
    index: int
    total: int
    label: str


@dataclass(frozen=True)
class RankRows(Message):
    """Rank 0 finished point ``index``: its rows."""

    TAG: ClassVar[str] = "rows"
    index: int
    total: int
    rows: list[dict]


@dataclass(frozen=True)
class RankDone(Message):
    """Rank 0 finished every point; ``meta`` is the run's."""

    TAG: ClassVar[str] = "done"
    meta: dict


@dataclass(frozen=True)
class RankAlive(Message):
    """Rank 0's heartbeat: the launcher's watchdog tells a long point from a frozen job."""

    TAG: ClassVar[str] = "alive"


@dataclass(frozen=True)
class RankError(Message):
    """What stopped a rank (any rank writes one): its words, the step, the ranks that stopped answering."""

    TAG: ClassVar[str] = "error"
    rank: int
    message: str
    stalled: list[int] = field(default_factory=list)
    step: str | None = None
    unsupported: bool = False
    exception: str | None = None
    timeout_s: float | None = None


RANK_EVENTS: tuple[type[Message], ...] = (RankStart, RankStep, RankRows, RankDone, RankAlive, RankError)

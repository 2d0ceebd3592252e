"""A ``profiler-trace-ranks`` run's rows as named tables (:class:`RankTables`): each rank, each rank's steps, kernel
groups, host gaps and operators, the arrivals at the collectives matched across the ranks and each collective's
wait. The rows' machinery is :mod:`core.rows.trace`'s. Torch-free."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from core.rows.trace import WINDOW_CAUSE_KEYS, StoredRow, Tables


@dataclass(frozen=True, kw_only=True)
class Rank(StoredRow):
    """One rank: its file, GPU and times on its busiest GPU (µs)."""

    KIND = "rank"
    rank: int = 0
    file: str = ""
    world_size: int | None = None
    backend: str | None = None
    device_name: str | None = None
    kernel_time_us: float = 0.0
    busy_us: float = 0.0
    span_us: float = 0.0
    idle_us: float = 0.0
    compute_us: float = 0.0
    communication_us: float = 0.0
    exposed_communication_us: float = 0.0
    host_wait_us: float | None = None


@dataclass(frozen=True, kw_only=True)
class RankStep(StoredRow):
    """A step on a rank."""

    KIND = "step"
    SPREAD = {"window_causes": WINDOW_CAUSE_KEYS}
    rank: int = 0
    step: int = 0
    wall_us: float = 0.0
    window_causes: Mapping[str, float] = field(default_factory=dict)  # the GPU window's idle by the host's cause


@dataclass(frozen=True, kw_only=True)
class RankGroup(StoredRow):
    """A kernel group's time on a rank."""

    KIND = "group"
    rank: int = 0
    group: str = ""
    count: int = 0
    total_us: float = 0.0


@dataclass(frozen=True, kw_only=True)
class RankHostGap(StoredRow):
    """What a rank's host did while its GPU idled, by cause, with the operator holding most of it."""

    KIND = "host_gap"
    rank: int = 0
    cause: str = ""
    time_us: float = 0.0
    share: float = 0.0
    top_op: str | None = None


@dataclass(frozen=True, kw_only=True)
class RankOp(StoredRow):
    """An operator's GPU time on a rank."""

    KIND = "op"
    rank: int = 0
    op: str = ""
    gpu_time_us: float = 0.0
    kernels: int = 0
    calls: int = 0


@dataclass(frozen=True, kw_only=True)
class Arrival(StoredRow):
    """A rank's wait for the last rank at the collectives matched across the ranks."""

    KIND = "arrival"
    rank: int = 0
    collectives: int = 0
    waited_us: float = 0.0
    last_arrivals: int = 0


@dataclass(frozen=True, kw_only=True)
class CollectiveWait(StoredRow):
    """A collective matched across the ranks: its kernels' time and how much waited for the last rank."""

    KIND = "collective_wait"
    collective: str = ""
    calls: int = 0
    kernel_time_us: float = 0.0
    waited_us: float = 0.0
    waited_share: float | None = None


@dataclass(frozen=True)
class RankTables(Tables):
    """A ``profiler-trace-ranks`` run's rows."""

    TABLES = {
        "ranks": Rank,
        "steps": RankStep,
        "groups": RankGroup,
        "host_gaps": RankHostGap,
        "ops": RankOp,
        "arrivals": Arrival,
        "collective_waits": CollectiveWait,
    }

    ranks: tuple[Rank, ...] = ()
    steps: tuple[RankStep, ...] = ()
    groups: tuple[RankGroup, ...] = ()
    host_gaps: tuple[RankHostGap, ...] = ()
    ops: tuple[RankOp, ...] = ()
    arrivals: tuple[Arrival, ...] = ()
    collective_waits: tuple[CollectiveWait, ...] = ()

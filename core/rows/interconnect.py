"""An interconnect run's rows as the engine stores them: four kinds in one stored list, told apart by ``kind`` —
host↔GPU copies, the cells of the GPU×GPU peer matrix, a collective at one size (the job's figures) and one rank's
figures for that collective — and the run's meta as its views read it.

The engine builds each row here and stores ``to_row()``, the keys and order runs have always had (a part the device
cannot run is one row with its kind, status and reason only); :class:`InterconnectTables` splits a stored run's rows
once, one tuple per kind, and the views read those fields and never the kind. Torch-free.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from core.result import RunResult

KIND = "kind"
# a copy's figures (core.measure.copies), in their stored order
COPY_FIGURES = ("median_ms", "p20_ms", "p80_ms", "min_ms", "max_ms", "reps", "gbs", "gbs_p20", "gbs_p80", "samples_ms")
# what a collective's rows and its ranks' share: the point, in its stored order
POINT = ("collective", "backend", "bytes", "size", "world_size", "dtype", "elements")
TIMES = ("median_ms", "mean_ms", "std_ms", "min_ms", "max_ms", "p20_ms", "p80_ms", "reps")  # stats.time_fields
BANDWIDTH = (
    "algbw_gbs busbw_gbs busbw_factor algbw_gbs_p20 algbw_gbs_p80 busbw_gbs_p20 busbw_gbs_p80 check slowest_rank "
    "call_max_median_ms nodes samples_ms"
).split()
RANK_FIGURES = ("median_ms", "p20_ms", "p80_ms", "min_ms", "max_ms", "check", "samples_ms")
NOT_MEASURED = ("status", "reason")  # a part the device cannot run stores its kind and these only

Row = TypeVar("Row", bound="Stored")


@dataclass(frozen=True)
class Stored:
    """A row of any table: its kind, the stored keys of its two forms (measured, and what a part that did not run
    stores), and the keys it does not name (``extra``: the fan-out's GPU, keys of later versions)."""

    kind: ClassVar[str] = ""
    keys: ClassVar[tuple[str, ...]] = ()  # the measured row's keys after ``kind``, in their stored order
    short: ClassVar[tuple[str, ...]] = NOT_MEASURED
    status: str = "ok"  # ok | error (a copy or a collective whose values came back wrong) | unsupported
    reason: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def measured(self) -> bool:
        """A row with the part's figures, not only why it did not run."""
        return True

    def to_row(self) -> dict:
        names = self.keys if self.measured else self.short
        return {KIND: self.kind, **{k: _stored(getattr(self, _FIELD.get(k, k))) for k in names}, **self.extra}

    @classmethod
    def from_row(cls: type[Row], row: Mapping[str, Any]) -> Row:
        """A stored row; keys it lacks take their defaults, keys it does not name stay in ``extra``."""
        named = {f.name for f in dataclasses.fields(cls)} - {"extra"}  # pyright: ignore[reportArgumentType]
        values = {_FIELD.get(k, k): _read(v) for k, v in row.items() if _FIELD.get(k, k) in named}
        extra = {k: v for k, v in row.items() if _FIELD.get(k, k) not in named and k != KIND}
        return cls(**values, extra=extra)


_FIELD = {"bytes": "nbytes"}  # a stored key whose field takes another name (``bytes`` is a type)


def _read(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _stored(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


@dataclass(frozen=True)
class CopyFigures(Stored):
    """A timed copy (:mod:`core.measure.copies`): its time per call and its bandwidth, bytes copied once."""

    nbytes: int = 0
    median_ms: float | None = None
    p20_ms: float | None = None
    p80_ms: float | None = None
    min_ms: float | None = None
    max_ms: float | None = None
    reps: int | None = None
    gbs: float | None = None
    gbs_p20: float | None = None
    gbs_p80: float | None = None
    samples_ms: tuple[float, ...] = ()


@dataclass(frozen=True)
class HostCopy(CopyFigures):
    """Host→device (``h2d``) or device→host (``d2h``) copies from pinned or pageable host memory on one GPU."""

    kind: ClassVar[str] = "host_copy"
    keys: ClassVar[tuple[str, ...]] = ("gpu", "direction", "memory", "bytes", *NOT_MEASURED, *COPY_FIGURES)
    gpu: int | None = None  # None: the part did not run
    direction: str = ""
    memory: str = ""  # pinned | pageable

    what: ClassVar[str] = "host↔GPU copies"

    @property
    def measured(self) -> bool:
        return self.gpu is not None


@dataclass(frozen=True)
class PeerCopy(CopyFigures):
    """One cell of the peer matrix: a copy from cuda:src to cuda:dst (the diagonal: within one GPU)."""

    kind: ClassVar[str] = "peer"
    keys: ClassVar[tuple[str, ...]] = ("src", "dst", "peer_access", "path", "bytes", *NOT_MEASURED, *COPY_FIGURES)
    src: int | None = None  # None: the part did not run
    dst: int | None = None
    peer_access: bool | None = None  # None: within one GPU
    path: str = ""

    what: ClassVar[str] = "peer matrix"

    @property
    def measured(self) -> bool:
        return self.src is not None


@dataclass(frozen=True)
class Point(Stored):
    """What a collective's row and its ranks' rows share: the collective at one message size."""

    collective: str = ""
    backend: str = ""
    nbytes: int = 0  # nccl-tests' size: the largest buffer of a rank
    size: str = ""
    world_size: int = 0
    dtype: str = "float32"
    elements: int = 0


@dataclass(frozen=True)
class CollectivePoint(Point):
    """A collective at one size: the slowest rank's time per call and nccl-tests' algbw and busbw, or why it did
    not run (``median_ms`` None)."""

    kind: ClassVar[str] = "collective"
    keys: ClassVar[tuple[str, ...]] = (*NOT_MEASURED, *TIMES, *BANDWIDTH)
    median_ms: float | None = None
    mean_ms: float | None = None
    std_ms: float | None = None
    min_ms: float | None = None
    max_ms: float | None = None
    p20_ms: float | None = None
    p80_ms: float | None = None
    reps: int | None = None
    algbw_gbs: float | None = None
    busbw_gbs: float | None = None
    busbw_factor: float | None = None
    algbw_gbs_p20: float | None = None
    algbw_gbs_p80: float | None = None
    busbw_gbs_p20: float | None = None
    busbw_gbs_p80: float | None = None
    check: str | None = None  # ok | mismatch
    slowest_rank: int | None = None
    call_max_median_ms: float | None = None  # the median over calls of each call's slowest rank
    nodes: int | None = None
    samples_ms: tuple[float, ...] = ()  # the slowest rank's

    @property
    def measured(self) -> bool:
        return self.median_ms is not None

    @property
    def what(self) -> str:
        """The point in words: "all_reduce 1 MiB"."""
        return f"{self.collective} {self.size}" if self.size else self.collective

    def to_row(self) -> dict:
        """A measured point stores the point first, then its kind; one that did not run its kind first, then the
        point, its status and the figures it lacks, as runs have always had them."""
        point = {k: _stored(getattr(self, _FIELD.get(k, k))) for k in POINT}
        if self.measured:
            return point | super().to_row()
        skipped = {**NOT_MEASURED_FIGURES, "busbw_factor": self.busbw_factor}
        return {KIND: self.kind, **point, "status": self.status, "reason": self.reason, **skipped, **self.extra}

    def text(self, full: bool = False) -> str:
        """The point in one line, "all_reduce 1 MiB: 0.123 ms, busbw 4.56 GB/s"; ``full`` adds the algbw, and to a
        point not measured, why."""
        head = f"{self.collective} {self.size}"
        if self.median_ms is None:
            return f"{head}: {self.status}" + (f": {self.reason}" if full else "")
        algbw = f", algbw {self.algbw_gbs:.2f} GB/s" if full else ""
        return f"{head}: {self.median_ms:.3f} ms{algbw}, busbw {self.busbw_gbs:.2f} GB/s"


NOT_MEASURED_FIGURES = {"median_ms": None, "algbw_gbs": None, "busbw_gbs": None}


@dataclass(frozen=True)
class RankPoint(Point):
    """One rank's figures for a collective at one size: where it ran and its own time per call."""

    kind: ClassVar[str] = "rank"
    keys: ClassVar[tuple[str, ...]] = ("rank", "host", "group_rank", "local_rank", "device", *RANK_FIGURES)
    rank: int = 0
    host: str | None = None
    group_rank: int | None = None  # the node
    local_rank: int | None = None
    device: str | None = None
    median_ms: float | None = None
    p20_ms: float | None = None
    p80_ms: float | None = None
    min_ms: float | None = None
    max_ms: float | None = None
    check: str | None = None
    samples_ms: tuple[float, ...] = ()

    def to_row(self) -> dict:
        return {k: _stored(getattr(self, _FIELD.get(k, k))) for k in POINT} | super().to_row()


Table = HostCopy | PeerCopy | CollectivePoint | RankPoint
_TABLES: dict[str, tuple[str, type[Table]]] = {
    "host_copy": ("host_copies", HostCopy),
    "peer": ("peers", PeerCopy),
    "collective": ("collectives", CollectivePoint),
    "rank": ("ranks", RankPoint),
}


@dataclass(frozen=True)
class InterconnectTables:
    """A run's rows, one tuple per kind, in their stored order: the one place that reads ``kind``."""

    host_copies: tuple[HostCopy, ...] = ()
    peers: tuple[PeerCopy, ...] = ()
    collectives: tuple[CollectivePoint, ...] = ()
    ranks: tuple[RankPoint, ...] = ()

    @classmethod
    def from_rows(cls, rows: Sequence[Mapping[str, Any]]) -> InterconnectTables:
        tables: dict[str, list] = {name: [] for name, _ in _TABLES.values()}
        for row in rows:
            found = _TABLES.get(str(row.get(KIND)))
            if found:
                tables[found[0]].append(found[1].from_row(row))
        return cls(**{name: tuple(rows) for name, rows in tables.items()})

    @classmethod
    def from_run(cls, run: RunResult) -> InterconnectTables:
        return cls.from_rows(run.rows)

    def best_busbw(self) -> list[CollectivePoint]:
        """Each collective's measured point of the highest busbw (the first of equals), in the order the
        collectives first appear."""
        best: dict[str, CollectivePoint] = {}
        for p in self.collectives:
            if p.ok and p.busbw_gbs is not None:
                top = best.get(p.collective)
                if top is None or p.busbw_gbs > (top.busbw_gbs or 0.0):
                    best[p.collective] = p
        return list(best.values())

    def not_measured(self) -> list[HostCopy | PeerCopy | CollectivePoint]:
        """The rows of what did not run or came back wrong, each reason once per kind: the copies', the peer
        matrix's, then the collectives' (the order the engine measures them in)."""
        seen: set[tuple[str, str | None]] = set()
        out: list[HostCopy | PeerCopy | CollectivePoint] = []
        for row in (*self.host_copies, *self.peers, *self.collectives):
            if row.status in ("unsupported", "error") and (row.kind, row.reason) not in seen:
                seen.add((row.kind, row.reason))
                out.append(row)
        return out


def unsupported_row(cls: type[HostCopy] | type[PeerCopy], reason: str) -> dict:
    """The stored row of a part the device cannot run."""
    return cls(status="unsupported", reason=reason).to_row()


@dataclass(frozen=True)
class InterconnectMeta:
    """What the views read of the run's meta: the ranks' backend, count and boxes, and how they timed."""

    backend: str | None = None
    world_size: int | None = None
    nodes: int | None = None
    hosts: tuple[str, ...] = ()
    ranks: tuple[Mapping[str, Any], ...] = ()  # each rank's host, node and device (the launcher's)
    timer: str | None = None
    omp_num_threads: str | None = None
    nccl_version: str | None = None

    @property
    def first_device(self) -> str:
        """Rank 0's torch device: a job started by hand is described by it."""
        return str(self.ranks[0].get("device") or "cpu") if self.ranks else "cpu"

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any]) -> InterconnectMeta:
        named = {f.name for f in dataclasses.fields(cls)}
        values: dict[str, Any] = {k: _read(v) for k, v in meta.items() if k in named}
        return cls(**values)

"""A flight-recorder import's rows and summary: each rank of the hung job, in the group the diagnosis is about, and
what the matching found — the collective that stopped the job, every group's first disagreement, the grid.

The analysis (:mod:`core.workload.hang.analysis`) builds a :class:`HangRank` per rank and a :class:`HangSummary`,
and stores their ``to_row()`` / ``to_meta()``: the keys, in the order, runs have always had. The findings, the text,
the chart and the page read their fields. Torch-free.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from core.result import RunResult
from core.rows.stored import known

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


def _ints(values: Any) -> tuple[int, ...]:
    return tuple(values or ())


def _shapes(sizes: Any) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(s) for s in sizes or ())


def _plain(value: Any) -> Any:
    """A field as stored: tuples as lists (nested too), typed parts as their dicts."""
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value.to_dict() if hasattr(value, "to_dict") else value


@dataclass(frozen=True)
class Mismatch:
    """A rank that entered another collective at the stuck number than the reference: a desync."""

    rank: int
    differs_in: str = "op"  # op | sizes | dtypes
    op: str = ""
    sizes: tuple[tuple[int, ...], ...] = ()
    dtypes: tuple[str, ...] = ()
    frames: tuple[str, ...] = ()

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Mismatch:
        return cls(d["rank"], d.get("differs_in", "op"), d.get("op", ""), _shapes(d.get("sizes")),
                   tuple(d.get("dtypes") or ()), tuple(d.get("frames") or ()))  # fmt: skip

    def to_dict(self) -> dict:
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self)}


@dataclass(frozen=True)
class LastArrival:
    """The rank that entered a collective last, later after the one before it than the others spread: they waited."""

    rank: int
    after_ns: int = 0  # after the one before it
    others: tuple[int, ...] = ()
    others_from_ns: int = 0
    others_until_ns: int = 0

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> LastArrival | None:
        if d is None:
            return None
        return cls(**known(cls, d, others=_ints(d.get("others"))))

    def to_dict(self) -> dict:
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self)}


@dataclass(frozen=True)
class LateArrival(LastArrival):
    """Without a hang: the collective some ranks were still waiting in at their dumps, and the rank that came late."""

    group: str = ""
    group_desc: str = ""
    seq_id: int = 0
    op: str = ""
    ranks_waiting: tuple[int, ...] = ()
    ranks_completed: tuple[int, ...] = ()

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> LateArrival | None:
        if d is None:
            return None
        return cls(**known(cls, d, **{k: _ints(d.get(k)) for k in ("others", "ranks_waiting", "ranks_completed")}))


@dataclass(frozen=True)
class Behind:
    """A collective of another group whose ranks wait behind the stuck one."""

    group: str
    group_desc: str = ""
    op: str = ""
    seq_id: int = 0
    ranks_waiting: tuple[int, ...] = ()

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Behind:
        return cls(
            d["group"], d.get("group_desc", ""), d.get("op", ""), d.get("seq_id", 0), _ints(d.get("ranks_waiting"))
        )

    def to_dict(self) -> dict:
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self)}


# A disagreement as stored: these keys in this order, then a p2p one's pair of ranks before the times, a
# collective's vote after the frames, and the stuck one's collectives waiting behind it last.
_DISAGREEMENT = (
    "kind group group_desc seq_id op backend sizes dtypes bytes ranks_missing ranks_waiting ranks_mismatched "
    "ranks_entered ranks_completed ranks_unknown ranks_without_dump"
).split()
_TIMES = ("waiting_since_ns", "waiting_until_ns", "first_created_ns", "frames")
_VOTE = ("no_majority", "reference_rank", "last_arrival")
_RANK_LISTS = (
    "ranks_missing",
    "ranks_waiting",
    "ranks_entered",
    "ranks_completed",
    "ranks_unknown",
    "ranks_without_dump",
)


@dataclass(frozen=True)
class Disagreement:
    """The first collective number (or send/recv) of a group at which its ranks disagree: who is missing, who
    entered another one (mismatched), who waits in it — with what it moves and where the code called it."""

    kind: str  # collective | p2p
    group: str
    group_desc: str = ""
    seq_id: int = 0
    op: str = ""
    backend: str | None = None
    sizes: tuple[tuple[int, ...], ...] = ()
    dtypes: tuple[str, ...] = ()
    bytes: int | None = None  # the first input's bytes; None: the dump names no dtype
    ranks_missing: tuple[int, ...] = ()
    ranks_waiting: tuple[int, ...] = ()
    ranks_mismatched: tuple[Mismatch, ...] = ()
    ranks_entered: tuple[int, ...] = ()
    ranks_completed: tuple[int, ...] = ()
    ranks_unknown: tuple[int, ...] = ()
    ranks_without_dump: tuple[int, ...] = ()
    peer: tuple[int, int] | None = None  # p2p: (sending rank, receiving rank)
    waiting_since_ns: int | None = None
    waiting_until_ns: int | None = None
    first_created_ns: int | None = None
    frames: tuple[str, ...] = ()
    no_majority: bool = False  # a desync with a tie: the reference is the lowest rank's
    reference_rank: int | None = None
    last_arrival: LastArrival | None = None
    behind: tuple[Behind, ...] | None = None  # the stuck one only: what waits behind it

    @property
    def is_collective(self) -> bool:
        return self.kind == "collective"

    @property
    def culprits(self) -> tuple[int, ...]:
        """The ranks that stopped it: missing, then mismatched."""
        return self.ranks_missing + tuple(m.rank for m in self.ranks_mismatched)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Disagreement:
        values = known(cls, d, **{k: _ints(d.get(k)) for k in _RANK_LISTS})
        peer, behind = d.get("peer"), d.get("behind")
        values.update(
            sizes=_shapes(d.get("sizes")),
            dtypes=tuple(d.get("dtypes") or ()),
            frames=tuple(d.get("frames") or ()),
            ranks_mismatched=tuple(Mismatch.from_dict(m) for m in d.get("ranks_mismatched") or ()),
            peer=None if peer is None else (peer[0], peer[1]),
            no_majority=bool(d.get("no_majority")),
            last_arrival=LastArrival.from_dict(d.get("last_arrival")),
            behind=None if behind is None else tuple(Behind.from_dict(b) for b in behind),
        )
        return cls(**values)

    def to_dict(self) -> dict:
        """As stored: a collective's vote and a p2p's pair only where they belong, ``behind`` only on the stuck one."""
        keys = [*_DISAGREEMENT, *(() if self.is_collective else ("peer",)), *_TIMES]
        keys += [*(_VOTE if self.is_collective else ()), *(() if self.behind is None else ("behind",))]
        return {k: _plain(getattr(self, k)) for k in keys}


@dataclass(frozen=True)
class HangGroup:
    group: str
    desc: str = ""
    ranks: tuple[int, ...] = ()
    collectives: int = 0  # the highest collective number any of its ranks entered

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> HangGroup:
        return cls(d["group"], d.get("desc", ""), _ints(d.get("ranks")), d.get("collectives", 0))

    def to_dict(self) -> dict:
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self)}


@dataclass(frozen=True)
class HangGrid:
    """The main group's collective numbers by rank: ``cells[i][j]`` is rank ``ranks[i]``'s state at ``seqs[j]``."""

    ranks: tuple[int, ...] = ()
    seqs: tuple[int, ...] = ()
    ops: tuple[str, ...] = ()
    cells: tuple[tuple[str, ...], ...] = ()

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> HangGrid:
        d = d or {}
        return cls(_ints(d.get("ranks")), _ints(d.get("seqs")), tuple(d.get("ops") or ()),
                   tuple(tuple(c) for c in d.get("cells") or ()))  # fmt: skip

    def to_dict(self) -> dict:
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self)}


_SUMMARY = (
    "stuck disagreements group groups ranks world_size ranks_without_dump version backend wrapped_ranks grid late "
    "quirks"
).split()


@dataclass(frozen=True)
class HangExample:
    """The shipped example a run was opened from."""

    name: str
    title: str = ""
    label: str = ""


@dataclass(frozen=True)
class HangSummary:
    """What the matching found over the whole job; ``to_meta()`` is the analysis's part of the stored meta (the
    import adds the files read, their digests and the findings after it)."""

    stuck: Disagreement | None
    disagreements: tuple[Disagreement, ...] = ()  # every group's first, the stuck one first
    group: str = ""  # the group the rows and the grid are about
    groups: tuple[HangGroup, ...] = ()
    ranks: tuple[int, ...] = ()  # the ranks with a dump
    world_size: int | None = None
    ranks_without_dump: tuple[int, ...] = ()
    version: str = ""
    backend: str = ""
    wrapped_ranks: tuple[int, ...] = ()
    grid: HangGrid = HangGrid()
    late: LateArrival | None = None
    quirks: Mapping[str, int] = field(default_factory=dict)
    file: str = ""  # the files read, named (set by the import)
    example: HangExample | None = None

    @property
    def group_desc(self) -> str:
        return next((g.desc for g in self.groups if g.group == self.group and g.desc), "")

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any]) -> HangSummary:
        stuck, example = meta.get("stuck"), meta.get("example")
        return cls(
            stuck=None if stuck is None else Disagreement.from_dict(stuck),
            disagreements=tuple(Disagreement.from_dict(d) for d in meta.get("disagreements") or ()),
            group=meta.get("group", ""),
            groups=tuple(HangGroup.from_dict(g) for g in meta.get("groups") or ()),
            ranks=_ints(meta.get("ranks")),
            world_size=meta.get("world_size"),
            ranks_without_dump=_ints(meta.get("ranks_without_dump")),
            version=meta.get("version", ""),
            backend=meta.get("backend", ""),
            wrapped_ranks=_ints(meta.get("wrapped_ranks")),
            grid=HangGrid.from_dict(meta.get("grid")),
            late=LateArrival.from_dict(meta.get("late")),
            quirks=dict(meta.get("quirks") or {}),
            file=meta.get("file", ""),
            example=None if example is None else HangExample(example["name"], example["title"], example["label"]),
        )

    @classmethod
    def from_run(cls, run: RunResult) -> HangSummary:
        return cls.from_meta(run.meta)

    def to_meta(self) -> dict:
        return {k: dict(self.quirks) if k == "quirks" else _plain(getattr(self, k)) for k in _SUMMARY}

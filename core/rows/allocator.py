"""An allocator run's rows as the engine stores them: one row per step of the scenario (what the allocator, the driver
and the process said after it), and what the views read of the run's meta (the setting the allocator reported, the
backward peaks).

The engine builds an :class:`AllocatorStep` after every step and stores ``to_row()``, the keys and order runs have
always had; the views read the fields. Torch-free.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from core.rows.stored import split

# what a CUDA device adds after every step, in the stored order (None on a CPU: not measured, never zero)
CUDA_FIELDS = (
    "allocated_bytes reserved_bytes peak_allocated_bytes driver_used_bytes driver_total_bytes segments alloc_count "
    "free_count inactive_split_bytes alloc_retries ooms device_alloc_count device_free_count largest_free_block_bytes "
    "free_in_reserved_bytes fragmentation_ratio segment_map trace"
).split()
_STEP = ("index step op status note alloc_conf_seen rss_bytes max_rss_bytes live_device_bytes live_host_bytes").split()


@dataclass(frozen=True)
class Block:
    """A block of a cached segment: its offset in the segment, its size and its state (``active_allocated``,
    ``active_pending_free``, ``inactive``)."""

    offset: int
    size: int
    state: str


@dataclass(frozen=True)
class Segment:
    """A cached segment of the segment map (:func:`core.memory.segments.segment_view`) and its blocks."""

    total_size: int
    blocks: tuple[Block, ...] = ()
    expandable: bool = False
    stored: Mapping[str, Any] = field(default_factory=dict)  # the segment as stored, key for key
    blocks_dropped: int = 0  # small blocks not kept, so that a map of thousands of blocks stays drawable

    @classmethod
    def from_dict(cls, seg: Mapping[str, Any]) -> Segment:
        blocks = tuple(Block(b["offset"], b["size"], b["state"]) for b in seg.get("blocks") or ())
        dropped = int(seg.get("blocks_dropped") or 0)
        return cls(seg["total_size"], blocks, bool(seg.get("expandable")), dict(seg), blocks_dropped=dropped)


@dataclass(frozen=True)
class SegmentNumbers:
    """What a segment map says over every segment, drawn or not (:func:`core.memory.segments.segment_view`): the
    largest request that fits without a new cudaMalloc, the free bytes held, and 1 − the one over the other."""

    largest_free_block_bytes: int = 0
    free_in_reserved_bytes: int = 0
    fragmentation_ratio: float = 0.0


@dataclass(frozen=True)
class HistoryEvent:
    """An entry of the allocator's own history recorded during a step: when, what (``alloc``, ``free_completed``,
    ``segment_alloc``…) and how many bytes."""

    time_us: float
    action: str
    size: int


@dataclass(frozen=True)
class AllocatorStep:
    """What the allocator, the driver and the process said after one step (index 0: the baseline)."""

    index: int = 0
    step: str = ""  # "3. b = b.to('cpu')": the step's number and title
    op: str = ""  # the step as the step language writes it
    status: str = "ok"  # ok | oom (the scenario stopped there)
    note: str = ""
    alloc_conf_seen: str | None = None  # the setting the worker saw
    rss_bytes: int | None = None
    max_rss_bytes: int | None = None  # the process's RSS high-water mark
    live_device_bytes: int | None = None  # the bytes of the scenario's named tensors
    live_host_bytes: int | None = None
    allocated_bytes: int | None = None
    reserved_bytes: int | None = None
    peak_allocated_bytes: int | None = None
    driver_used_bytes: int | None = None  # what nvidia-smi shows, every process
    driver_total_bytes: int | None = None
    segments: int | None = None
    alloc_count: int | None = None
    free_count: int | None = None
    inactive_split_bytes: int | None = None
    alloc_retries: int | None = None
    ooms: int | None = None
    device_alloc_count: int | None = None
    device_free_count: int | None = None
    largest_free_block_bytes: int | None = None
    free_in_reserved_bytes: int | None = None
    fragmentation_ratio: float | None = None
    segment_map: tuple[Segment, ...] | None = None  # None: not recorded
    trace: tuple[HistoryEvent, ...] | None = None  # None: not recorded
    seed_claim: str | None = None  # the lifecycle's expectation for the step (the row stores it only there)
    extra: Mapping[str, Any] = field(default_factory=dict)  # keys others add (a later version's)

    @property
    def on_cuda(self) -> bool:
        """A step on a CUDA device: the allocator's counters were read."""
        return self.allocated_bytes is not None

    def to_row(self) -> dict:
        row = {name: getattr(self, name) for name in (*_STEP, *CUDA_FIELDS[:-2])}
        row["segment_map"] = None if self.segment_map is None else [dict(s.stored) for s in self.segment_map]
        row["trace"] = None if self.trace is None else [[e.time_us, e.action, e.size] for e in self.trace]
        if self.seed_claim is not None:
            row["seed_claim"] = self.seed_claim
        return row | dict(self.extra)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> AllocatorStep:
        """A stored row; keys it lacks take their defaults, keys it does not name stay in ``extra``."""
        values, extra = split(cls, row)
        if row.get("segment_map") is not None:
            values["segment_map"] = tuple(Segment.from_dict(s) for s in row["segment_map"])
        if row.get("trace") is not None:
            values["trace"] = tuple(HistoryEvent(*entry) for entry in row["trace"])
        return cls(**values, extra=extra)


@dataclass(frozen=True)
class BackwardPeak:
    """The peak over one backward form (allocated at its reset → highest peak) as a multiple of size(x), next to
    the seed's claim and autograd's count of the tensors alive at the peak."""

    form: str
    x_bytes: int
    peak_bytes: int
    peak_over_x: float
    seed_claim_over_x: float
    autograd_count_over_x: int
    autograd_tensors: str

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class AllocatorMeta:
    """What the views read of the run's meta: the setting the worker saw, what the allocator itself reported, and
    the backward peaks (the backward-peak scenario)."""

    alloc_conf_seen: str | None = None
    allocator_backend: str | None = None  # None: a CPU run
    allocator_settings_reported: Mapping[str, Any] = field(default_factory=dict)
    alloc_conf_not_applied: tuple[str, ...] = ()
    snapshot_note: str | None = None
    backward_peak: tuple[BackwardPeak, ...] = ()

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any]) -> AllocatorMeta:
        return cls(
            alloc_conf_seen=meta.get("alloc_conf_seen"),
            allocator_backend=meta.get("allocator_backend"),
            allocator_settings_reported=meta.get("allocator_settings_reported") or {},
            alloc_conf_not_applied=tuple(meta.get("alloc_conf_not_applied") or ()),
            snapshot_note=meta.get("snapshot_note"),
            backward_peak=tuple(BackwardPeak(**b) for b in meta.get("backward_peak") or ()),
        )


def steps_of(rows: Sequence[Mapping[str, Any]]) -> list[AllocatorStep]:
    return [AllocatorStep.from_row(r) for r in rows]

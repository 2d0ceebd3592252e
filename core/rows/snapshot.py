"""An imported memory snapshot's summary as its views read it: the peak and its stack, the reserve, what was there
before recording, the categories and their rules, the sites holding memory at the peak, and an out-of-memory's
figures.

The analysis (:mod:`core.workload.snapshot.analysis`) derives the summary once, with numpy, and the import stores it
as the run's meta; :meth:`SnapshotSummary.from_meta` reads a stored one (of any earlier version: a key it lacks takes
its default) and the text, the charts and the page read its fields. Torch-free.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from core.result import RunResult
from core.rows.stored import known


@dataclass(frozen=True)
class PeakEvent:
    """The trace event that made the peak."""

    action: str
    size_bytes: int
    index: int | None = None
    address: int | None = None


@dataclass(frozen=True)
class CategoryRule:
    """How many allocations one of the category rules classified, and their bytes."""

    rule: str
    category: str
    means: str = ""
    allocations: int = 0
    bytes_allocated: int = 0


@dataclass(frozen=True)
class Site:
    """A line of the user's code holding memory at a moment (-2: what was allocated before recording, no stack)."""

    site: int
    label: str
    bytes: int
    blocks: int = 0
    before_recording_blocks: int = 0
    category: str = "unknown"
    rule: str = "no-stack"
    stack: tuple[str, ...] = ()
    stacks: int = 1

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Site:
        return cls(**known(cls, d, stack=tuple(d.get("stack") or ())))


@dataclass(frozen=True)
class Oom:
    """The last out-of-memory the snapshot holds: what was asked, what CUDA had free, what the allocator held."""

    time_ms: float
    requested_bytes: int
    pool: str
    device_free_bytes: int
    reserved_unallocated_bytes: int
    largest_free_block_bytes: Mapping[str, int]
    cause: str  # fragmentation | process limit | device full


@dataclass(frozen=True)
class SnapshotSummary:
    file: str = ""
    source_format: str = ""
    file_bytes: int = 0
    x_axis: str = ""
    detail_id: str | None = None  # the full trace kept beside the store, where it was
    device: int = 0
    devices: tuple[int, ...] = ()
    trace_events: int = 0
    actions: Mapping[str, int] = field(default_factory=dict)
    has_times: bool = True  # False: the points are event numbers
    duration_ms: float = 0.0
    peak_allocated_bytes: int = 0
    peak_time_ms: float = 0.0
    peak_event: PeakEvent | None = None  # None: the peak is before the first event
    peak_stack: tuple[str, ...] = ()
    peak_site: str | None = None
    peak_reserved_bytes: int = 0
    fragmentation_at_peak_bytes: int = 0
    peak_fragmentation_bytes: int = 0
    peak_fragmentation_time_ms: float = 0.0
    baseline_allocated_bytes: int = 0
    baseline_allocated_blocks: int = 0
    baseline_reserved_bytes: int = 0
    categories_at_peak_bytes: Mapping[str, int] = field(default_factory=dict)
    category_rules: tuple[CategoryRule, ...] = ()
    top_sites_at_peak: tuple[Site, ...] = ()
    notes: tuple[str, ...] = ()
    oom: Oom | None = None

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any]) -> SnapshotSummary:
        event, oom = meta.get("peak_event"), meta.get("oom")
        return cls(
            **known(
                cls,
                meta,
                source_format=(meta.get("source") or {}).get("format", ""),
                devices=tuple(meta.get("devices") or ()),
                peak_event=None
                if event is None
                else PeakEvent(event["action"], event["size_bytes"], event.get("index"), event.get("address")),
                peak_stack=tuple(meta.get("peak_stack") or ()),
                category_rules=tuple(CategoryRule(**r) for r in meta.get("category_rules") or ()),
                top_sites_at_peak=tuple(Site.from_dict(s) for s in meta.get("top_sites_at_peak") or ()),
                notes=tuple(meta.get("notes") or ()),
                oom=None if not oom else _oom(oom),
            )
        )

    @classmethod
    def from_run(cls, run: RunResult) -> SnapshotSummary:
        return cls.from_meta(run.meta)


def oom_cause(o: Mapping[str, Any]) -> str:
    """The cause the analysis derived; a run stored before it did reads "fragmentation" or "device full"."""
    return o.get("cause") or ("fragmentation" if o["fragmentation"] else "device full")


def _oom(o: Mapping[str, Any]) -> Oom:
    return Oom(o["time_ms"], o["requested_bytes"], o["pool"], o["device_free_bytes"], o["reserved_unallocated_bytes"],
               o["largest_free_block_bytes"], oom_cause(o))  # fmt: skip

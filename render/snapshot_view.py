"""The numbers the snapshot view draws, from the whole trace of an import: the points of a time window, who
holds memory at a moment, the categories over time, and the tables exported beside each chart.

Pure functions of a :class:`~core.workload.snapshot.analysis.SnapshotAnalysis` (the replay of the trace kept
beside the store, :mod:`core.workload.snapshot.detail`), a window and a budget of points, with no Streamlit and no
Plotly: the page only places widgets and hands these to :mod:`render.plots.memory_snapshot`. A chart never
gets more than :data:`MAX_CHART_POINTS` points, all its series together.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from core.rows.allocator import Segment, SegmentNumbers
from core.rows.snapshot import Site, SnapshotSummary
from core.rows.stored import read
from core.units import GIB, bytes_text, duration_text
from core.workload.snapshot import detail
from core.workload.snapshot.analysis import CATEGORIES, SnapshotAnalysis, analyse
from core.workload.snapshot.text import devices_text as devices_text  # the view says it as the CLI does

MAX_CHART_POINTS = 20_000
DEFAULT_CHART_POINTS = 5_000
SITES_SHOWN = 25  # the largest allocation sites listed at a moment
SEGMENTS_SHOWN = 128  # the largest segments drawn in the segment map
Window = tuple[float, float]  # ms since the first event (event numbers where the snapshot has no times)


def load(detail_id: str) -> SnapshotAnalysis:
    """Replay an import's whole trace from its folder beside the store."""
    return analyse(detail.load(detail_id))


def duration_ms(a: SnapshotAnalysis) -> float:
    """Where the trace's time axis ends: the zoom's and the moment's range (never empty, for a slider)."""
    return max(float(a.point_time_ms([len(a.allocated) - 1])[0]), 1e-3)


@dataclass(frozen=True)
class Timeline:
    """Allocated and reserved bytes at the points drawn of a window."""

    t_ms: np.ndarray
    allocated: np.ndarray
    reserved: np.ndarray
    drawn: str  # how many of the trace's points are drawn, said under the chart's title

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame({"t_ms": self.t_ms, "allocated_bytes": self.allocated, "reserved_bytes": self.reserved})

    def fragmentation_frame(self) -> pd.DataFrame:
        return pd.DataFrame({"t_ms": self.t_ms, "fragmentation_bytes": self.reserved - self.allocated})


def timeline(a: SnapshotAnalysis, window: Window, budget: int) -> Timeline:
    """The window re-read from the whole trace, each span of time keeping its first, last, highest and lowest point
    (:meth:`~core.workload.snapshot.analysis.SnapshotAnalysis.points_between`); allocated and
    reserved share the chart's ``budget``."""
    points = a.points_between(window[0], window[1], budget // 2)
    drawn = f"{len(points):,} of {len(a.allocated):,} points drawn"
    return Timeline(a.point_time_ms(points), a.allocated[points], a.reserved[points], drawn)


@dataclass(frozen=True)
class Moment:
    """Who holds memory at the last point at or before a time."""

    when: str  # "at 0.04 ms (6.5 KiB allocated)": the point's own time and what was allocated then
    sites: list[Site]  # the largest live sites, biggest first
    categories: dict[str, int]  # live bytes per category
    segments: tuple[Segment, ...]  # the segment map's segments and their blocks, largest first
    numbers: SegmentNumbers  # the segment map's counts, over every segment

    @property
    def held(self) -> str:
        """The categories holding memory, in words ("parameters 1000 B, activations 512 B")."""
        return ", ".join(f"{k.replace('_', ' ')} {bytes_text(v)}" for k, v in self.categories.items() if v)


def time_text(t_ms: float, has_times: bool = True) -> str:
    """A moment of a snapshot with its unit: ``"25.38 ms"`` (since the first event), or ``"event 1,204"`` where
    the snapshot recorded no times (its points are then event numbers)."""
    return duration_text(t_ms / 1e3, 2) if has_times else f"event {int(t_ms):,}"


def moment(a: SnapshotAnalysis, t_ms: float, budget: int) -> Moment:
    """The sites, categories and segments at ``t_ms``; the segment map draws at most ``budget`` blocks."""
    point = a.point_at_ms(t_ms)
    when = (
        f"at {time_text(float(a.point_time_ms([point])[0]), a.has_times)} ({bytes_text(a.allocated[point])} allocated)"
    )
    segments, numbers = a.segment_map_at(point, max_segments=SEGMENTS_SHOWN, max_blocks=budget)
    sites = [Site.from_dict(d) for d in a.top_sites(point, SITES_SHOWN)]
    drawn = tuple(map(Segment.from_dict, segments))
    return Moment(when, sites, a.categories_at(point), drawn, read(SegmentNumbers, numbers))


@dataclass(frozen=True)
class CategorySeries:
    """Bytes per category at the points drawn of a window."""

    t_ms: np.ndarray
    series: dict[str, np.ndarray]

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame({"t_ms": self.t_ms, **{f"{k}_bytes": v for k, v in self.series.items()}})


def categories(a: SnapshotAnalysis, window: Window, budget: int) -> CategorySeries:
    """The window's categories over time, every category's series sharing the chart's ``budget``."""
    points = a.points_between(window[0], window[1], budget // len(CATEGORIES))
    return CategorySeries(a.point_time_ms(points), a.category_series(points))


OOM_CAUSES = {
    "fragmentation": "fragmentation: enough reserved, no block large enough",
    "process limit": "a limit of the process: the device had room",
    "device full": "too little free on the device",
}


def failure_figures(s: SnapshotSummary) -> list[tuple[str, str]]:
    """An out-of-memory's figures as (label, value), what the page shows above everything else (none without
    one): the request and its pool, what CUDA had free, what the allocator held unused, the largest free block
    of each pool, and the verdict the engine derived."""
    o = s.oom
    if not o:
        return []
    largest = o.largest_free_block_bytes
    return [
        ("Request that failed", f"{bytes_text(o.requested_bytes)} ({o.pool} pool)"),
        ("Free on the device", bytes_text(o.device_free_bytes)),
        ("Reserved but unallocated", bytes_text(o.reserved_unallocated_bytes)),
        ("Largest free block", f"small {bytes_text(largest['small'])} · large {bytes_text(largest['large'])}"),
        ("Cause", OOM_CAUSES[o.cause]),
    ]


def differences_table(diff: pd.DataFrame) -> pd.DataFrame:
    """Two snapshots' sites at their peaks (:func:`render.plots.memory_snapshot.site_differences`) as the
    page lists them: the change in GiB beside the bytes, without the stacks."""
    return diff.assign(**{"Δ GiB": (diff["delta_bytes"] / GIB).round(4)}).drop(columns=["stack"])

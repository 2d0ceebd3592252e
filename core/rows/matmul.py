"""A matmul point as the engine stores it: one dtype at one M×N×K, with every value derived from it, once.

The engine builds a :class:`MatmulPoint` (the point, its timing, its checks against the datasheet and the
published figures, then its place in the sweep) and stores ``to_row()``, the keys runs have always had;
renderers and pages read the stored fields and derive nothing. :func:`upgrade` fills what runs stored by
earlier versions lack, with the same methods, when the store reads them. Torch-free.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from core.hardware import published
from core.hardware.specs import above_peak_error
from core.result import RunResult

TFLOPS = "tflops"  # the stored throughput column (TOPS for int8): what charts, the node and the headline read

# What the timing of a measured point stores, in order (:func:`core.measure.gemm.measure_point` gives them).
TIMING = (
    "mean_ms std_ms min_ms max_ms p20_ms p80_ms reps rel_error_rows bytes_moved intensity_flop_per_byte "
    "input_sets float32_matmul_precision allow_tf32 t_start_s t_end_s samples_ms"
).split()


@dataclass(frozen=True)
class MatmulPoint:
    dtype: str = ""
    m: int = 0
    n: int = 0
    k: int = 0
    label: str = ""
    flops: int = 0
    fp8_fast_accum: bool | None = None
    device_kind: str | None = None
    peak_tflops: float | None = None  # the datasheet's dense peak for the dtype's unit
    peak_note: str | None = None
    status: str = "ok"  # ok | unsupported | error
    reason: str | None = None
    median_ms: float | None = None
    tflops: float | None = None  # at the median time
    pct_of_peak: float | None = None
    rel_error: float | None = None  # against an fp64 product of the same inputs
    copy_bandwidth_gbs: float | None = None
    timing: Mapping[str, Any] = field(default_factory=dict)  # TIMING's fields of a measured point
    tflops_max: float | None = None  # at the fastest call
    tflops_p20: float | None = None  # at the p80 time
    tflops_p80: float | None = None  # at the p20 time
    clocks: Mapping[str, Any] = field(default_factory=dict)  # the NVML samples' summary over the point (GPU)
    above_peak: bool | None = None
    measurement_error: str | None = None
    published_tflops: float | None = None  # the source's maximum achievable for the dtype on this GPU
    pct_of_published: float | None = None
    bandwidth_bound_tflops: float | None = None  # the roofline's memory ceiling at this intensity
    pct_of_best: float | None = None  # of the sweep's best of the dtype; None until the sweep is ranked
    is_best: bool | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)  # keys others add (the fan-out's GPU)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def measured(self, timing: Mapping[str, Any]) -> MatmulPoint:
        """The point timed: the stored timing and the throughput at the median and the spread's ends."""
        at = {name: self.flops / (timing[f"{stat}_ms"] * 1e9) for name, stat in _THROUGHPUT_AT.items()}
        tflops = at.pop(TFLOPS)
        return dataclasses.replace(
            self,
            median_ms=timing["median_ms"],
            rel_error=timing.get("rel_error"),
            timing={k: timing[k] for k in TIMING},
            tflops=tflops,
            pct_of_peak=100.0 * tflops / self.peak_tflops if self.peak_tflops else None,
            **at,
        )

    def checked(self) -> MatmulPoint:
        """``above_peak`` and its error text: a median throughput above the sheet is a measurement error."""
        error = above_peak_error(self.tflops, self.peak_tflops, f"{self.dtype} {self.m}×{self.n}×{self.k}")
        return dataclasses.replace(self, above_peak=error is not None, measurement_error=error)

    def against(self, entries: Sequence[published.Published]) -> MatmulPoint:
        """``published_tflops`` (the source's maximum achievable for the dtype on that GPU) and
        ``pct_of_published``; None where the source measured no such figure or the point has no throughput."""
        best = published.figure(list(entries), self.dtype)
        pct = 100.0 * self.tflops / best.tflops if best and self.tflops else None
        return dataclasses.replace(self, published_tflops=best.tflops if best else None, pct_of_published=pct)

    def compared(
        self, entries: Sequence[published.Published], searched: bool, device: Mapping[str, Any]
    ) -> PublishedComparison:
        """Like for like against the published maximum for the dtype: its percentage only where the point may meet
        it (the best of a shape search, or the published best shape itself: :func:`published.comparable`), and
        the card the figure was measured on, or why the point is not comparable."""
        entry = published.figure(list(entries), self.dtype)
        if entry is None:
            return PublishedComparison("", None)
        why = published.comparable(entry, (self.m, self.n, self.k), searched and bool(self.is_best))
        if why is not None:
            return PublishedComparison(why, None)
        return PublishedComparison(published.provenance(entry, dict(device)), self.pct_of_published)

    def to_row(self) -> dict:
        """The stored row: the keys and order runs have always had (a measured point's fields only when
        measured, the sweep's once it is ranked)."""
        row = {name: getattr(self, name) for name in _POINT}
        if self.ok:
            row |= {name: getattr(self, name) if name in _SPREAD else self.timing[name] for name in self._measured()}
            row |= {"gflops": _giga(self.tflops), **self.clocks, **{name: getattr(self, name) for name in _CHECKS}}
            if self.bandwidth_bound_tflops is not None:
                row["bandwidth_bound_tflops"] = self.bandwidth_bound_tflops
        if self.is_best is not None:
            row |= {"pct_of_best": self.pct_of_best, "is_best": self.is_best}
        return row | dict(self.extra)

    def _measured(self) -> list[str]:
        """The timing's fields with the throughput's spread after the times, as runs have stored them."""
        names = [name for name in TIMING if name in self.timing]
        at = names.index("reps") + 1 if "reps" in names else len(names)
        return [*names[:at], *_SPREAD, *names[at:]]

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> MatmulPoint:
        """A stored row as a point; keys it lacks take their defaults, keys it does not name stay in ``extra``."""
        named = {f.name for f in dataclasses.fields(cls)} - {"timing", "clocks", "extra"}
        return cls(
            **{k: v for k, v in row.items() if k in named},
            timing={k: row[k] for k in TIMING if k in row},
            clocks={k: row[k] for k in CLOCKS if k in row},
            extra={k: v for k, v in row.items() if k not in named | set(TIMING) | set(CLOCKS) | {"gflops"}},
        )


@dataclass(frozen=True)
class PublishedComparison:
    """A point against the published maximum of its dtype: ``pct`` where it is comparable; ``note``: the card the
    figure was measured on, or why the point is not comparable ("" where there is no published figure)."""

    note: str
    pct: float | None

    @property
    def text(self) -> str:
        if self.pct is not None:
            return f"{self.pct:.1f}% of the published best ({self.note})"
        return self.note or "no published figure"


# the point's own fields, stored on every row, in the order runs have always had
_POINT = (
    "dtype fp8_fast_accum m n k label flops device_kind peak_tflops peak_note status reason median_ms tflops "
    "pct_of_peak rel_error copy_bandwidth_gbs"
).split()
_THROUGHPUT_AT = {TFLOPS: "median", "tflops_max": "min", "tflops_p20": "p80", "tflops_p80": "p20"}
_SPREAD = ("tflops_max", "tflops_p20", "tflops_p80")
_CHECKS = ("above_peak", "measurement_error", "published_tflops", "pct_of_published")
# core.hardware.clocks.ClockSampler.window's summary, stored on a GPU's measured rows
CLOCKS = ("sm_clock_mhz", "sm_clock_min_mhz", "power_w", "temp_c", "throttle_reasons", "throttled")


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _giga(tflops: float | None) -> float | None:
    return None if tflops is None else tflops * 1e3


def ranked(points: Sequence[MatmulPoint]) -> list[MatmulPoint]:
    """The sweep's points with ``pct_of_best`` (throughput / the best of the same dtype, measured points only)
    and ``is_best``."""
    best: dict[str, float] = {}
    for p in points:
        if p.ok and _number(p.tflops) and p.tflops:
            best[p.dtype] = max(best.get(p.dtype, 0.0), p.tflops)
    return [_rank(p, best.get(p.dtype)) for p in points]


def _rank(point: MatmulPoint, top: float | None) -> MatmulPoint:
    mine = bool(top) and point.ok and _number(point.tflops)
    return dataclasses.replace(
        point,
        pct_of_best=100.0 * point.tflops / top if mine and top and point.tflops is not None else None,
        is_best=mine and point.tflops == top,
    )


def upgrade(run: RunResult) -> RunResult:
    """A matmul run stored before a derived value existed gets it, as the engine derives it: the above-peak
    check and the published figures of its GPU on each measured row, the sweep's ranks on every row (also for
    a run that ended early). Rows that have them are kept as stored, and so are rows no version of the engine
    wrote (every point it stored says its status)."""
    if any("status" not in row for row in run.rows):
        return run
    rows = [_upgraded_row(row, run.device) for row in run.rows]
    if any("is_best" not in row for row in rows):
        points = ranked([MatmulPoint.from_row(row) for row in rows])
        rows = [row | {"pct_of_best": p.pct_of_best, "is_best": p.is_best} for row, p in zip(rows, points)]
    return run if rows == run.rows else dataclasses.replace(run, rows=rows)


def _upgraded_row(row: dict, device: dict) -> dict:
    if row.get("status") != "ok" or not _number(row.get(TFLOPS)):  # nothing measured, nothing to check
        return row
    point = MatmulPoint.from_row(row)
    if "above_peak" not in row:
        checked = point.checked()
        row = row | {"above_peak": checked.above_peak, "measurement_error": checked.measurement_error}
    if "pct_of_published" not in row:
        mine = point.against(published.for_device(device))
        row = row | {"published_tflops": mine.published_tflops, "pct_of_published": mine.pct_of_published}
    return row


@dataclass(frozen=True)
class MatmulMeta:
    """A matmul run's meta as its views read it: the copy bandwidth and the roofline's slope, the NVML samples
    over the run (the clock chart's data) and what the run noted beside its figures."""

    copy_bandwidth_gbs: float | None = None  # bytes copied once per second
    roofline_bandwidth_gbs: float | None = None  # read + write traffic per second: the roofline's slope
    clocks: tuple[Mapping[str, Any], ...] = ()
    notes: tuple[str, ...] = ()  # the cache flush, the clock sampling, the machine's load

    @property
    def bandwidth_gbs(self) -> float | None:
        """The roofline's slope; a run stored before it had its own key counted copy_bandwidth_gbs as read +
        write, the same quantity."""
        return self.roofline_bandwidth_gbs or self.copy_bandwidth_gbs

    @property
    def copy_counted(self) -> str:
        """What the copy bandwidth counts: a run stored before roofline_bandwidth_gbs counted read + write."""
        return "bytes copied once" if self.roofline_bandwidth_gbs is not None else "read + write traffic"

    @classmethod
    def from_run(cls, run: RunResult) -> MatmulMeta:
        meta = run.meta
        clocks = meta.get("clocks")
        return cls(
            copy_bandwidth_gbs=_float(meta.get("copy_bandwidth_gbs")),
            roofline_bandwidth_gbs=_float(meta.get("roofline_bandwidth_gbs")),
            clocks=tuple(c for c in clocks if isinstance(c, Mapping)) if isinstance(clocks, list) else (),
            notes=tuple(str(meta[k]) for k in ("cache_note", "clocks_note", "cpu_load_note") if meta.get(k)),
        )


def _float(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None

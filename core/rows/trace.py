"""An imported profiler trace's rows as named tables: one frozen dataclass per kind of row, split once.

A ``profiler-trace`` run stores one list of rows of several kinds (its devices, kernel groups, top kernels, each
stream's idle, launch delays, steps, utilisation bins, collectives); a ``profiler-trace-ranks`` run's rows and
``trace-diff``'s have their modules beside this one (:mod:`core.rows.trace_ranks`, :mod:`core.rows.trace_diff`), so
that reading one trace defines only its own classes. :class:`Tables` splits such a list by ``"kind"`` — the one place
that reads it — into one tuple per kind, and ``rows()`` gives the stored list back, each row with its keys in the
order it was stored. A row keeps the keys its
class does not name in ``extra`` (what a later version adds); a step's per-group and per-cause figures, one stored
key each, are read as one mapping field each (``SPREAD``).

One figure, two stored names: a trace's devices and steps store the union of compute kernels as
``compute_union_us``, a rank's rows as ``compute_us``; both are the field ``compute_us`` here (communication alike).
Torch-free.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, cached_property
from typing import Any, ClassVar, Self

from core.measure.kernels import KERNEL_GROUPS
from core.result import RunResult


@dataclass(frozen=True, kw_only=True)
class StoredRow:
    """What every row of these tables shares: the keys its class does not name, and the stored key order."""

    KIND: ClassVar[str] = ""
    STORED: ClassVar[Mapping[str, str]] = {}  # field → its stored key, where the two differ
    SPREAD: ClassVar[Mapping[str, Mapping[str, str]]] = {}  # a mapping field → {its name → the stored key}

    extra: Mapping[str, Any] = field(default_factory=dict)  # stored keys the class does not name
    keys: tuple[str, ...] = field(default=(), compare=False, repr=False)  # every stored key, in the stored order

    @classmethod
    @cache  # per class: a trace stores thousands of rows of a few kinds
    def _named(cls) -> dict[str, str]:
        """Stored key → field, for the fields a row of this kind stores as one key each."""
        own = _OWN | set(cls.SPREAD)
        return {cls.STORED.get(f.name, f.name): f.name for f in dataclasses.fields(cls) if f.name not in own}

    @classmethod
    @cache
    def _spread(cls) -> dict[str, tuple[str, str]]:
        """Stored key → (mapping field, name in it), for the figures stored one key each under a mapping field."""
        return {key: (name, part) for name, keys in cls.SPREAD.items() for part, key in keys.items()}

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Self:
        """A stored row; keys it lacks take their defaults, keys the class does not name stay in ``extra``. One
        pass over the row's keys: a trace stores thousands of rows."""
        named, spread = cls._named(), cls._spread()
        own: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for key, value in row.items():
            name = named.get(key)
            if name is not None:
                own[name] = value
            elif key not in spread and key != "kind":
                extra[key] = value
        parts: dict[str, dict[str, Any]] = {name: {} for name in cls.SPREAD}
        for key, (name, part) in spread.items():  # in the class's order, whatever the row's
            if key in row:
                parts[name][part] = row[key]
        return cls(**own, **parts, extra=extra, keys=tuple(row))

    @classmethod
    def of(cls, values: Mapping[str, Any]) -> Self:
        """A row the engine builds, from its stored keys and values in the order it stores them."""
        return cls.from_row({"kind": cls.KIND, **values})

    @classmethod
    def series(cls, columns: Mapping[str, Sequence[Any]]) -> tuple[Self, ...]:
        """Rows the engine builds a column at a time (stored key → one value per row, the keys in the order it
        stores them): which keys are fields is settled once for all the rows, not once per row."""
        named, spread = cls._named(), cls._spread()
        if {len(column) for column in columns.values()} - {len(next(iter(columns.values()), ()))}:
            raise ValueError(f"{cls.__name__}.series: columns of different lengths")
        if spread.keys() & columns.keys():
            raise ValueError(f"{cls.__name__}.series: {sorted(spread.keys() & columns.keys())} are spread keys")
        keys = ("kind", *columns)
        own = [(named[k], i) for i, k in enumerate(columns) if k in named]
        rest = [(k, i) for i, k in enumerate(columns) if k not in named]
        return tuple(
            cls(**{f: values[i] for f, i in own}, extra={k: values[i] for k, i in rest}, keys=keys)
            for values in zip(*columns.values())
        )

    def to_row(self) -> dict:
        """The stored row: its keys in the order they were stored."""
        named, spread = self._named(), self._spread()
        keys = self.keys or ("kind", *named, *(k for k, (n, p) in spread.items() if p in getattr(self, n)), *self.extra)
        row: dict[str, Any] = {}
        for key in keys:
            if key in named:
                row[key] = getattr(self, named[key])
            elif key in spread:
                name, part = spread[key]
                row[key] = getattr(self, name)[part]
            elif key == "kind":
                row[key] = self.KIND
            else:
                row[key] = self.extra[key]
        return row

    def adding(self, **parts: Mapping[str, Any]) -> Self:
        """This row with figures added to its mapping fields (``SPREAD``), their keys stored after the row's own."""
        new = {name: {**getattr(self, name), **values} for name, values in parts.items()}
        added = tuple(self.SPREAD[name][p] for name, values in parts.items() for p in values)
        keys = self.keys + tuple(k for k in added if k not in self.keys) if self.keys else ()
        return dataclasses.replace(self, **new, keys=keys)


_OWN = {"extra", "keys"}


# --- one trace (profiler-trace) ---------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class TraceDevice(StoredRow):
    """A GPU of the file: its busy, idle and unions of activity (µs)."""

    KIND = "device"
    STORED = {"compute_us": "compute_union_us"}
    device: int = 0
    name: str = ""
    span_us: float = 0.0
    busy_us: float = 0.0
    idle_us: float = 0.0
    compute_us: float = 0.0


@dataclass(frozen=True, kw_only=True)
class KernelGroup(StoredRow):
    """A kernel group of the analysed GPU: ``share`` of the GPU time, ``kernel_share`` of the kernel time (None
    for memory)."""

    KIND = "group"
    group: str = ""
    count: int = 0
    total_us: float = 0.0
    share: float = 0.0
    kernel_share: float | None = None


@dataclass(frozen=True, kw_only=True)
class Kernel(StoredRow):
    """One of the top kernels by total time."""

    KIND = "kernel"
    rank: int = 0
    name: str = ""
    group: str = ""
    count: int = 0
    total_us: float = 0.0
    mean_us: float = 0.0
    max_us: float = 0.0
    share: float = 0.0


@dataclass(frozen=True, kw_only=True)
class StreamIdle(StoredRow):
    """A stream's gaps by cause (HolisticTraceAnalysis' idle breakdown)."""

    KIND = "idle"
    stream: int = 0
    activities: int = 0
    host_wait_us: float = 0.0
    kernel_wait_us: float = 0.0
    other_wait_us: float = 0.0


@dataclass(frozen=True, kw_only=True)
class LaunchDelayBin(StoredRow):
    """A bin of the launch delays' histogram; ``shorter_than_launch_call`` None in runs stored before it."""

    KIND = "launch_delay"
    from_us: float = 0.0
    to_us: float = 0.0
    count: int = 0
    launch_bound: int = 0
    graph_launched: int = 0
    shorter_than_launch_call: int | None = None


# What held the GPU idle on the host's side (:mod:`core.workload.trace.host_gaps`), and the short name each is stored
# under in a step row: ``idle_host_<key>_us`` on the step's GPU window, ``wall_idle_<key>_us`` in the host's step.
HOST_CAUSES = (
    "device→host copy",
    "synchronisation",
    "allocator",
    "data loading",
    "optimizer",
    "other CPU work",
    "no CPU event",
)
_CAUSE_KEYS = ("copy", "sync", "allocator", "data", "optimizer", "other", "none")
WINDOW_CAUSE_KEYS = {cause: f"idle_host_{key}_us" for cause, key in zip(HOST_CAUSES, _CAUSE_KEYS)}
WALL_CAUSE_KEYS = {cause: f"wall_idle_{key}_us" for cause, key in zip(HOST_CAUSES, _CAUSE_KEYS)}
GROUP_KEYS = {group: f"{group}_us" for group in KERNEL_GROUPS}  # a step's kernel time by group


@dataclass(frozen=True, kw_only=True)
class TraceStep(StoredRow):
    """A ``ProfilerStep``: its wall, its GPU window (None in runs stored before the windows) and what the GPU did;
    its kernel time by group (``groups``) and the GPU's idle by the host's cause on its GPU window
    (``window_causes``) and in the host's step (``wall_causes``), each {} in runs stored before them. The host's
    figures (``start_us``, ``host_before_first_kernel_us``, ``host_after_last_kernel_us``) are None for a step cut
    from the GPU's spans."""

    KIND = "step"
    STORED = {"compute_us": "compute_union_us", "communication_us": "communication_union_us"}
    SPREAD = {"groups": GROUP_KEYS, "window_causes": WINDOW_CAUSE_KEYS, "wall_causes": WALL_CAUSE_KEYS}
    step: int = 0
    wall_us: float = 0.0
    gpu_window_us: float | None = None
    start_us: float | None = None
    gpu_window_start_us: float | None = None
    host_before_first_kernel_us: float | None = None
    host_after_last_kernel_us: float | None = None
    kernel_time_us: float | None = None
    busy_us: float | None = None
    idle_us: float | None = None
    host_wait_us: float | None = None
    compute_us: float | None = None
    communication_us: float | None = None
    exposed_communication_us: float | None = None
    groups: Mapping[str, float] = field(default_factory=dict)
    window_causes: Mapping[str, float] = field(default_factory=dict)
    wall_causes: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class BusyBin(StoredRow):
    """A utilisation bin: the share of it the GPU was busy (each kind's share in ``extra``)."""

    KIND = "busy"
    t_ms: float = 0.0
    busy_share: float = 0.0


@dataclass(frozen=True, kw_only=True)
class Collective(StoredRow):
    """A kind of collective call with nccl-tests' figures (None where nccl-tests has none)."""

    KIND = "collective"
    collective: str = ""
    dtype: str = ""
    group_size: int = 0
    bytes: int | None = None
    size: str | None = None
    calls: int = 0
    total_us: float = 0.0
    median_us: float = 0.0
    algbw_gbs: float | None = None
    busbw_factor: float | None = None
    busbw_gbs: float | None = None


# --- the tables --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tables:
    """Named tables of one run's rows, in the order the engine stores them (``TABLES``: name → row class); rows of
    a kind no table holds stay in ``other``, after the rest."""

    TABLES: ClassVar[Mapping[str, type[StoredRow]]] = {}

    other: tuple[Mapping[str, Any], ...] = ()

    @classmethod
    def from_rows(cls, rows: Iterable[Mapping[str, Any]]) -> Self:
        """The rows split by kind, once."""
        by_kind = {row_class.KIND: name for name, row_class in cls.TABLES.items()}
        split: dict[str, list] = {name: [] for name in cls.TABLES}
        other = []
        for row in rows:
            name = by_kind.get(row.get("kind"))  # type: ignore[arg-type]
            if name is None:
                other.append(row)
            else:
                split[name].append(cls.TABLES[name].from_row(row))
        return cls(other=tuple(other), **{name: tuple(part) for name, part in split.items()})

    @classmethod
    def from_run(cls, run: RunResult) -> Self:
        return cls.from_rows(run.rows)

    def rows(self) -> list[dict]:
        """The stored rows, table after table."""
        out = [r.to_row() for name in self.TABLES for r in getattr(self, name)]
        return out + [dict(r) for r in self.other]

    @cached_property
    def _frame(self):
        from core.result import rows_frame

        return rows_frame(self.rows())

    def frame(self, name: str):
        """One table as a DataFrame with the columns it fills, as a chart plots and exports it: cut from the frame
        of every row, so its columns keep the run's order and types."""
        start = sum(len(getattr(self, n)) for n in list(self.TABLES)[: list(self.TABLES).index(name)])
        part = self._frame.iloc[start : start + len(getattr(self, name))]
        return part.dropna(axis=1, how="all").reset_index(drop=True)


@dataclass(frozen=True)
class TraceTables(Tables):
    """A ``profiler-trace`` run's rows."""

    TABLES = {
        "devices": TraceDevice,
        "groups": KernelGroup,
        "kernels": Kernel,
        "idle": StreamIdle,
        "launch_delays": LaunchDelayBin,
        "steps": TraceStep,
        "busy": BusyBin,
        "collectives": Collective,
    }

    devices: tuple[TraceDevice, ...] = ()
    groups: tuple[KernelGroup, ...] = ()
    kernels: tuple[Kernel, ...] = ()
    idle: tuple[StreamIdle, ...] = ()
    launch_delays: tuple[LaunchDelayBin, ...] = ()
    steps: tuple[TraceStep, ...] = ()
    busy: tuple[BusyBin, ...] = ()
    collectives: tuple[Collective, ...] = ()

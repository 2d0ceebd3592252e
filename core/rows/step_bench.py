"""A step-bench run's rows as the engine stores them: five kinds for a single run (timed steps, each phase's
summary, each stack's summary, the profiled kernels and their groups) and one for a sweep or a grid (a
configuration each), told apart in the stored list by ``kind``.

The engine builds each row here and stores ``to_row()``, the keys and order runs have always had;
:class:`StepBenchTables` splits a stored run's rows once, one tuple per kind, and the views read those fields
and never the kind. A run stored before stacks existed has no ``stack`` (its rows read as the course's stack,
:attr:`stack_name`) and fewer figures; its rows read with defaults and are never stored again. Torch-free.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from core.result import RunResult
from core.rows.matmul import CLOCKS

KIND = "kind"
COURSE = "course"  # the stack of a run stored before stacks existed
SWITCHES = ("attention", "optimizer_impl", "compile", "checkpointing")  # Stack.setup_fields(), in its order
STATS = ("median", "mean", "std", "min", "max", "p20", "p80", "count")  # core.measure.stats.summarize's
STEP_MS = tuple(f"step_ms_{s}" for s in STATS)
PHASE_MS = tuple(f"ms_{s}" for s in STATS)
THROUGHPUT = ("tokens_per_s", "model_flops_per_step", "achieved_tflops")
MFU = (  # core.transformer.mfu.mfu_figures, in its order
    "mfu peak_tflops peak_unit mfu_note mfu_measured measured_ceiling_tflops measured_ceiling mfu_unit "
    "unit_peak_tflops unit_peak_name unit_peak_note above_peak measurement_error"
).split()
WARM_UP = ("warmup_steps_run", "steady", "warmup_step_ms")  # core.transformer.bench.WarmUp.to_dict
MEMORY = ("peak_estimated_bytes", "peak_measured_bytes", "peak_error_pct")
# a profiled stack's figures (with a trace: its bytes; on a GPU: what its trace says, read as an imported one)
PROFILE = (
    "profiled_total_ms scope_wall_ms busy host_bound trace_bytes trace_json_bytes trace_findings trace_busy"
).split()

Row = TypeVar("Row")


class Stored(Protocol):
    """A row of any table: what it stores."""

    def to_row(self) -> dict: ...


def _read(cls: type[Row], row: Mapping[str, Any], groups: Mapping[str, Sequence[str]] = {}) -> Row:  # noqa: B006
    """A stored row as ``cls``: its named fields, each group's keys as a mapping (in the stored order), what it
    does not name in ``extra`` (the fan-out's GPU); a key the row lacks takes its default."""
    names = {f.name for f in dataclasses.fields(cls)} - set(groups) - {"extra"}  # pyright: ignore[reportArgumentType]
    grouped = {k for keys in groups.values() for k in keys}
    values: dict[str, Any] = {k: v for k, v in row.items() if k in names}
    values |= {name: {k: row[k] for k in keys if k in row} for name, keys in groups.items()}
    values["extra"] = {k: v for k, v in row.items() if k not in names | grouped | {KIND}}
    return cls(**values)


def _fields(row: object, names: Sequence[str]) -> dict:
    return {name: getattr(row, name) for name in names}


@dataclass(frozen=True)
class Configured:
    """What a row says it timed: the stack and its switches, the precision, the model and its shape."""

    stack: str | None = None  # None: a run stored before stacks, the course's
    switches: Mapping[str, Any] = field(default_factory=dict)
    precision: str | None = None
    model: str | None = None  # None: a run stored before the rows named it
    batch: int | None = None
    context: int | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)  # keys others add (the fan-out's GPU)

    @property
    def stack_name(self) -> str:
        return self.stack or COURSE

    @property
    def device(self) -> str | None:
        """The GPU of a run on every GPU at once (the fan-out adds it)."""
        return self.extra.get("device")

    def _setup(self, params: int | None = None) -> dict:
        out: dict[str, Any] = {} if self.stack is None else {"stack": self.stack, **self.switches}
        out["precision"] = self.precision
        if self.model is not None:
            out |= {"model": self.model} | ({} if params is None else {"params": params})
            out |= {"batch": self.batch, "context": self.context}
        return out


@dataclass(frozen=True)
class StepSample(Configured):
    """One phase of one timed step: ``cold`` before any warm-up, ``warm`` after it."""

    series: str = "warm"
    step: int = 0
    phase: str = ""
    ms: float = 0.0

    def to_row(self) -> dict:
        return {KIND: "sample", **self._setup(), **_fields(self, ("series", "step", "phase", "ms")), **self.extra}

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> StepSample:
        return _read(cls, row, {"switches": SWITCHES})


@dataclass(frozen=True)
class PhaseTimes(Configured):
    """One phase over a stack's warm steps (``ms``: :data:`STATS` prefixed ``ms_``)."""

    series: str = "warm"
    phase: str = ""
    ms: Mapping[str, float] = field(default_factory=dict)

    def to_row(self) -> dict:
        return {KIND: "phase", **self._setup(), "series": self.series, "phase": self.phase, **self.ms, **self.extra}

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> PhaseTimes:
        return _read(cls, row, {"switches": SWITCHES, "ms": PHASE_MS})


@dataclass(frozen=True)
class Measured(Configured):
    """A step's time over its warm steps and what follows from it: throughput, the three MFUs, the warm-up."""

    step_ms: Mapping[str, float] = field(default_factory=dict)  # STATS prefixed step_ms_
    tokens_per_s: float | None = None
    model_flops_per_step: int | None = None
    achieved_tflops: float | None = None
    mfu: float | None = None  # over the card's bf16 dense peak
    peak_tflops: float | None = None
    peak_unit: str | None = None
    mfu_note: str | None = None
    mfu_measured: float | None = None  # over the best bf16 matmul measured on the device
    measured_ceiling_tflops: float | None = None
    measured_ceiling: str | None = None
    mfu_unit: float | None = None  # over the precision's own unit's peak
    unit_peak_tflops: float | None = None
    unit_peak_name: str | None = None
    unit_peak_note: str | None = None
    above_peak: bool | None = None
    measurement_error: str | None = None
    warmup_steps_run: int | None = None
    steady: bool | None = None
    warmup_step_ms: Sequence[float] | None = None
    clocks: Mapping[str, Any] = field(default_factory=dict)  # NVML's summary over the timed steps (GPU)

    @property
    def step_ms_median(self) -> float | None:
        return self.step_ms.get("step_ms_median")

    @property
    def step_ms_p20(self) -> float | None:
        return self.step_ms.get("step_ms_p20")

    @property
    def step_ms_p80(self) -> float | None:
        return self.step_ms.get("step_ms_p80")

    def _figures(self) -> dict:
        return {**self.step_ms, **_fields(self, (*THROUGHPUT, *MFU))}


@dataclass(frozen=True)
class TraceFinding:
    """One finding of a profiled stack's own trace, read as an imported trace is (what the summary row stores)."""

    kind: str
    text: str
    cause: str | None = None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TraceFinding:
        return cls(d["kind"], d["text"], d.get("cause"))


@dataclass(frozen=True)
class StackSummary(Measured):
    """A single run's stack: its time, figures and first step, its memory against the planner's, and (profiled)
    how busy the device was."""

    tokens_per_step: int | None = None
    backward_forward_ratio: float | None = None
    first_step_ms: float | None = None  # the first step timed before any warm-up
    first_step_over_median: float | None = None
    compile_s: float | None = None  # a compiled stack's first step less the median
    peak_estimated_bytes: int | None = None  # the planner's
    peak_measured_bytes: int | None = None  # the allocator's (a GPU's)
    peak_error_pct: float | None = None
    profile: Mapping[str, Any] = field(default_factory=dict)  # PROFILE's keys, where profiled

    @property
    def busy(self) -> float | None:
        return self.profile.get("busy")

    @property
    def host_bound(self) -> bool | None:
        return self.profile.get("host_bound")

    @property
    def trace_findings(self) -> list[TraceFinding]:
        return [TraceFinding.from_dict(f) for f in self.profile.get("trace_findings") or ()]

    def to_row(self) -> dict:
        row = {KIND: "summary", **self._setup(), "tokens_per_step": self.tokens_per_step, **self._figures()}
        first = ("backward_forward_ratio", "first_step_ms", "first_step_over_median", "compile_s", *WARM_UP)
        row |= _fields(self, first) | dict(self.clocks) | _fields(self, MEMORY)
        return row | dict(self.profile) | dict(self.extra)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> StackSummary:
        return _read(cls, row, {"switches": SWITCHES, "step_ms": STEP_MS, "clocks": CLOCKS, "profile": PROFILE})


@dataclass(frozen=True)
class ConfigRow(Measured):
    """One configuration of a sweep (``kind`` "precision") or a grid ("grid"): timed, or why it was not."""

    kind: str = "precision"
    params: int | None = None
    status: str = "ok"  # ok | unsupported | refused | error
    reason: str | None = None
    memory: Mapping[str, Any] = field(default_factory=dict)  # MEMORY's keys, where it was built
    busy: float | None = None
    host_bound: bool | None = None
    batch_rule: str | None = None
    speedup_vs_fp32: float | None = None  # the same model and stack in fp32 over this one, where both ran

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def in_grid(self) -> bool:
        """A configuration of a size × precision grid (else of a precision sweep)."""
        return self.kind == "grid"

    def to_row(self) -> dict:
        row = {KIND: self.kind, **self._setup(self.params), **self.clocks, **self.memory}
        row |= {"status": self.status, "reason": self.reason}
        if self.ok:
            row |= self._figures() | _fields(self, (*WARM_UP, "busy", "host_bound"))
        row["batch_rule"] = self.batch_rule
        if self.speedup_vs_fp32 is not None:
            row["speedup_vs_fp32"] = self.speedup_vs_fp32
        return row | dict(self.extra)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> ConfigRow:
        return _read(cls, row, {"switches": SWITCHES, "step_ms": STEP_MS, "clocks": CLOCKS, "memory": MEMORY})


@dataclass(frozen=True)
class KernelTime:
    """One of the top kernels (a CPU's ops) of a profiled scope, per step."""

    stack: str | None = None
    scope: str = "step"  # forward | step
    rank: int = 0
    name: str = ""
    group: str = "other"
    count_per_step: float = 0.0
    ms_per_step: float = 0.0
    share: float = 0.0  # of the scope's profiled time, a fraction
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_row(self) -> dict:
        stack = {} if self.stack is None else {"stack": self.stack}
        names = ("scope", "rank", "name", "group", "count_per_step", "ms_per_step", "share")
        return {KIND: "kernel", **stack, **_fields(self, names), **self.extra}

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> KernelTime:
        return _read(cls, row)


@dataclass(frozen=True)
class GroupTime:
    """A kernel group's time in a profiled scope, per step, and its share of the model's FLOPs (matmul and
    softmax only; the softmax's is an estimate)."""

    stack: str | None = None
    scope: str = "step"
    group: str = "other"
    ms_per_step: float = 0.0
    share: float = 0.0
    flops_share: float | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_row(self) -> dict:
        stack = {} if self.stack is None else {"stack": self.stack}
        names = ("scope", "group", "ms_per_step", "share", "flops_share")
        return {KIND: "group", **stack, **_fields(self, names), **self.extra}

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> GroupTime:
        return _read(cls, row)


@dataclass(frozen=True)
class StepBenchTables:
    """A run's rows, one tuple per kind, in their stored order: the one place that reads ``kind``."""

    samples: tuple[StepSample, ...] = ()
    phases: tuple[PhaseTimes, ...] = ()
    summaries: tuple[StackSummary, ...] = ()
    kernels: tuple[KernelTime, ...] = ()
    groups: tuple[GroupTime, ...] = ()
    precisions: tuple[ConfigRow, ...] = ()  # a sweep's
    grid: tuple[ConfigRow, ...] = ()

    @classmethod
    def from_rows(cls, rows: Sequence[Mapping[str, Any]]) -> StepBenchTables:
        tables: dict[str, list] = {name: [] for name in _TABLES.values()}
        for row in rows:
            name = _TABLES.get(str(row.get(KIND)))
            if name:
                tables[name].append(_READERS[name](row))
        return cls(**{name: tuple(found) for name, found in tables.items()})

    @classmethod
    def from_run(cls, run: RunResult) -> StepBenchTables:
        return cls.from_rows(run.rows)

    @property
    def configs(self) -> tuple[ConfigRow, ...]:
        """A sweep's or a grid's configurations (a run is one or the other)."""
        return self.precisions + self.grid

    @property
    def answered(self) -> tuple[StackSummary | ConfigRow, ...]:
        """What the run answers: each stack of a single run, or each configuration of a sweep or grid."""
        return self.summaries + self.configs

    def stacks(self) -> list[str]:
        """The stacks the run timed, in their order."""
        rows = (*self.summaries, *self.samples, *self.configs)
        return list(dict.fromkeys(r.stack_name for r in rows))


_TABLES = {"sample": "samples", "phase": "phases", "summary": "summaries", "kernel": "kernels", "group": "groups"}
_TABLES |= {"precision": "precisions", "grid": "grid"}
_READERS = {
    "samples": StepSample.from_row,
    "phases": PhaseTimes.from_row,
    "summaries": StackSummary.from_row,
    "kernels": KernelTime.from_row,
    "groups": GroupTime.from_row,
    "precisions": ConfigRow.from_row,
    "grid": ConfigRow.from_row,
}


def with_speedups(rows: Sequence[ConfigRow]) -> list[ConfigRow]:
    """Each configuration that ran with its speed-up over the same model and stack in fp32 (where that ran too):
    what each precision buys."""
    fp32 = {(r.model, r.stack): r.step_ms_median for r in reversed(rows) if r.precision == "fp32" and r.ok}
    out = []
    for row in rows:
        base = fp32.get((row.model, row.stack))
        if base and row.ok and row.step_ms_median:
            row = dataclasses.replace(row, speedup_vs_fp32=base / row.step_ms_median)
        out.append(row)
    return out


@dataclass(frozen=True)
class StepBenchMeta:
    """What a step-bench run's meta says beside its tables, as the views read it (a run stored before a key reads
    its default)."""

    batch: int | None = None  # the batch the run chose (a config's "auto"), else None: the config's
    batch_rule: str | None = None  # how it chose it
    steady_rule: str = ""
    cpu_load_note: str | None = None  # the machine was busy while it ran
    traces: Mapping[str, str | None] = field(default_factory=dict)  # a stack's Chrome trace, by stack
    trace_path: str | None = None  # a run stored before stacks: its one trace
    profile_measure: str = ""
    timing: str = ""
    cold_includes: str | None = None  # what the first steps pay for
    host_bound_warning: str | None = None

    @classmethod
    def from_run(cls, run: RunResult) -> StepBenchMeta:
        meta = run.meta
        return cls(**{f.name: meta[f.name] for f in dataclasses.fields(cls) if meta.get(f.name) is not None})

    @property
    def trace_files(self) -> Mapping[str, str | None]:
        """Each stack's trace ("" for the one trace of a run stored before stacks)."""
        return self.traces or {"": self.trace_path}

"""Where an imported trace's GPU time went and why its GPU idled, as the views read it from the stored meta: the
host's causes of the GPU's gaps (and of its time before each step's first kernel), the top operators with their
rates, the top modules, and the named patterns.

The trace engine (:mod:`core.workload.trace.host_gaps`, :mod:`core.workload.trace.ops`) derives these once and the
import stores them in the run's meta; :meth:`TraceBreakdown.from_meta` reads a stored one (a run stored before a
figure reads it as absent) and the page's tables read the fields. Torch-free.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Self

from core.rows.stored import known


@dataclass(frozen=True)
class TopOp:
    """An operator the host was inside during a cause's gaps."""

    op: str
    time_us: float = 0.0
    count: int = 0
    source: str | None = None  # the user's line, where the trace recorded stacks


@dataclass(frozen=True)
class GapCause:
    cause: str
    time_us: float = 0.0
    share: float | None = None  # of the gaps' time
    top_ops: tuple[TopOp, ...] = ()
    inner_op: TopOp | None = None  # before the first kernel: the innermost operator holding most of it

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Self:
        tops = tuple(TopOp(**known(TopOp, o)) for o in d.get("top_ops") or ())
        inner = d.get("inner_op")
        return cls(**known(cls, d, top_ops=tops, inner_op=inner and TopOp(**known(TopOp, inner))))


@dataclass(frozen=True)
class HostTime:
    """The host's time while the GPU idled, by cause: over the gaps (``gaps`` of them), or before each of ``steps``
    steps' first kernel."""

    causes: tuple[GapCause, ...] = ()
    gaps: int = 0
    gap_us: float = 0.0  # the gaps' time
    steps: int = 0
    time_us: float = 0.0  # the host's time before the steps' first kernels
    wall_us: float = 0.0  # of the steps' wall time

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> Self:
        d = d or {}
        return cls(**known(cls, d, causes=tuple(GapCause.from_dict(c) for c in d.get("causes") or ())))


@dataclass(frozen=True)
class OpTime:
    """An operator's GPU time, its kernels, copies and sets, and its achieved rate where recorded shapes give one."""

    op: str
    module: str = ""
    gpu_time_us: float = 0.0
    share: float | None = None  # of the GPU time
    kernels: int = 0
    copies: int | None = None  # None: a run stored before they were counted
    memsets: int | None = None
    calls: int = 0
    rated: bool = False  # a rate was derived (its tflops and tbps may still be None)
    tflops: float | None = None
    tbps: float | None = None
    peak_share: float | None = None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Self:
        return cls(**known(cls, d, rated="tflops" in d or "tbps" in d))


@dataclass(frozen=True)
class ModuleTime:
    module: str
    gpu_time_us: float = 0.0
    share: float | None = None
    kernels: int = 0
    copies: int | None = None
    memsets: int | None = None


@dataclass(frozen=True)
class OpPattern:
    """A named pattern (unfused attention, many tiny elementwise kernels): where, its time, what to do."""

    pattern: str
    ops: tuple[str, ...] = ()  # the operators named, with their kernel counts where the pattern counts them
    module: str | None = None
    time_us: float = 0.0
    kernels: int = 0
    advice: str = ""

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Self:
        ops = d.get("ops") or ()
        named = ops if d["pattern"] == "unfused attention" else [f"{o['op']} ×{o['kernels']:,}" for o in ops]
        return cls(**known(cls, d, ops=tuple(named)))


@dataclass(frozen=True)
class TraceBreakdown:
    host_gaps: HostTime = HostTime()
    host_before_first_kernel: HostTime = HostTime()
    ops: tuple[OpTime, ...] = ()
    modules: tuple[ModuleTime, ...] = ()
    op_patterns: tuple[OpPattern, ...] = ()
    ops_reference: str | None = None  # the card the rates are set against
    ops_attributed_share: float = 0.0  # of the GPU time, traced to an operator
    ops_gpu_time_us: float = 0.0

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any]) -> Self:
        return cls(
            HostTime.from_dict(meta.get("host_gaps")),
            HostTime.from_dict(meta.get("host_before_first_kernel")),
            tuple(OpTime.from_dict(r) for r in meta.get("ops") or ()),
            tuple(ModuleTime(**known(ModuleTime, r)) for r in meta.get("modules") or ()),
            tuple(OpPattern.from_dict(p) for p in meta.get("op_patterns") or ()),
            meta.get("ops_reference"),
            meta.get("ops_attributed_share") or 0.0,
            meta.get("ops_gpu_time_us") or 0.0,
        )

"""An imported trace's timeline figures as its views read them from the stored meta: the GPU's kernel time, busy
and idle over the span, the unions of compute, copies and communication and their overlaps, why the GPU idled,
how the launches went, what each kernel rule matched, and how the steps were found.

The trace engine (:mod:`core.workload.trace.timeline`) derives them once and the import stores them in the run's
meta; :meth:`TraceSummary.from_meta` reads a stored one (a key a run stored before a figure lacks takes its
default) and the text, the charts and the page read the fields. Torch-free.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Self

from core.result import RunResult
from core.rows.kernel_rules import KERNEL_WAIT_US, RuleCount
from core.rows.stored import known


@dataclass(frozen=True)
class IdleCauses:
    """The GPU's idle time by cause: the host was late to launch, back-to-back launch overhead, anything else."""

    host_wait_us: float = 0.0
    kernel_wait_us: float = 0.0
    other_wait_us: float = 0.0

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> Self | None:
        return cls(**known(cls, d)) if d else None

    @property
    def host_wait_share(self) -> float | None:
        """The host's share of the idle (HolisticTraceAnalysis' idle breakdown); None without gaps."""
        total = self.host_wait_us + self.kernel_wait_us + self.other_wait_us
        return self.host_wait_us / total if total else None


@dataclass(frozen=True)
class LaunchSummary:
    """Each activity matched to its launch call: the delays, how many were launch-bound (launched onto an idle GPU)
    or came from a CUDA/HIP graph, and HolisticTraceAnalysis' short kernels."""

    launched: int = 0
    launch_delay_p50_us: float = 0.0
    launch_delay_p90_us: float = 0.0
    launch_delay_p99_us: float = 0.0
    launch_delay_max_us: float = 0.0
    graph_launched: int = 0
    launch_bound: int = 0  # a run stored before the redefinition: HTA's short kernels
    launch_bound_share: float = 0.0
    launch_wait_us: float = 0.0
    shorter_than_launch_call: int | None = None  # None: a run stored before launch-bound was measured
    shorter_than_launch_call_share: float = 0.0

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> Self:
        return cls(**known(cls, d or {}))

    @property
    def measured_launch_bound(self) -> bool:
        """False for a run stored before launch-bound was measured: its launch_bound is HTA's short kernels."""
        return self.shorter_than_launch_call is not None


@dataclass(frozen=True)
class TraceSummary:
    file: str = ""
    events: int = 0
    device: int | None = None
    devices: tuple[int, ...] = ()
    streams: tuple[int, ...] = ()
    gpu_activities: int = 0
    note: str | None = None  # why there is nothing to show, where there is no GPU activity
    kernel_count: int = 0
    kernel_time_us: float = 0.0
    busy_us: float = 0.0
    span_us: float = 0.0
    idle_us: float = 0.0
    idle_share: float = 0.0
    compute_union_us: float = 0.0
    copy_union_us: float = 0.0
    communication_union_us: float = 0.0
    compute_and_communication_us: float = 0.0
    compute_and_copy_us: float = 0.0
    communication_and_copy_us: float = 0.0
    exposed_communication_us: float = 0.0
    kernel_wait_threshold_us: float = KERNEL_WAIT_US
    idle_causes: IdleCauses | None = None  # None: a run stored before the idle breakdown
    idle_on_device: bool = False  # the causes are gaps on the device timeline (else per stream, summed)
    idle_causes_summed_over_streams: IdleCauses | None = None
    launch: LaunchSummary = LaunchSummary()
    rules: tuple[RuleCount, ...] = ()
    step_basis: str = ""
    steps: int = 0

    @classmethod
    def from_run(cls, run: RunResult) -> Self:
        return cls.from_meta(run.meta)

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any]) -> Self:
        steps = meta.get("steps", 0)
        return cls(
            **known(
                cls,
                meta,
                devices=tuple(meta.get("devices") or ()),
                streams=tuple(meta.get("streams") or ()),
                idle_causes=IdleCauses.from_dict(meta.get("idle_causes")),
                idle_on_device=meta.get("idle_causes_basis") == "device",
                idle_causes_summed_over_streams=IdleCauses.from_dict(meta.get("idle_causes_summed_over_streams")),
                launch=LaunchSummary.from_dict(meta.get("launch")),
                rules=tuple(RuleCount(**known(RuleCount, r)) for r in meta.get("rules") or ()),
                steps=steps if isinstance(steps, int) else 0,
                kernel_wait_threshold_us=meta.get("kernel_wait_threshold_us", KERNEL_WAIT_US),
            )
        )


# --- a job's ranks ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StragglerOp:
    """An operator the rank of the most compute spent more GPU time in than the others."""

    op: str
    extra_us: float = 0.0
    gpu_time_us: float = 0.0
    median_gpu_time_us: float = 0.0


@dataclass(frozen=True)
class Straggler:
    """The rank of the most compute, held against the other ranks' median (``against``: "others"; a run stored when
    the median took every rank holds none)."""

    rank: int
    compute_us: float = 0.0
    median_compute_us: float = 0.0
    margin_us: float = 0.0
    margin_pct: float = 0.0
    against: str | None = None
    ops: tuple[StragglerOp, ...] = ()

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Self:
        ops = tuple(StragglerOp(**known(StragglerOp, o)) for o in d.get("ops") or ())
        return cls(**known(cls, d, ops=ops))


@dataclass(frozen=True)
class Verdict:
    """The rank holding the job back (None: none) and why."""

    rank: int | None
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True)
class Arrivals:
    """How the collectives were matched across the ranks, and the rank the others waited for."""

    matched: int = 0
    matched_by_kernel: int = 0
    inconsistent: int = 0
    sequences_left_out: int = 0
    last_rank: int | None = None
    last_arrivals: int = 0
    waited_us: float = 0.0

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> Self:
        return cls(**known(cls, d or {}))


@dataclass(frozen=True)
class RankSetSummary:
    """A job's ranks imported together: the straggler, the judgement, the matching, and what the files were."""

    straggler: Straggler
    straggler_rank: int | None = None
    verdict: Verdict | None = None  # None: a run stored before the judgement
    arrivals: Arrivals = Arrivals()
    ranks: int = 0  # how many ranks were read
    world_size: int | None = None
    backend: str | None = None
    file: str = ""
    files: tuple[str, ...] = ()
    measure: str = ""

    @property
    def judged(self) -> Verdict:
        """The verdict, or for a run stored before the judgement, the rank of the most compute."""
        return self.verdict or Verdict(self.straggler.rank, ("compute",))

    @classmethod
    def from_run(cls, run: RunResult) -> Self:
        return cls.from_meta(run.meta)

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any]) -> Self:
        verdict = meta.get("verdict")
        return cls(
            **known(
                cls,
                meta,
                straggler=Straggler.from_dict(meta.get("straggler") or {"rank": meta.get("straggler_rank")}),
                verdict=Verdict(verdict["rank"], tuple(verdict["reasons"])) if verdict else None,
                arrivals=Arrivals.from_dict(meta.get("arrivals")),
                ranks=len(meta.get("ranks") or ()),
                files=tuple(meta.get("files") or ()),
            )
        )

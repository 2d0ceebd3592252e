"""``step-bench``: how long one training step takes, where the time goes, and what precision and stack buy.

Times forward, backward, optimizer and the whole step of the course's Transformer (the shared
:class:`~core.transformer.training.TrainStep`) with a clock read at each phase boundary — CUDA events on a GPU
(one synchronize per step, like a loop that logs its loss), ``perf_counter`` on a CPU, whose ops
are synchronous. Each stack asked for (the course's, today's, or the switches in between:
:mod:`core.transformer.stack`) is timed on the same shape, one after the other in one fresh process: the first
steps timed before any warm-up show what a training loop meets on its first steps (:data:`COLD_INCLUDES`, and a
compiled stack's compilation), then warm-up until the step time is steady (:data:`~core.transformer.bench.
STEADY_RULE`), then the timed steps. Inputs are random token batches rotated between steps; no cache flush,
because consecutive training steps do not flush either. MFU is counted as the field counts it
(:mod:`core.transformer.mfu`), and ``torch.profiler`` then says how busy the device was and which kernels the time
went to, for a forward-only pass and for the full step, and writes a Chrome trace for Perfetto. With ``sweep`` it
times every precision mode instead; with ``models`` a size × precision grid.
"""

from __future__ import annotations

import gc
import gzip
import os
import shutil
import time
import uuid
from collections import defaultdict
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from core.errors import ConfigError, DoesNotFit, Unsupported
from core.experiment import Context, DeviceMetric, Experiment, Output, Progress
from core.hardware.clocks import ClockSampler, device_sampler
from core.hardware.specs import measurement_errors
from core.measure.kernels import ANNOTATION as _ANNOTATION
from core.measure.kernels import GROUPS, HOST_GAP_NAME, classify
from core.measure.stats import summarize
from core.paths import data_dir
from core.rows.step_bench import (
    ConfigRow,
    GroupTime,
    KernelTime,
    Measured,
    PhaseTimes,
    StackSummary,
    StepBenchTables,
    StepSample,
    with_speedups,
)
from core.transformer.bench import STEADY_RULE, Bench, WarmUp, warm_up
from core.transformer.mfu import HOST_BOUND_WARNING, Ceiling, host_bound, measured_ceiling, mfu_figures
from core.transformer.planner import (
    CUDA_CONTEXT_ALLOWANCE_BYTES,
    EstimateConfig,
    MeasuredStep,
    max_batch,
    need_bytes,
    peak,
)
from core.transformer.presets import (
    DEFAULT_BATCH,
    MODEL_NAMES,
    OPTIMIZERS,
    PRECISION_NOTES,
    PRECISIONS,
    OptimizerName,
    Precision,
    get_preset,
)
from core.transformer.stack import Stack, parse_stack

if TYPE_CHECKING:
    from core.measure.step_timer import PhaseTimer
    from core.transformer.flops import StepFlops

__all__ = ["GROUPS", "StepBenchConfig", "run"]

SCOPES = ("forward", "step")  # forward-only pass under no_grad, full training step
GRID_PRECISIONS: tuple[Precision, ...] = ("fp32", "bf16-autocast")
MAX_AUTO_BATCH = 1024
# What the steps timed before any warm-up pay for, per device kind (said on the chart and the page).
COLD_INCLUDES = {
    "cuda": (
        "the CUDA context already existed (the worker created it before the job); the first steps pay for "
        "cuBLAS handle and workspace creation (forward's thread, then autograd's thread at the first backward), "
        "lazy loading of kernel modules, first-shape GEMM heuristics, the caching allocator's first cudaMalloc "
        "calls and the optimizer's lazily created state"
    ),
    "cpu": (
        "the first steps pay for first-touch page faults of new allocations, the thread pool's start, "
        "oneDNN/BLAS first-call set-up and the optimizer's lazily created state"
    ),
}
COMPILE_INCLUDES = "a compiled stack's first step also compiles the forward and backward graphs"
KEEP_TRACES = 20  # newest trace files kept in <data dir>/traces; older ones are deleted


@dataclass(frozen=True)
class StepBenchConfig:
    model: str = field(default="tiny", metadata={"help": f"model: {', '.join(MODEL_NAMES)} or custom:…"})
    batch: int = field(
        default=0,
        metadata={"help": "sequences per step (0: the largest the planner says fits on a GPU; 4 on a CPU)"},
    )
    context: int = field(default=128, metadata={"help": "tokens per sequence"})
    precision: Precision = field(default="fp32", metadata={"help": "precision mode (a sweep or grid: precisions)"})
    optimizer: OptimizerName = field(default="adamw", metadata={"help": "optimizer"})
    stacks: tuple[str, ...] = field(
        default=("course",),
        metadata={
            "help": "stacks timed side by side: course, modern, or switches joined by + (sdpa, foreach, "
            "fused, compile, checkpoint); 'course,modern' is course vs modern"
        },
    )
    warmup_steps: int = field(default=3, metadata={"help": "warm-up steps at least (then until steady)"})
    max_warmup_steps: int = field(default=30, metadata={"help": "warm-up steps at most"})
    timed_steps: int = field(default=10, metadata={"help": "timed steps (median and spread over these)"})
    cold_steps: int = field(default=5, metadata={"help": "steps timed one by one before any warm-up"})
    profile_steps: int = field(default=2, metadata={"help": "profiled steps (busy share, kernels; 0: none)"})
    top_kernels: int = field(default=15, metadata={"help": "kernels listed per scope"})
    trace: bool = field(default=True, metadata={"help": "write a Chrome trace (gzip JSON) for Perfetto"})
    sweep: bool = field(default=False, metadata={"help": "time every precision mode (or those of --precisions)"})
    models: tuple[str, ...] = field(default=(), metadata={"help": "a size × precision grid over these models"})
    precisions: tuple[Precision, ...] = field(
        default=(), metadata={"help": "a sweep's or grid's precisions (default: all; a grid: fp32, bf16-autocast)"}
    )

    def __post_init__(self) -> None:
        for model in (self.model, *self.models):
            get_preset(model)
        limits = {
            "batch": (0, 4096),
            "context": (2, 16384),
            "warmup_steps": (0, 1000),
            "max_warmup_steps": (0, 1000),
            "timed_steps": (2, 10_000),
            "cold_steps": (0, 100),
            "profile_steps": (0, 10),
            "top_kernels": (1, 100),
        }
        for name, (lo, hi) in limits.items():
            value = getattr(self, name)
            if not lo <= value <= hi:
                raise ConfigError(f"{name} must be between {lo} and {hi}, got {value}")
        if self.max_warmup_steps < self.warmup_steps:
            raise ConfigError(f"max_warmup_steps {self.max_warmup_steps} is below warmup_steps {self.warmup_steps}")
        for precision in (self.precision, *self.precisions):
            if precision not in PRECISIONS:
                raise ConfigError(f"precision {precision!r} is not one of {', '.join(PRECISIONS)}")
        if self.optimizer not in OPTIMIZERS:
            raise ConfigError(f"optimizer {self.optimizer!r} is not one of {', '.join(OPTIMIZERS)}")
        if not self.stacks or len(self.stacks) > 8:
            raise ConfigError("stacks: give one to eight stacks (course, modern, or switches joined by +)")
        names = [parse_stack(s).name for s in self.stacks]
        if len(set(names)) < len(names):
            raise ConfigError(f"stacks: {', '.join(self.stacks)} names one stack twice")
        if self.sweep and self.models:
            raise ConfigError("a run is a sweep of precisions or a grid of models, not both")

    @property
    def stack_list(self) -> list[Stack]:
        return [parse_stack(s) for s in self.stacks]

    @property
    def run_precisions(self) -> tuple[Precision, ...]:
        """What a sweep or a grid steps through; a single run's one precision."""
        if self.sweep:
            return self.precisions or PRECISIONS
        if self.models:
            return self.precisions or GRID_PRECISIONS
        return (self.precision,)

    def setup(self, model: str, precision: str, stack: Stack, batch: int, target: str) -> EstimateConfig:
        """The step one configuration of the run times, as the planner reads it."""
        return EstimateConfig(
            model=model,
            precision=precision,  # pyright: ignore[reportArgumentType]
            optimizer=self.optimizer,
            batch=batch,
            context=self.context,
            target=target,  # pyright: ignore[reportArgumentType]
            **stack.setup_fields(),
        )


# --- shape and memory ---------------------------------------------------------------------------


def check_fits(setup: EstimateConfig, ctx: Context) -> None:
    """Refuse a step the memory planner says the device cannot hold (before the model is built)."""
    ctx.check_fits(
        need_bytes(setup),
        f"a {setup.precision} training step of {setup.model} (batch {setup.batch}, context {setup.context}, "
        f"stack {setup.stack.name}) by the memory planner",
    )


def runnable(cfg: StepBenchConfig, ctx: Context, info: dict) -> list[Precision]:
    from core.transformer.training import check_precision

    out = []
    for precision in cfg.run_precisions:
        try:
            check_precision(precision, ctx, info.get("bf16_supported", True))
        except Unsupported:
            continue
        out.append(precision)
    return out


def auto_batch(cfg: StepBenchConfig, model: str, precisions: list[Precision], ctx: Context) -> tuple[int, str]:
    """The batch every configuration of a model runs at, and why that one: the one asked for; on a GPU the largest
    the planner says fits every configuration (its 5 % margin and the CUDA context included); on a CPU the
    course's 4, where the largest that fits would take minutes a step."""
    if cfg.batch:
        return cfg.batch, "as asked"
    if not ctx.is_cuda:
        return (
            DEFAULT_BATCH,
            f"{DEFAULT_BATCH}, the lab's default (on a CPU the largest that fits would take minutes a step)",
        )
    from core.hardware.memory import budget
    from core.units import bytes_text

    limit = budget(ctx.device)
    fits = [
        max_batch(cfg.setup(model, p, s, 1, "cuda"), limit.bytes + CUDA_CONTEXT_ALLOWANCE_BYTES, MAX_AUTO_BATCH)
        for p in precisions or [cfg.precision]
        for s in cfg.stack_list
    ]
    return max(1, min(fits)), (
        f"the largest the planner says fits every configuration in the {bytes_text(limit.bytes)} free "
        f"(at most {MAX_AUTO_BATCH})"
    )


def _free(device: str) -> None:
    gc.collect()
    if device.startswith("cuda"):
        import torch

        torch.cuda.empty_cache()


def _reset_peak(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)


def memory_figures(setup: EstimateConfig, device: str) -> dict:
    """The step's measured allocator peak against the planner's (a GPU's counter; a CPU has none here)."""
    estimated = peak(setup).total_bytes
    if not device.startswith("cuda"):
        return {"peak_estimated_bytes": estimated, "peak_measured_bytes": None, "peak_error_pct": None}
    import torch

    measured = torch.cuda.max_memory_allocated(device)
    return {
        "peak_estimated_bytes": estimated,
        "peak_measured_bytes": measured,
        "peak_error_pct": 100.0 * (estimated - measured) / measured if measured else None,
    }


# --- derived numbers ----------------------------------------------------------------------------


def throughput(flops: StepFlops, step_ms: float) -> dict:
    """Tokens and model FLOPs per second at a step time."""
    return {
        "tokens_per_s": flops.tokens / (step_ms * 1e-3),
        "model_flops_per_step": flops.total,
        "achieved_tflops": flops.total / (step_ms * 1e-3) / 1e12,
    }


def step_figures(
    flops: StepFlops, step_ms: float, info: dict, precision: str, ceiling: Ceiling | None, what: str
) -> dict:
    """Throughput and the three MFUs of a step time."""
    out = throughput(flops, step_ms)
    return out | mfu_figures(out["achieved_tflops"], info, precision, ceiling, what)


def busy_fraction(events, items: list[tuple[str, str | None, str, float]], cuda: bool) -> float | None:
    """How much of the profiled full steps the device worked: a GPU's kernels, copies and memsets (their union)
    over the steps' wall time; a CPU's time inside ops (the steps' wall time less the host's time between ops)."""
    import numpy as np

    from core.measure.profiler import Ranges, device_activity
    from core.workload.trace.intervals import merged

    steps = [(a, b) for a, b, name in Ranges(events, "scope").spans if name == "step"]
    wall = sum(b - a for a, b in steps)
    if not wall:
        return None
    if not cuda:
        host = sum(us for scope, _, name, us in items if scope == "step" and name == HOST_GAP_NAME)
        total = sum(us for scope, _, _, us in items if scope == "step")
        return 1.0 - host / total if total else None
    acts = device_activity(events)
    busy = 0.0
    for a, b in steps:
        inside = [(max(s, a), min(e, b)) for s, e in acts if e > a and s < b]
        if inside:
            starts, ends = merged(np.array([s for s, _ in inside]), np.array([e for _, e in inside]))
            busy += float((ends - starts).sum())
    return busy / wall


# --- kernel breakdown ---------------------------------------------------------------------------


def breakdown_rows(items, steps: int, flops: StepFlops, top: int, stack: str) -> tuple[list[dict], dict]:
    """Kernel rows (top ``top`` per scope) and group rows (all kernels), in ms per step."""
    rows, totals = [], {}
    flop_parts = {
        "forward": (flops.forward, flops.softmax_forward_estimate),
        "step": (flops.total, flops.softmax_forward_estimate + flops.softmax_backward_estimate),
    }
    for scope in SCOPES:
        kernels: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0.0])
        for s, phase, name, us in items:
            if s == scope:
                entry = kernels[(name, classify(name, phase))]
                entry[0] += 1
                entry[1] += us
        total_us = sum(us for _, us in kernels.values())
        totals[scope] = total_us / 1e3 / steps
        ranked = sorted(kernels.items(), key=lambda kv: -kv[1][1])
        for rank, ((name, group), (count, us)) in enumerate(ranked[:top], start=1):
            rows.append(
                KernelTime(
                    stack, scope, rank, name, group, count / steps, us / 1e3 / steps, us / total_us if total_us else 0.0
                ).to_row()
            )
        by_group = defaultdict(float)
        for (_, group), (_, us) in kernels.items():
            by_group[group] += us
        matmul_flops, softmax_flops = flop_parts[scope]
        flop_share = {
            "matmul": matmul_flops / (matmul_flops + softmax_flops),
            "attention-softmax": softmax_flops / (matmul_flops + softmax_flops),
        }
        for group in GROUPS:
            ms, share = by_group[group] / 1e3 / steps, by_group[group] / total_us if total_us else 0.0
            rows.append(GroupTime(stack, scope, group, ms, share, flop_share.get(group)).to_row())
    return rows, totals


def profile_bench(bench: Bench, device: str, steps: int, scopes: tuple[str, ...] = SCOPES):
    """Profile ``steps`` passes of each scope (forward-only under no_grad, full step); returns the profiler."""
    from torch.profiler import ProfilerActivity, profile, record_function

    from core.measure.profiler import PhaseRanges
    from core.measure.step_timer import sync

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.startswith("cuda") else [])
    marks = PhaseRanges()
    with profile(activities=activities) as prof:
        for scope in scopes:
            for _ in range(steps):
                with record_function(f"{_ANNOTATION}scope:{scope}"):
                    try:
                        bench.step.run(*bench.next_batch(), marks, forward_only=scope == "forward")
                    finally:
                        marks.close()
                    sync(device)
    return prof


def traces_dir() -> Path:
    return data_dir() / "traces"


def save_trace(prof) -> dict:
    """Gzip the Chrome trace into the data directory (Perfetto opens .json.gz) and keep only the newest few."""
    folder = traces_dir()
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"step-bench-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:8]}"
    raw = folder / f"{stem}.json"
    prof.export_chrome_trace(str(raw))
    path = folder / f"{stem}.json.gz"
    with open(raw, "rb") as src, gzip.open(path, "wb", compresslevel=6) as dst:
        shutil.copyfileobj(src, dst)
    raw_bytes = raw.stat().st_size
    raw.unlink()
    for old in sorted(folder.glob("step-bench-*.json.gz"), key=os.path.getmtime)[:-KEEP_TRACES]:
        old.unlink(missing_ok=True)
    return {"trace_path": str(path), "trace_bytes": path.stat().st_size, "trace_json_bytes": raw_bytes}


def _profile(cfg: StepBenchConfig, ctx: Context, bench: Bench, stack: str) -> tuple[list[dict], dict]:
    """The kernel breakdown of profiled forward-only and full steps: its rows, its figures (busy, totals, trace)."""
    from core.measure.profiler import Ranges, attribute

    prof = profile_bench(bench, ctx.device, cfg.profile_steps)
    events = prof.events()
    items = attribute(events, ctx.is_cuda)
    kernel_rows, totals = breakdown_rows(items, cfg.profile_steps, bench.flops, cfg.top_kernels, stack)
    scopes = Ranges(events, "scope")
    busy = busy_fraction(events, items, ctx.is_cuda)
    figures = {
        "profiled_total_ms": totals,
        "scope_wall_ms": {s: scopes.total_us(s) / 1e3 / cfg.profile_steps for s in SCOPES},
        "busy": busy,
        "host_bound": host_bound(busy),
    }
    if cfg.trace:
        figures |= save_trace(prof)
        if ctx.is_cuda:
            figures |= own_trace_findings(figures["trace_path"])
    return kernel_rows, figures


OWN_TRACE_FINDINGS = 3


def own_trace_findings(path: str) -> dict:
    """The step's own trace read back as a user's trace is (:mod:`core.workload.trace.analysis`): what its findings
    say holds the step back — launch gaps, unfused element-wise kernels, written-out attention — in the same words."""
    from core.workload.findings import stored_findings
    from core.workload.trace.analysis import analyse
    from core.workload.trace.timeline import read_trace

    _, meta = analyse(read_trace(path), 10)
    return {
        "trace_findings": [
            {"kind": f.kind, "cause": f.cause, "text": f.text} for f in stored_findings(meta)[:OWN_TRACE_FINDINGS]
        ],
        "trace_busy": meta["busy_us"] / meta["span_us"] if meta.get("span_us") else None,
    }


# --- the experiment -----------------------------------------------------------------------------


def _device_info(ctx: Context) -> dict:
    from core.hardware.device import describe

    return describe(ctx.device)


def _ceiling(info: dict) -> Ceiling | None:
    """The best bf16 matmul the store holds for this device (read once a run)."""
    from core.store import RunStore

    try:
        return measured_ceiling(info, RunStore(read_only=True))
    except Exception:  # noqa: BLE001 - no store, or one that cannot be read: the figure is then not shown
        return None


def run(cfg: StepBenchConfig, ctx: Context):
    """The benchmark, with NVML sampling the GPU's clocks while it runs (summarised over the timed steps)."""
    with ExitStack() as stack:
        sampler = stack.enter_context(device_sampler(ctx.device)) if ctx.is_cuda else None
        return (yield from _run(cfg, ctx, sampler))


def _clocks(sampler: ClockSampler | None, t0_s: float) -> dict:
    return sampler.window(t0_s, time.perf_counter()) if sampler else {}


def _common(cfg: StepBenchConfig, ctx: Context, sampler: ClockSampler | None, info: dict) -> dict:
    """The meta of every mode."""
    import torch

    from core.measure.timing import cpu_load

    return ({} if ctx.is_cuda else cpu_load()) | {
        "timing": "CUDA events at each phase boundary, one synchronize per step"
        if ctx.is_cuda
        else "time.perf_counter at each phase boundary (CPU ops are synchronous)",
        "torch_threads": torch.get_num_threads(),
        "preset": get_preset(cfg.model).to_dict(),
        "cold_includes": COLD_INCLUDES["cuda" if ctx.is_cuda else "cpu"],
        "steady_rule": STEADY_RULE,
        "stacks": {s.name: s.describe() for s in cfg.stack_list},
        "precision_notes": {p: PRECISION_NOTES[p] for p in cfg.run_precisions},
        "mfu_convention": (
            "MFU: the model's FLOPs per second (6·N·tokens + the full s² attention matmuls, no recomputation) over "
            "the card's bf16 dense datasheet peak, whatever the precision, as nanoGPT, llm.c and torchtitan count; "
            "beside it over the best bf16 matmul measured on this device and over the precision's own unit"
        ),
        "host_bound_warning": HOST_BOUND_WARNING,
        "clocks_note": sampler.note
        if sampler
        else "clock sampling reads NVIDIA GPUs through NVML; not applicable to a CPU run",
    }


def _run(cfg: StepBenchConfig, ctx: Context, sampler: ClockSampler | None):
    info = _device_info(ctx)
    common = _common(cfg, ctx, sampler, info)
    ceiling = _ceiling(info)
    if cfg.sweep or cfg.models:
        return (yield from _configs(cfg, ctx, info, common, sampler, ceiling))
    return (yield from _single(cfg, ctx, info, common, sampler, ceiling))


# --- a single precision, its stacks side by side ------------------------------------------------


@dataclass
class _Timed:
    """One stack's timed steps: the samples and what the warm-up did."""

    samples: list[StepSample]
    warm: WarmUp
    timed_from: float


def _samples(bench: Bench, timer: PhaseTimer, steps: int, series: str, base: dict, first: int = 1) -> list[StepSample]:
    """``steps`` timed steps as samples (one per phase and step)."""
    return [
        StepSample(**base, series=series, step=first + i, phase=phase, ms=ms)
        for i, phases in enumerate(bench.timed(timer, steps))
        for phase, ms in phases.items()
    ]


def _stored(rows: list) -> tuple[dict, ...]:
    return tuple(r.to_row() for r in rows)


def _time_stack(cfg: StepBenchConfig, ctx: Context, bench: Bench, base: dict, at: int, total: int):
    """Cold steps, warm-up until steady, timed steps: a generator of progress (with the sample rows as they are
    timed) that returns what was timed."""
    from core.measure.step_timer import PhaseTimer

    timer, name = PhaseTimer(ctx.device), base["stack"]
    samples = _samples(bench, timer, cfg.cold_steps, "cold", base)
    yield Progress(at + cfg.cold_steps, total, f"{name}: first steps timed without warm-up", rows=_stored(samples))
    warm = warm_up(bench, timer, cfg.warmup_steps, cfg.max_warmup_steps)
    yield Progress(at + cfg.cold_steps, total, f"{name}: warmed up in {len(warm.step_ms)} steps")
    _reset_peak(ctx.device)
    timed_from = time.perf_counter()
    chunk = max(1, cfg.timed_steps // 10)
    for done in range(0, cfg.timed_steps, chunk):
        n = min(chunk, cfg.timed_steps - done)
        new = _samples(bench, timer, n, "warm", base, done + 1)
        samples += new
        yield Progress(at + cfg.cold_steps + done + n, total, f"{name}: timed step {done + n}", rows=_stored(new))
    return _Timed(samples, warm, timed_from)


def _ms(samples: list[StepSample], series: str, phase: str) -> list[float]:
    return [s.ms for s in samples if s.series == series and s.phase == phase]


def _summary(cfg, stack: Stack, info, ceiling, bench: Bench, timed: _Timed, base: dict):
    """Each phase over the warm steps, then the stack's summary: time, throughput, MFU, first step."""
    from core.transformer.training import PHASES

    samples = timed.samples
    phases = [
        PhaseTimes(**base, series="warm", phase=phase, ms=summarize(_ms(samples, "warm", phase), "ms_"))
        for phase in (*PHASES, "step")
    ]
    warm_ms = summarize(_ms(samples, "warm", "step"), "step_ms_")
    fwd, bwd = (summarize(_ms(samples, "warm", p))["median"] for p in ("forward", "backward"))
    first = (_ms(samples, "cold", "step") or timed.warm.step_ms or [None])[0]
    median = warm_ms["step_ms_median"]
    summary = StackSummary(
        **base,
        tokens_per_step=bench.flops.tokens,
        step_ms=warm_ms,
        **step_figures(bench.flops, median, info, cfg.precision, ceiling, f"the {stack.name} step"),
        backward_forward_ratio=bwd / fwd,
        first_step_ms=first,
        first_step_over_median=first / median if first else None,
        compile_s=(first - median) / 1e3 if first and stack.compile else None,
        **timed.warm.to_dict(),
    )
    return phases, summary


@dataclass
class _Stack:
    """One stack's stored rows: its samples, then the rest (phases, summary, kernels and groups, as stored), its summary, its
    trace's path and the model's FLOPs."""

    summary: StackSummary
    samples: list[dict]
    rows: list[dict]
    trace: str | None
    flops: dict


def _time_and_profile(cfg: StepBenchConfig, ctx: Context, setup: EstimateConfig, at: int, total: int, measure):
    """One stack timed, then (with profile steps) profiled: a generator of progress that returns a :class:`_Stack`
    (``measure``: the device's info, the clock sampler and the measured ceiling)."""
    info, sampler, ceiling = measure
    stack = setup.stack
    base = {"stack": stack.name, "switches": stack.setup_fields(), "precision": cfg.precision, "model": cfg.model}
    base |= {"batch": setup.batch, "context": cfg.context}
    bench = Bench.build(MeasuredStep(**setup.setup()), ctx.device)
    timed = yield from _time_stack(cfg, ctx, bench, base, at, total)
    phases, summary = _summary(cfg, stack, info, ceiling, bench, timed, base)
    summary = replace(summary, clocks=_clocks(sampler, timed.timed_from), **memory_figures(setup, ctx.device))
    kernel_rows, trace = [], None
    if cfg.profile_steps:
        yield Progress(
            at + cfg.cold_steps + cfg.timed_steps, total, f"{stack.name}: profiling {cfg.profile_steps} steps"
        )
        kernel_rows, figures = _profile(cfg, ctx, bench, stack.name)
        trace = figures.pop("trace_path", None)
        summary = replace(summary, profile=figures)
    samples = list(_stored(timed.samples))
    return _Stack(summary, samples, [*_stored(phases), summary.to_row(), *kernel_rows], trace, bench.flops.to_dict())


def _single(cfg: StepBenchConfig, ctx: Context, info: dict, common: dict, sampler, ceiling):
    from core.transformer.training import check_precision

    check_precision(cfg.precision, ctx, info.get("bf16_supported", True))
    batch, batch_rule = auto_batch(cfg, cfg.model, [cfg.precision], ctx)
    setups = [cfg.setup(cfg.model, cfg.precision, s, batch, "cuda" if ctx.is_cuda else "cpu") for s in cfg.stack_list]
    for setup in setups:  # every stack refused before any is built
        check_fits(setup, ctx)
    per_stack = cfg.cold_steps + cfg.timed_steps + 1
    total, rows, timed = per_stack * len(setups), [], []
    for i, setup in enumerate(setups):
        done = yield from _time_and_profile(cfg, ctx, setup, i * per_stack, total, (info, sampler, ceiling))
        timed.append(done)
        rows += done.samples + done.rows
        yield Progress((i + 1) * per_stack, total, f"{setup.stack.name}: done", rows=tuple(done.rows))
        _free(ctx.device)
    return Output(rows=rows, meta=common | _single_meta(cfg, ctx, batch, batch_rule, timed))


def _single_meta(cfg: StepBenchConfig, ctx: Context, batch: int, batch_rule: str, stacks: list[_Stack]) -> dict:
    meta = {
        "batch": batch,
        "batch_rule": batch_rule,
        "tokens_per_step": batch * cfg.context,
        "flops": stacks[-1].flops,  # the model's: the same for every stack
        "profile_steps": cfg.profile_steps,
        "measurement_errors": measurement_errors([s.summary.to_row() for s in stacks]),
        "profile_measure": "GPU time of the kernels, copies and memsets each op launched (sum of durations)"
        if ctx.is_cuda
        else "self CPU time of each op (sums to the profiled wall time)",
    }
    traces = {s.summary.stack_name: s.trace for s in stacks if cfg.profile_steps}
    if any(traces.values()):
        meta["traces"] = traces
        meta["trace_path"] = next(p for p in traces.values() if p)
    return meta


# --- a sweep of precisions, a grid of sizes -----------------------------------------------------


def _config_row(cfg: StepBenchConfig, ctx: Context, setup: EstimateConfig, measure, row: ConfigRow) -> ConfigRow:
    """One configuration warmed up until steady, timed and (with profile steps) profiled for its busy share: its
    row, or its status and reason where the device cannot run or hold it (``measure``: the device's info, the
    clock sampler and the measured ceiling)."""
    import torch

    from core.measure.profiler import attribute
    from core.measure.step_timer import PhaseTimer
    from core.transformer.training import check_precision

    info, sampler, ceiling = measure
    found: dict = {}
    try:
        check_precision(setup.precision, ctx, info.get("bf16_supported", True))
        check_fits(setup, ctx)
        bench = Bench.build(MeasuredStep(**setup.setup()), ctx.device)
        timer = PhaseTimer(ctx.device)
        warm = warm_up(bench, timer, cfg.warmup_steps, cfg.max_warmup_steps)
        _reset_peak(ctx.device)
        timed_from = time.perf_counter()
        step_ms = summarize([t["step"] for t in bench.timed(timer, cfg.timed_steps)], "step_ms_")
        found |= {"clocks": _clocks(sampler, timed_from), "memory": memory_figures(setup, ctx.device)}
        busy = None
        if cfg.profile_steps:
            events = profile_bench(bench, ctx.device, cfg.profile_steps, ("step",)).events()
            busy = busy_fraction(events, attribute(events, ctx.is_cuda), ctx.is_cuda)
        figures = step_figures(bench.flops, step_ms["step_ms_median"], info, setup.precision, ceiling, "the step")
        found |= {"status": "ok", "reason": None, "step_ms": step_ms, **figures, **warm.to_dict()}
        found |= {"busy": busy, "host_bound": host_bound(busy)}
        del bench
    except Unsupported as exc:
        found |= {"status": "unsupported", "reason": str(exc)}
    except DoesNotFit as exc:
        found |= {"status": "refused", "reason": str(exc)}
    except torch.OutOfMemoryError as exc:
        found |= {"status": "error", "reason": f"out of memory on {ctx.device_name}: {str(exc).splitlines()[0]}"}
    _free(ctx.device)
    return replace(row, **found)


def _configs(cfg: StepBenchConfig, ctx: Context, info: dict, common: dict, sampler, ceiling):
    """Every precision (a sweep) or every model × precision (a grid), each stack, at one batch per model."""
    kind, models = ("grid", cfg.models) if cfg.models else ("precision", (cfg.model,))
    ok_precisions = runnable(cfg, ctx, info)
    target = "cuda" if ctx.is_cuda else "cpu"
    plan = []
    for model in models:
        batch, rule = auto_batch(cfg, model, ok_precisions, ctx)
        plan += [(cfg.setup(model, p, s, batch, target), rule) for p in cfg.run_precisions for s in cfg.stack_list]
    _refuse_if_none_fits([setup for setup, _ in plan if setup.precision in ok_precisions], ctx)
    rows: list[ConfigRow] = []
    for i, (setup, rule) in enumerate(plan):
        yield Progress(i, len(plan), f"{setup.model} · {setup.precision} · {setup.stack.name}: timing")
        row = _config_row(cfg, ctx, setup, (info, sampler, ceiling), _config(kind, setup, rule))
        rows.append(row)
        yield Progress(i + 1, len(plan), f"{setup.model} · {setup.precision} · {row.status}", rows=(row.to_row(),))
    stored = [row.to_row() for row in with_speedups(rows)]
    return Output(rows=stored, meta=common | {"measurement_errors": measurement_errors(stored)})


def _config(kind: str, setup: EstimateConfig, rule: str) -> ConfigRow:
    """A configuration before it runs: what it times."""
    stack, params = setup.stack, get_preset(setup.model).param_count()
    return ConfigRow(
        kind=kind,
        stack=stack.name,
        switches=stack.setup_fields(),
        precision=setup.precision,
        model=setup.model,
        params=params,
        batch=setup.batch,
        context=setup.context,
        batch_rule=rule,
    )


def _refuse_if_none_fits(setups: list[EstimateConfig], ctx: Context) -> None:
    """A run none of whose runnable configurations fits is refused as a whole, naming the smallest need."""
    refused = []
    for setup in setups:
        try:
            check_fits(setup, ctx)
            return
        except DoesNotFit as exc:
            refused.append(exc)
    if refused:
        raise min(refused, key=lambda e: e.meta["refused"]["need_bytes"])


# --- the answer in words ----------------------------------------------------------------------


def _mfu_text(row: Measured) -> str:
    if row.mfu is None:
        return f"no MFU ({row.mfu_note or 'no datasheet peak'})"
    text = f"MFU {row.mfu:.1%} of the bf16 dense peak ({row.peak_tflops:g} TFLOPS)"
    if row.mfu_measured is not None:
        text += f", {row.mfu_measured:.1%} of the best bf16 matmul measured here"
    return text


def _config_text(row: StackSummary | ConfigRow, grid: bool) -> str:
    name = " · ".join(str(p) for p in (row.model if grid else None, row.precision, row.stack_name) if p)
    if isinstance(row, ConfigRow) and not row.ok:
        return f"{name}: {row.status} — {row.reason}"
    busy = f"; device busy {row.busy:.0%}" if row.busy is not None else ""
    return f"{name}: {row.step_ms_median:.2f} ms a step, {row.tokens_per_s:,.0f} tokens/s, {_mfu_text(row)}{busy}"


def answer_lines(rows: list[dict], meta: dict) -> list[str]:
    """Each configuration's time, tokens/s, MFU and busy share in one line, then the host-bound warning where a
    device was idle much of its step (a run stored before stacks: the course's)."""
    tables = StepBenchTables.from_rows(rows)
    picked, lines = tables.answered, []
    for r in picked:
        lines.append(_config_text(r, bool(tables.grid)))
        findings = r.trace_findings if isinstance(r, StackSummary) else []
        lines += [f"  its trace, read as an imported one: {f.text}" for f in findings]
    bound = [r for r in picked if r.host_bound]
    if bound:
        names = ", ".join(f"{r.precision} · {r.stack}" for r in bound)
        lines.append(f"{meta.get('host_bound_warning') or HOST_BOUND_WARNING} ({names})")
    return lines


EXPERIMENTS = [
    Experiment(
        name="step-bench",
        title="Step benchmark",
        config_type=StepBenchConfig,
        run=run,
        description=(__doc__ or "").partition("\n")[0],
        fresh_process=True,
        device_metric=DeviceMetric("tokens_per_s", ("kind", "precision", "stack"), "tokens/s"),
        answer=answer_lines,
        text_kinds=("summary", "precision", "grid", "group", "kernel"),
    )
]

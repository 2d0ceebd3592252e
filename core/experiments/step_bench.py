"""``step-bench``: how long one training step takes, where the time goes, and what precision buys.

Times forward, backward, optimizer and the whole step of the course's Transformer (the shared
:class:`~core.transformer.training.TrainStep`) with a clock read at each phase boundary — CUDA events on a GPU
(one synchronize per step, like a loop that logs its loss), ``perf_counter`` on a CPU, whose ops
are synchronous. It runs in a fresh process so the first steps, timed before any warm-up, show
the real first-step cost — not the CUDA context, which the worker created before the job (it asked the
GPU for its description), but everything a training loop meets on its first steps (:data:`COLD_INCLUDES`).
Inputs are random
token batches rotated between steps; no cache flush, because consecutive training steps do not
flush either. ``torch.profiler`` then attributes kernel time (GPU) or self CPU time (CPU) to
groups, for a forward-only pass and for the full step, and writes a Chrome trace for Perfetto.
With ``sweep`` it times every precision mode instead.
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from core.errors import ConfigError, DoesNotFit, Unsupported
from core.experiment import Context, DeviceMetric, Experiment, Output, Progress
from core.hardware.clocks import ClockSampler, device_sampler
from core.hardware.specs import above_peak_error, device_peak, measurement_errors
from core.measure.kernels import ANNOTATION as _ANNOTATION
from core.measure.kernels import GROUPS, classify
from core.measure.stats import summarize
from core.paths import data_dir
from core.transformer.planner import EstimateConfig, need_bytes
from core.transformer.presets import (
    DEFAULT_BATCH,
    DTYPE_FOR_PRECISION,
    OPTIMIZERS,
    PRECISIONS,
    OptimizerName,
    Precision,
    get_preset,
)

if TYPE_CHECKING:
    import torch

    from core.measure.step_timer import PhaseTimer
    from core.transformer.flops import StepFlops
    from core.transformer.training import TrainStep

SCOPES = ("forward", "step")  # forward-only pass under no_grad, full training step
ROTATED_BATCHES = 4
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
KEEP_TRACES = 20  # newest trace files kept in <data dir>/traces; older ones are deleted


@dataclass(frozen=True)
class StepBenchConfig:
    model: str = field(default="tiny", metadata={"help": "model preset"})
    batch: int = field(default=DEFAULT_BATCH, metadata={"help": "sequences per step"})
    context: int = field(default=128, metadata={"help": "tokens per sequence"})
    precision: Precision = field(default="fp32", metadata={"help": "precision mode (ignored with --sweep)"})
    optimizer: OptimizerName = field(default="adamw", metadata={"help": "optimizer"})
    warmup_steps: int = field(default=3, metadata={"help": "untimed steps before the timed ones"})
    timed_steps: int = field(default=10, metadata={"help": "timed steps (median and spread over these)"})
    cold_steps: int = field(default=5, metadata={"help": "steps timed one by one before any warm-up"})
    profile_steps: int = field(default=2, metadata={"help": "profiled steps per scope (0: no kernel breakdown)"})
    top_kernels: int = field(default=15, metadata={"help": "kernels listed per scope"})
    trace: bool = field(default=True, metadata={"help": "write a Chrome trace (gzip JSON) for Perfetto"})
    sweep: bool = field(default=False, metadata={"help": "time every precision mode instead of profiling one"})

    def __post_init__(self) -> None:
        get_preset(self.model)
        limits = {
            "batch": (1, 4096),
            "context": (2, 16384),
            "warmup_steps": (0, 1000),
            "timed_steps": (2, 10_000),
            "cold_steps": (0, 100),
            "profile_steps": (0, 10),
            "top_kernels": (1, 100),
        }
        for name, (lo, hi) in limits.items():
            value = getattr(self, name)
            if not lo <= value <= hi:
                raise ConfigError(f"{name} must be between {lo} and {hi}, got {value}")
        if self.precision not in PRECISIONS:
            raise ConfigError(f"precision {self.precision!r} is not one of {', '.join(PRECISIONS)}")
        if self.optimizer not in OPTIMIZERS:
            raise ConfigError(f"optimizer {self.optimizer!r} is not one of {', '.join(OPTIMIZERS)}")


# --- timing -------------------------------------------------------------------------------------


@dataclass
class Bench:
    """A model, its optimizer and step, and rotated random batches, ready to time."""

    step: TrainStep
    batches: list[tuple[torch.Tensor, torch.Tensor]]
    flops: StepFlops
    i: int = 0

    def next_batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        self.i += 1
        return self.batches[self.i % len(self.batches)]


def check_fits(cfg: StepBenchConfig, precision: Precision, ctx: Context) -> None:
    """Refuse a step the memory planner says the device cannot hold (before the model is built)."""
    plan_cfg = EstimateConfig(
        model=cfg.model,
        precision=precision,
        optimizer=cfg.optimizer,
        batch=cfg.batch,
        context=cfg.context,
        target="cuda" if ctx.is_cuda else "cpu",
    )
    ctx.check_fits(
        need_bytes(plan_cfg),
        f"a {precision} training step of {cfg.model} (batch {cfg.batch}, context {cfg.context}) by the memory planner",
    )


def make_bench(cfg: StepBenchConfig, precision: str, device: str) -> Bench:
    import torch

    from core.transformer.flops import count_step_flops
    from core.transformer.model import build_model, random_batch
    from core.transformer.training import TrainStep, make_optimizer, param_dtype

    preset = get_preset(cfg.model)
    torch.manual_seed(0)
    model = build_model(preset, cfg.context, device, param_dtype(precision))
    gen = torch.Generator(device=device).manual_seed(1)
    batches = [random_batch(cfg.batch, cfg.context, preset.vocab_size, device, gen) for _ in range(ROTATED_BATCHES)]
    step = TrainStep(model, make_optimizer(cfg.optimizer, model.parameters()), precision, device)
    return Bench(step, batches, count_step_flops(model, cfg.batch, cfg.context))


def timed_series(bench: Bench, timer: PhaseTimer, steps: int, series: str, precision: str) -> list[dict]:
    """``steps`` timed steps as raw sample rows (one per phase and step)."""
    rows = []
    for i in range(steps):
        for phase, ms in timer.time_step(bench.step, *bench.next_batch()).items():
            rows.append(
                {"kind": "sample", "series": series, "precision": precision, "step": i + 1, "phase": phase, "ms": ms}
            )
    return rows


def warm_up(bench: Bench, steps: int, device: str) -> None:
    from core.measure.step_timer import sync

    for _ in range(steps):
        bench.step.run(*bench.next_batch())
    sync(device)


def samples(rows: list[dict], series: str, phase: str) -> list[float]:
    return [r["ms"] for r in rows if r["kind"] == "sample" and r["series"] == series and r["phase"] == phase]


# --- derived numbers ----------------------------------------------------------------------------


def peak_tflops(device_info: dict, precision: str) -> tuple[float | None, str | None]:
    """Datasheet dense peak of the unit the precision's matmuls run on, or (None, why not)."""
    peak, why = device_peak(device_info, DTYPE_FOR_PRECISION[precision])
    return peak, (f"{why}, so no MFU" if why else None)


def throughput(flops: StepFlops, step_ms: float, peak: float | None, what: str = "the training step") -> dict:
    achieved = flops.total / (step_ms * 1e-3) / 1e12
    error = above_peak_error(achieved, peak, what)
    return {
        "tokens_per_s": flops.tokens / (step_ms * 1e-3),
        "model_flops_per_step": flops.total,
        "achieved_tflops": achieved,
        "mfu": achieved / peak if peak else None,
        "above_peak": error is not None,
        "measurement_error": error,
    }


# --- kernel breakdown ---------------------------------------------------------------------------


def breakdown_rows(items, steps: int, flops: StepFlops, top: int) -> tuple[list[dict], dict]:
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
                {
                    "kind": "kernel",
                    "scope": scope,
                    "rank": rank,
                    "name": name,
                    "group": group,
                    "count_per_step": count / steps,
                    "ms_per_step": us / 1e3 / steps,
                    "share": us / total_us if total_us else 0.0,
                }
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
            rows.append(
                {
                    "kind": "group",
                    "scope": scope,
                    "group": group,
                    "ms_per_step": by_group[group] / 1e3 / steps,
                    "share": by_group[group] / total_us if total_us else 0.0,
                    "flops_share": flop_share.get(group),
                }
            )
    return rows, totals


def profile_bench(bench: Bench, device: str, steps: int):
    """Profile ``steps`` forward-only passes, then ``steps`` full steps; returns the profiler."""
    from torch.profiler import ProfilerActivity, profile, record_function

    from core.measure.profiler import PhaseRanges
    from core.measure.step_timer import sync

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.startswith("cuda") else [])
    marks = PhaseRanges()
    with profile(activities=activities) as prof:
        for scope, forward_only in (("forward", True), ("step", False)):
            for _ in range(steps):
                with record_function(f"{_ANNOTATION}scope:{scope}"):
                    try:
                        bench.step.run(*bench.next_batch(), marks, forward_only=forward_only)
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


# --- the experiment -----------------------------------------------------------------------------


def _device_info(ctx: Context) -> dict:
    from core.hardware.device import describe

    return describe(ctx.device)


def _free(device: str) -> None:
    gc.collect()
    if device.startswith("cuda"):
        import torch

        torch.cuda.empty_cache()


def run(cfg: StepBenchConfig, ctx: Context):
    """The benchmark, with NVML sampling the GPU's clocks while it runs (summarised over the timed steps)."""
    with ExitStack() as stack:
        sampler = stack.enter_context(device_sampler(ctx.device)) if ctx.is_cuda else None
        return (yield from _run(cfg, ctx, sampler))


def _clocks(sampler: ClockSampler | None, t0_s: float) -> dict:
    return sampler.window(t0_s, time.perf_counter()) if sampler else {}


def _common(cfg: StepBenchConfig, ctx: Context, sampler: ClockSampler | None) -> dict:
    """The meta of a single run and of a sweep alike."""
    import torch

    from core.measure.timing import cpu_load

    return ({} if ctx.is_cuda else cpu_load()) | {
        "timing": "CUDA events at each phase boundary, one synchronize per step"
        if ctx.is_cuda
        else "time.perf_counter at each phase boundary (CPU ops are synchronous)",
        "torch_threads": torch.get_num_threads(),
        "preset": get_preset(cfg.model).to_dict(),
        "tokens_per_step": cfg.batch * cfg.context,
        "cold_includes": COLD_INCLUDES["cuda" if ctx.is_cuda else "cpu"],
        "clocks_note": sampler.note
        if sampler
        else "clock sampling reads NVIDIA GPUs through NVML; not applicable to a CPU run",
    }


def _summary(cfg: StepBenchConfig, info: dict, flops: StepFlops, rows: list[dict]) -> list[dict]:
    """One row per phase over the warm steps, then the step's summary: time, throughput, MFU, first step."""
    from core.transformer.training import PHASES

    out = [
        {
            "kind": "phase",
            "series": "warm",
            "precision": cfg.precision,
            "phase": phase,
            **summarize(samples(rows, "warm", phase), "ms_"),
        }
        for phase in (*PHASES, "step")
    ]
    peak, peak_note = peak_tflops(info, cfg.precision)
    warm_ms = summarize(samples(rows, "warm", "step"), "step_ms_")
    fwd, bwd = (summarize(samples(rows, "warm", p))["median"] for p in ("forward", "backward"))
    cold = samples(rows, "cold", "step")
    summary = {
        "kind": "summary",
        "precision": cfg.precision,
        "tokens_per_step": flops.tokens,
        **warm_ms,
        **throughput(flops, warm_ms["step_ms_median"], peak),
        "peak_tflops": peak,
        "peak_unit": DTYPE_FOR_PRECISION[cfg.precision],
        "mfu_note": peak_note,
        "backward_forward_ratio": bwd / fwd,
        "first_step_ms": cold[0] if cold else None,
        "first_step_over_median": cold[0] / warm_ms["step_ms_median"] if cold else None,
    }
    return [*out, summary]


def _profile(cfg: StepBenchConfig, ctx: Context, bench: Bench) -> tuple[list[dict], dict]:
    """The kernel breakdown of profiled forward-only and full steps: its rows and its meta."""
    from core.measure.profiler import Ranges, attribute

    prof = profile_bench(bench, ctx.device, cfg.profile_steps)
    events = prof.events()
    kernel_rows, totals = breakdown_rows(
        attribute(events, ctx.is_cuda), cfg.profile_steps, bench.flops, cfg.top_kernels
    )
    scopes = Ranges(events, "scope")
    meta = {
        "profiled_total_ms": totals,
        "profile_steps": cfg.profile_steps,
        "scope_wall_ms": {s: scopes.total_us(s) / 1e3 / cfg.profile_steps for s in SCOPES},
        "profile_measure": "GPU time of the kernels, copies and memsets each op launched (sum of durations)"
        if ctx.is_cuda
        else "self CPU time of each op (sums to the profiled wall time)",
    }
    if cfg.trace:
        meta |= save_trace(prof)
    return kernel_rows, meta


def _run(cfg: StepBenchConfig, ctx: Context, sampler: ClockSampler | None):
    from core.measure.step_timer import PhaseTimer
    from core.transformer.training import check_precision

    info = _device_info(ctx)
    common = _common(cfg, ctx, sampler)
    if cfg.sweep:
        return (yield from _sweep(cfg, ctx, info, common, sampler))
    check_precision(cfg.precision, ctx, info.get("bf16_supported", True))
    check_fits(cfg, cfg.precision, ctx)
    bench = make_bench(cfg, cfg.precision, ctx.device)
    timer = PhaseTimer(ctx.device)
    total = cfg.cold_steps + cfg.timed_steps + (1 if cfg.profile_steps else 0)
    rows = timed_series(bench, timer, cfg.cold_steps, "cold", cfg.precision)
    yield Progress(cfg.cold_steps, total, "first steps timed without warm-up", rows=tuple(rows))
    warm_up(bench, cfg.warmup_steps, ctx.device)
    timed_from = time.perf_counter()
    chunk = max(1, cfg.timed_steps // 10)
    for done in range(0, cfg.timed_steps, chunk):
        n = min(chunk, cfg.timed_steps - done)
        new = timed_series(bench, timer, n, "warm", cfg.precision)
        for r in new:
            r["step"] += done
        rows += new
        yield Progress(cfg.cold_steps + done + n, total, f"timed step {done + n}/{cfg.timed_steps}", rows=tuple(new))
    rows += _summary(cfg, info, bench.flops, rows)
    rows[-1] |= _clocks(sampler, timed_from)
    meta = common | {"flops": bench.flops.to_dict(), "measurement_errors": measurement_errors([rows[-1]])}
    if cfg.profile_steps:
        yield Progress(total - 1, total, f"profiling {cfg.profile_steps} forward-only and full steps")
        kernel_rows, profiled = _profile(cfg, ctx, bench)
        meta |= profiled
        rows += kernel_rows
        yield Progress(total, total, "kernel breakdown done", rows=tuple(kernel_rows))
    return Output(rows=rows, meta=meta)


def _refusals(cfg: StepBenchConfig, ctx: Context, info: dict) -> dict[str, DoesNotFit]:
    """The precisions this device runs but cannot hold; all of them refused refuses the sweep."""
    from core.transformer.training import check_precision

    refused, runnable = {}, 0
    for precision in PRECISIONS:
        try:
            check_precision(precision, ctx, info.get("bf16_supported", True))
        except Unsupported:
            continue
        runnable += 1
        try:
            check_fits(cfg, precision, ctx)
        except DoesNotFit as exc:
            refused[precision] = exc
    if refused and len(refused) == runnable:
        raise min(refused.values(), key=lambda e: e.meta["refused"]["need_bytes"])  # the smallest need, named
    return refused


def _sweep(cfg: StepBenchConfig, ctx: Context, info: dict, common: dict, sampler: ClockSampler | None):
    import torch

    from core.measure.step_timer import PhaseTimer
    from core.transformer.training import check_precision

    rows: list[dict] = []
    total = len(PRECISIONS)
    refused = _refusals(cfg, ctx, info)
    for i, precision in enumerate(PRECISIONS):
        row = {"kind": "precision", "precision": precision, "peak_unit": DTYPE_FOR_PRECISION[precision]}
        flops: StepFlops | None = None
        try:
            check_precision(precision, ctx, info.get("bf16_supported", True))
            if precision in refused:
                raise refused[precision]
            bench = make_bench(cfg, precision, ctx.device)
            warm_up(bench, cfg.warmup_steps, ctx.device)
            timed_from = time.perf_counter()
            new = timed_series(bench, PhaseTimer(ctx.device), cfg.timed_steps, "warm", precision)
            row |= _clocks(sampler, timed_from)
            flops = bench.flops
            del bench
        except Unsupported as exc:
            row |= {"status": "unsupported", "reason": str(exc)}
            new = []
        except DoesNotFit as exc:
            row |= {"status": "refused", "reason": str(exc)}
            new = []
        except torch.OutOfMemoryError as exc:
            row |= {"status": "error", "reason": f"out of memory on {ctx.device_name}: {str(exc).splitlines()[0]}"}
            new = []
        _free(ctx.device)
        if new:
            assert flops is not None  # measured along with new
            step_ms = summarize([r["ms"] for r in new if r["phase"] == "step"], "step_ms_")
            peak, note = peak_tflops(info, precision)
            row |= {
                "status": "ok",
                "reason": None,
                **step_ms,
                **throughput(flops, step_ms["step_ms_median"], peak, f"the {precision} step"),
                "peak_tflops": peak,
                "mfu_note": note,
            }
        rows += new + [row]
        yield Progress(i + 1, total, f"{precision}: {row['status']}", rows=tuple(new + [row]))
    base = next(
        (r for r in rows if r["kind"] == "precision" and r["precision"] == "fp32" and r["status"] == "ok"), None
    )
    for r in rows:
        if r["kind"] == "precision" and r["status"] == "ok" and base:
            r["speedup_vs_fp32"] = base["step_ms_median"] / r["step_ms_median"]
    return Output(rows=rows, meta=common | {"measurement_errors": measurement_errors(rows)})


EXPERIMENTS = [
    Experiment(
        name="step-bench",
        title="Step benchmark",
        config_type=StepBenchConfig,
        run=run,
        description=(__doc__ or "").partition("\n")[0],
        fresh_process=True,
        device_metric=DeviceMetric("tokens_per_s", ("kind", "precision"), "tokens/s"),
    )
]

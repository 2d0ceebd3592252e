"""``matmul-soak``: one matmul shape run for a fixed time — throughput per second, burst vs sustained, clocks.

The operands, dtype rules and FLOP count are matmul's (:mod:`core.measure.gemm`); the sampling
is :mod:`core.measure.soak`: after a short warm-up, calls are queued in batches of about 0.05 s with a
device synchronisation after each, and a sample closes at the first synchronisation past each second.
Where NVML is readable, each sample carries the SM clock, temperature, power and throttle reasons
sampled while it ran. The run's meta holds the burst figure, the sustained figure and the drop
between them, flagged over a threshold.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Generator
from dataclasses import dataclass, field

from core.errors import ConfigError
from core.experiment import Context, DeviceMetric, Experiment, Output, Progress
from core.hardware import device as devices
from core.hardware import dtypes
from core.hardware.clocks import ClockSampler, device_sampler
from core.measure import soak
from core.measure.gemm import MAX_DIM, Shape, dtype_support, flops, make_operands, memory_needed_bytes, shape_problem
from core.rows.matmul import TFLOPS
from core.rows.matmul_soak import SoakSample, SoakSummary
from core.units import throughput_unit

GPU_SIZE, CPU_SIZE = 8192, 512  # large enough to be compute-bound, small enough for many calls a second
GPU_DURATION_S, CPU_DURATION_S = 60.0, 20.0
MIN_DURATION_S, MAX_DURATION_S = 2.0, 1800.0  # two samples at least; within the job's one-hour limit


@dataclass(frozen=True)
class SoakConfig:
    dtype: str = field(
        default="", metadata={"help": f"one of {', '.join(dtypes.NAMES)}; empty = bf16 on a GPU, fp32 on a CPU"}
    )
    size: int = field(default=0, metadata={"help": f"M = N = K; 0 = GPU {GPU_SIZE}, CPU {CPU_SIZE}"})
    duration_s: float = field(
        default=0.0,
        metadata={
            "help": f"seconds of sampling, {MIN_DURATION_S:g}…{MAX_DURATION_S:g}; 0 = GPU {GPU_DURATION_S:g}, "
            f"CPU {CPU_DURATION_S:g}"
        },
    )
    burst_s: float = field(
        default=0.0,
        metadata={
            "help": f"burst = the best sample begun in the first BURST_S seconds, at most half the run; "
            f"0 = {soak.BURST_S:g} s, or a quarter of a shorter run"
        },
    )
    drop_threshold_pct: float = field(
        default=soak.DROP_THRESHOLD_PCT,
        metadata={"help": "flag a sustained figure more than this many percent below the burst"},
    )
    seed: int = field(default=0, metadata={"help": "random seed of the inputs"})

    def __post_init__(self) -> None:
        if self.dtype and self.dtype not in dtypes.NAMES:
            raise ConfigError(
                f"dtype: {self.dtype!r} not one of {', '.join(dtypes.NAMES)} (or empty for the device default)"
            )
        if self.size and not 1 <= self.size <= MAX_DIM:
            raise ConfigError(f"size: must be 1…{MAX_DIM} (or 0 for the device default), got {self.size}")
        if self.duration_s and not MIN_DURATION_S <= self.duration_s <= MAX_DURATION_S:
            raise ConfigError(
                f"duration_s: must be {MIN_DURATION_S:g}…{MAX_DURATION_S:g} seconds (or 0 for the device default), "
                f"got {self.duration_s:g}"
            )
        if self.burst_s != 0 and not self.burst_s > 0:
            raise ConfigError(f"burst_s: must be more than 0 seconds (or 0 for the default), got {self.burst_s:g}")
        if self.burst_s and self.duration_s:
            check_burst(self.burst_s, self.duration_s)
        if not 0 < self.drop_threshold_pct < 100:
            raise ConfigError(f"drop_threshold_pct: must be between 0 and 100, got {self.drop_threshold_pct:g}")


def check_burst(burst_s: float, duration_s: float) -> None:
    """The burst window must leave the second half of the run to the sustained figure."""
    if burst_s > duration_s / 2:
        raise ConfigError(
            f"burst_s: {burst_s:g} s is more than half of the {duration_s:g}-s run; the sustained figure is "
            f"the median of the second half: lower burst_s or raise duration_s"
        )


@dataclass(frozen=True)
class Plan:
    """The config with the device's defaults filled in."""

    dtype: str
    size: int
    duration_s: float
    burst_s: float


def plan_for(cfg: SoakConfig, is_cuda: bool) -> Plan:
    duration = cfg.duration_s or (GPU_DURATION_S if is_cuda else CPU_DURATION_S)
    burst = cfg.burst_s or min(soak.BURST_S, duration / 4)
    check_burst(burst, duration)
    return Plan(
        cfg.dtype or ("bf16" if is_cuda else "fp32"), cfg.size or (GPU_SIZE if is_cuda else CPU_SIZE), duration, burst
    )


def cpu_dtype_note(dtype: str) -> str | None:
    """bf16/fp16 on a CPU run as the CPU runs them: say whether it lists native support (Linux flags)."""
    if dtype not in ("bf16", "fp16"):
        return None
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        flags = []
    native = [x for x in ("avx512_bf16", "amx_bf16", "avx512_fp16", "amx_fp16") if x in flags]
    if native:
        return f"{dtype} on this CPU: it lists {', '.join(native)}, so oneDNN can run {dtype} matmuls natively"
    return (
        f"{dtype} on this CPU: it lists no avx512_bf16/amx_bf16/avx512_fp16/amx_fp16 flag, so {dtype} matmuls "
        f"are converted in software and usually run slower than fp32 — measured as they are"
    )


def run(cfg: SoakConfig, ctx: Context, timer: soak.BatchTimer | None = None) -> Generator[Progress, None, Output]:
    """``timer`` replaces the device's :class:`~core.measure.soak.LapTimer` (tests inject laps through it)."""
    import torch

    from core.transformer.training import matmul_precision

    plan = plan_for(cfg, ctx.is_cuda)
    desc = devices.describe(ctx.device)
    shape = Shape(plan.size, plan.size, plan.size, label="square")
    reason = dtype_support(plan.dtype, desc) or shape_problem(plan.dtype, shape, ctx.is_cuda)
    if reason:
        raise ctx.unsupported(reason)
    ctx.check_fits(memory_needed_bytes(plan.dtype, shape, 0), f"a {plan.dtype} {plan.size}³ matmul")
    unit = throughput_unit(ctx.is_cuda, ops=dtypes.get(plan.dtype).integer)
    work = flops(shape.m, shape.n, shape.k)
    meta = _setup_meta(plan, ctx, work, unit[0], torch.get_num_threads(), bool(timer))
    sampler: ClockSampler | None = device_sampler(ctx.device) if ctx.is_cuda else None
    samples: list[SoakSample] = []
    total = math.ceil(plan.duration_s)
    with matmul_precision(plan.dtype):  # TF32 for tf32 alone
        ops = make_operands(plan.dtype, shape, ctx.device, torch.Generator(ctx.device).manual_seed(cfg.seed))
        if sampler:
            sampler.__enter__()
        try:
            yield Progress(0, total, f"{plan.dtype} {plan.size}³: warming up")
            lap = timer or soak.LapTimer(ops.op, _sync(ctx.device))
            try:
                meta["warmup"] = soak.warm_up(lap)
            except soak.TooSlow as exc:
                raise ConfigError(f"size: {exc} on {ctx.device_name}; choose a smaller size") from None
            for interval in soak.intervals(lap, plan.duration_s, meta["warmup"]["per_call_s"]):
                sample = SoakSample.of(interval, plan.dtype, plan.size, work)
                if sampler:
                    now = time.perf_counter()
                    sample = dataclasses.replace(sample, clocks=sampler.window(now - interval.seconds, now))
                samples.append(sample)
                row = sample.to_row()
                yield Progress(min(interval.second, total), total, _message(sample, unit), rows=(row,))
        finally:
            if sampler:
                sampler.__exit__(None, None, None)
                meta["clocks_note"] = sampler.note
                meta |= sampler.limits  # the power limit and boost ceiling each sample's clocks are read against
    summary = _summary(samples, plan, cfg, unit, meta)
    return Output(rows=[s.to_row() for s in samples], meta=meta | (summary.to_meta() if summary else {}))


def _setup_meta(plan: Plan, ctx: Context, work: int, unit: str, threads: int, injected: bool) -> dict:
    """What the run's meta says before the soak starts: the plan, the timer and, on a CPU, its load and why it
    has no clocks."""
    from core.measure.timing import cpu_load

    meta: dict = {
        "dtype": plan.dtype,
        "size": plan.size,
        "duration_s": plan.duration_s,
        "flops_per_call": work,
        "unit": unit,
        "torch_threads": threads,
        "timer": "injected"
        if injected
        else f"time.perf_counter after {'torch.cuda.synchronize' if ctx.is_cuda else 'each batch'}",
    }
    if not ctx.is_cuda:
        meta |= cpu_load()
        meta["clocks_note"] = (
            "SM clock, temperature, power and throttle reasons come from NVIDIA's NVML: a CPU has none"
        )
        if note := cpu_dtype_note(plan.dtype):
            meta["dtype_note"] = note
    return meta


def _summary(
    samples: list[SoakSample], plan: Plan, cfg: SoakConfig, unit: tuple[str, float], meta: dict
) -> SoakSummary | None:
    """The soak's summary; a drop it flags on a CPU busier than its cores says other processes may account for it."""
    summary = SoakSummary.of(samples, plan.burst_s, cfg.drop_threshold_pct, unit)
    if summary and summary.drop_flagged and meta.get("cpu_load_note"):
        busy = "; the CPU was busier than its cores, so other processes may account for the drop"
        summary = dataclasses.replace(summary, drop_reason=summary.drop_reason + busy)
    return summary


def _sync(device: str):
    if device.startswith("cuda"):
        import torch

        return lambda: torch.cuda.synchronize(device)
    return lambda: None  # CPU matmuls return when they are done


def _message(sample: SoakSample, unit: tuple[str, float]) -> str:
    said = [f"{sample.t_s:.0f} s: {sample.tflops * unit[1]:,.1f} {unit[0]}"]
    for key, shown in (("sm_clock_mhz", "{:.0f} MHz"), ("temp_c", "{:.0f} °C"), ("power_w", "{:.0f} W")):
        if sample.clocks.get(key) is not None:
            said.append(shown.format(sample.clocks[key]))
    if sample.throttled:
        said.append("throttled: " + ", ".join(sample.throttle_reasons))
    return ", ".join(said)


EXPERIMENTS = [
    Experiment(
        name="matmul-soak",
        title="Matmul soak (burst vs sustained)",
        config_type=SoakConfig,
        run=run,
        description=(__doc__ or "").partition("\n")[0],
        device_metric=DeviceMetric(TFLOPS, ("dtype", "size", "second"), "TFLOPS per second of the soak"),
    )
]

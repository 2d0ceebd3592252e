"""``matmul``: achieved TFLOPS per dtype against the datasheet peak, with accuracy, roofline and clocks.

One point = one dtype at one M×N×K: fresh random-normal inputs, timed per call (CUDA events with an
L2 flush before each call on GPU, a monotonic clock on CPU — see :mod:`core.measure.gemm`), the relative
error of the result against an fp64 product of the same inputs, and the point's arithmetic intensity
for the roofline. Shapes come from a square sweep, explicit M,N,K triples, a model preset's GEMMs, a
search over M with N and K fixed, or a bounded mamf-finder-style search around the card's published best shape
(:mod:`core.measure.mamf`), the one figure a published maximum is judged against. What the device cannot run becomes a row with
``status: "unsupported"`` and the reason.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from core.errors import ConfigError, DoesNotFit, Unsupported
from core.experiment import Context, DeviceMetric, Experiment, Output, Progress, check_choices
from core.hardware import device as devices
from core.hardware import dtypes, memory, published
from core.hardware.clocks import device_sampler
from core.hardware.specs import datasheet_peaks, device_peak, measurement_errors, unit_for
from core.measure import gemm
from core.measure import mamf as shape_search  # the config's field is named mamf
from core.measure.gemm import MAX_DIM, Shape, dtype_support, flops, memory_needed_bytes, shape_problem
from core.measure.stats import COPY_TRAFFIC_PER_BYTE, copy_bandwidth, summarize
from core.rows.matmul import TFLOPS, MatmulPoint, ranked
from core.transformer.presets import DEFAULT_BATCH, DEFAULT_CONTEXT, PRESET_NAMES, get_preset
from core.units import GIB, MIB, bytes_text, throughput_unit

if TYPE_CHECKING:
    import torch

    from core.measure.timing import TimingPlan

FP8_SLOW_NOTE = (
    "use_fast_accum=False (torch's default, as mamf-finder runs it); the datasheet fp8 peak "
    "assumes fast accumulation — see fp8-fast-accum"
)
GPU_SIZES = (256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384)
CPU_SIZES = (64, 128, 256, 384, 512, 768, 1024)
CPU_COPY_BYTES = 256 * MIB
GPU_COPY_BYTES = GIB


@dataclass(frozen=True)
class MatmulConfig:
    dtypes: tuple[str, ...] = field(
        default=dtypes.NAMES, metadata={"help": f"dtypes to measure: {', '.join(dtypes.NAMES)}"}
    )
    sizes: tuple[int, ...] = field(
        default=(), metadata={"help": "square sizes (M=N=K); empty = device default (GPU 256…16384, CPU 64…1024)"}
    )
    mnk: tuple[int, ...] = field(default=(), metadata={"help": "custom shapes as M,N,K (several: M,N,K,M,N,K…)"})
    model: str = field(default="", metadata={"help": f"model preset whose GEMMs to time: {', '.join(PRESET_NAMES)}"})
    batch: int = field(default=DEFAULT_BATCH, metadata={"help": "batch size for --model (tokens = batch×context)"})
    context: int = field(default=DEFAULT_CONTEXT, metadata={"help": "context length for --model"})
    search: bool = field(default=False, metadata={"help": "find the max over a range of M with N and K fixed"})
    mamf: bool = field(
        default=False,
        metadata={
            "help": "bounded shape search like mamf-finder's, comparable with a published maximum: the card's "
            "published best shape first, then the grid ±2 steps on each axis around it, until --budget-s"
        },
    )
    budget_s: float = field(
        default=0.0,
        metadata={
            "help": f"seconds per dtype for --mamf (a shape begun runs to its end); 0 = GPU {shape_search.GPU_BUDGET_S:g}, "
            f"CPU {shape_search.CPU_BUDGET_S:g}"
        },
    )
    step: int = field(
        default=0,
        metadata={"help": f"--mamf's grid step; 0 = GPU {shape_search.GPU_STEP}, CPU {shape_search.CPU_STEP}"},
    )
    start: tuple[int, ...] = field(
        default=(), metadata={"help": "M,N,K --mamf starts from; empty = the card's published best shape"}
    )
    m_range: tuple[int, ...] = field(
        default=(),
        metadata={
            "help": "search range START,STOP,STEP for M; empty = device default (GPU 256,16384,256; CPU 64,1024,64)"
        },
    )
    n: int = field(default=0, metadata={"help": "N for --search (0 = GPU 4096, CPU 512)"})
    k: int = field(default=0, metadata={"help": "K for --search (0 = GPU 4096, CPU 512)"})
    warmup_ms: float = field(default=50.0, metadata={"help": "time-based warm-up per point"})
    rep_ms: float = field(default=200.0, metadata={"help": "timed calls per point fill about this long"})
    min_reps: int = field(default=10, metadata={"help": "timed calls per point, at least"})
    max_reps: int = field(default=500, metadata={"help": "timed calls per point, at most"})
    gpu_warmup_s: float = field(
        default=gemm.GPU_WARMUP_S, metadata={"help": "busy seconds before the first point (GPU clock ramp)"}
    )
    flush: bool = field(
        default=True,
        metadata={
            "help": "keep inputs out of cache: GPU zeroes a buffer > L2 before each call, CPU rotates input sets"
        },
    )
    accuracy: bool = field(default=True, metadata={"help": "relative error against an fp64 product"})
    accuracy_rows: int = field(default=512, metadata={"help": "rows of C checked against fp64 (all if M is smaller)"})
    roofline: bool = field(default=True, metadata={"help": "measure device copy bandwidth for the roofline"})
    seed: int = field(default=0, metadata={"help": "random seed of the inputs"})

    def __post_init__(self) -> None:
        check_choices("dtypes", self.dtypes, dtypes.NAMES)
        modes = [
            name
            for name, on in (
                ("mnk", bool(self.mnk)),
                ("model", bool(self.model)),
                ("search", self.search),
                ("mamf", self.mamf),
            )
            if on
        ]
        if len(modes) > 1:
            raise ConfigError(f"choose one shape mode, got {' and '.join(modes)}")
        for name, dims in (("sizes", self.sizes), ("mnk", self.mnk)):
            for d in dims:
                _check_dim(name, d)
        if self.mnk and len(self.mnk) % 3:
            raise ConfigError(f"mnk: expected M,N,K triples, got {len(self.mnk)} numbers")
        if self.model and self.model not in PRESET_NAMES:
            raise ConfigError(f"model: unknown preset {self.model!r}; choose one of {', '.join(PRESET_NAMES)}")
        if not 1 <= self.batch <= 4096 or not 1 <= self.context <= 131072:
            raise ConfigError("batch must be 1…4096 and context 1…131072")
        if self.model and self.batch * self.context > MAX_DIM:
            raise ConfigError(
                f"batch × context = {self.batch * self.context} tokens is M of every GEMM of --model; "
                f"the limit is {MAX_DIM} (as for --mnk): lower batch or context"
            )
        if self.m_range:
            if len(self.m_range) != 3:
                raise ConfigError(f"m_range: expected START,STOP,STEP, got {len(self.m_range)} numbers")
            start, stop, step = self.m_range
            _check_dim("m_range", start)
            _check_dim("m_range", stop)
            if step < 1 or stop < start or (stop - start) // step > 1000:
                raise ConfigError("m_range: need STEP ≥ 1, STOP ≥ START and at most 1001 points")
        for name in ("n", "k", "step"):
            value = getattr(self, name)
            if value:
                _check_dim(name, value)
        if self.start:
            if len(self.start) != 3:
                raise ConfigError(f"start: expected M,N,K, got {len(self.start)} numbers")
            for d in self.start:
                _check_dim("start", d)
        if self.budget_s and not 0.1 <= self.budget_s <= 3600:
            raise ConfigError(
                f"budget_s: must be 0.1…3600 seconds (or 0 for the device default), got {self.budget_s:g}"
            )
        if not 0 <= self.warmup_ms <= 60_000 or not 0 < self.rep_ms <= 600_000:
            raise ConfigError("warmup_ms must be 0…60000 and rep_ms 0…600000 (exclusive of 0)")
        if not 1 <= self.min_reps <= self.max_reps <= 100_000:
            raise ConfigError("need 1 ≤ min_reps ≤ max_reps ≤ 100000")
        if not 0 <= self.gpu_warmup_s <= 600:
            raise ConfigError("gpu_warmup_s must be 0…600")
        if not 1 <= self.accuracy_rows <= MAX_DIM:
            raise ConfigError(f"accuracy_rows must be 1…{MAX_DIM}")

    @property
    def plan(self) -> TimingPlan:
        from core.measure.timing import TimingPlan

        return TimingPlan(self.warmup_ms, self.rep_ms, self.min_reps, self.max_reps)


def _check_dim(name: str, value: int) -> None:
    if not 1 <= value <= MAX_DIM:
        raise ConfigError(f"{name}: every dimension must be 1…{MAX_DIM}, got {value}")


def shapes_for(cfg: MatmulConfig, is_cuda: bool) -> list[Shape]:
    """The points of the run, in order; device defaults fill what the config left empty."""
    if cfg.mnk:
        return [Shape(*cfg.mnk[i : i + 3], label="custom") for i in range(0, len(cfg.mnk), 3)]
    if cfg.model:
        return model_shapes(cfg.model, cfg.batch * cfg.context)
    if cfg.search:
        start, stop, step = cfg.m_range or ((256, 16384, 256) if is_cuda else (64, 1024, 64))
        n = cfg.n or (4096 if is_cuda else 512)
        k = cfg.k or (4096 if is_cuda else 512)
        return [Shape(m, n, k, label="search") for m in range(start, stop + 1, step)]
    return [Shape(s, s, s, label="square") for s in (cfg.sizes or (GPU_SIZES if is_cuda else CPU_SIZES))]


def model_shapes(preset: str, tokens: int) -> list[Shape]:
    """Forward GEMMs of one layer plus the LM head, as (tokens × in) @ (in × out)."""
    p = get_preset(preset)
    return [
        Shape(tokens, p.d_model, p.d_model, "attn q/k/v/o proj"),
        Shape(tokens, p.d_ff, p.d_model, "ffn w1/w3"),
        Shape(tokens, p.d_model, p.d_ff, "ffn w2"),
        Shape(tokens, p.vocab_size, p.d_model, "lm head"),
    ]


POINT_SHARE = 0.9  # a point may take at most this share of what the device can give (workspaces, flush)


def check_fits(cfg: MatmulConfig, shapes: list[Shape], support: dict, ctx: Context) -> None:
    """Refuse the run before allocating when not one of its points fits (each point that does not is a row
    saying so, as before)."""
    needs = [
        (memory_needed_bytes(d, s, cfg.accuracy_rows), d, s)
        for s in shapes
        for d in cfg.dtypes
        if support[d] is None and shape_problem(d, s, ctx.is_cuda) is None
    ]
    if not needs:
        return
    limit = memory.budget(ctx.device)
    need, dtype, shape = min(needs, key=lambda n: n[0])
    if need > POINT_SHARE * limit.bytes:
        raise DoesNotFit(
            f"matmul's smallest point ({dtype} {shape.m}×{shape.n}×{shape.k}: inputs, output and the "
            f"fp64 check) needs an estimated {bytes_text(need)} on {ctx.device_name}, and a point may take "
            f"{POINT_SHARE:.0%} of what is free, but {limit.source}: refused before allocating anything",
            need,
            int(POINT_SHARE * limit.bytes),
            limit.source,
        )


def _peak(dtype: str, desc: dict) -> tuple[float | None, str | None]:
    """Datasheet peak (TFLOPS, TOPS for int8) for the dtype's unit (fp64: the tensor-core figure where
    the sheet has one), or None with the reason."""
    return device_peak(desc, unit_for(dtypes.get(dtype).column, tensor_fp64="fp64_tc" in datasheet_peaks(desc)))


def measure_point(
    dtype: str,
    shape: Shape,
    ctx: Context,
    cfg: MatmulConfig,
    flush: Callable[[], None] | None,
    generator: torch.Generator,
    t0_s: float,
) -> dict:
    """Time one dtype at one shape (flags set for the dtype and restored after) and check its accuracy."""
    from core.transformer.training import matmul_precision

    with matmul_precision(dtype):  # TF32 for tf32 alone
        return gemm.measure_point(
            dtype,
            shape,
            ctx.device,
            cfg.plan,
            flush,
            generator,
            t0_s,
            out_of_cache=cfg.flush,
            accuracy_rows=cfg.accuracy_rows if cfg.accuracy else None,
        )


# --- the run ---------------------------------------------------------------------------------------


def copy_bandwidth_gbs(ctx: Context, cfg: MatmulConfig) -> dict:
    """Copy of a large buffer within the device, as :func:`core.measure.stats.copy_bandwidth` counts every
    copy (bytes copied once / median time); the roofline turns it into memory traffic (read + write)."""
    import torch

    from core.measure.timing import TimingPlan, time_op

    nbytes = GPU_COPY_BYTES if ctx.is_cuda else CPU_COPY_BYTES
    free = memory.budget(ctx.device).bytes
    if free:
        nbytes = min(nbytes, free // 4)
    src = torch.randn(nbytes // 4, device=ctx.device)
    dst = torch.empty_like(src)
    samples = time_op(lambda: dst.copy_(src), ctx.device, TimingPlan(cfg.warmup_ms, cfg.rep_ms, 5, 100), None)
    stats = summarize(samples)
    copied = copy_bandwidth(src.numel() * 4, stats)["gbs"]
    return {
        "copy_bandwidth_gbs": copied,
        "roofline_bandwidth_gbs": COPY_TRAFFIC_PER_BYTE * copied,  # read + write: the roofline's slope
        "copy_bytes": src.numel() * 4,
        "copy_median_ms": stats["median"],
        "copy_samples_ms": samples,
    }


def run(cfg: MatmulConfig, ctx: Context) -> Generator[Progress, None, Output]:
    import torch

    desc = devices.describe(ctx.device)
    walks = [
        shape_search.Walk(shape_search.plan(d, desc, ctx.is_cuda, cfg.start, cfg.step, cfg.budget_s))
        for d in cfg.dtypes
    ]
    shapes = [s for w in walks for s in w.plan.shapes] if cfg.mamf else shapes_for(cfg, ctx.is_cuda)
    support = {d: dtype_support(d, desc) for d in cfg.dtypes}
    generator = torch.Generator(ctx.device).manual_seed(cfg.seed)
    flush, flush_nbytes = gemm.flush_for(ctx.device, desc, cfg.flush)
    meta = _setup_meta(cfg, ctx, support, flush_nbytes, torch.get_num_threads(), len(shapes))
    check_fits(cfg, shapes, support, ctx)
    total = len(shapes) if cfg.mamf else len(shapes) * len(cfg.dtypes)
    work = (
        ((w.plan.dtype, s) for w in walks for s in w.shapes())
        if cfg.mamf
        else ((d, s) for s in shapes for d in cfg.dtypes)
    )
    points: list[MatmulPoint] = []
    sampler = device_sampler(ctx.device) if ctx.is_cuda else None
    t0_s = time.perf_counter()
    if sampler:
        sampler.__enter__()
    try:
        yield Progress(0, total, "warming up" if ctx.is_cuda else "measuring copy bandwidth")
        meta.update(gemm.warm_up(ctx.device, cfg.gpu_warmup_s, bf16=support.get("bf16") is None))
        if cfg.roofline:
            meta.update(copy_bandwidth_gbs(ctx, cfg))
        for dtype, shape in work:  # a search's walk stops handing out shapes when its budget is spent
            point = _point(dtype, shape, ctx, cfg, desc, support, flush, generator, t0_s, meta)
            if sampler and point.ok:
                window = (t0_s + point.timing["t_start_s"], t0_s + point.timing["t_end_s"])
                point = dataclasses.replace(point, clocks=sampler.window(*window))
            points.append(point)
            yield Progress(len(points), total, _message(point, ctx.is_cuda), rows=(point.to_row(),))
    finally:
        if sampler:
            sampler.__exit__(None, None, None)
            meta["clocks"] = [dict(s, t_s=s["t_s"] - t0_s) for s in sampler.samples]
            meta["clocks_note"] = sampler.note
            meta |= sampler.limits  # the power limit and boost ceiling every point's clocks are read against
    if not ctx.is_cuda:
        meta["clocks_note"] = "clock sampling reads NVIDIA GPUs through NVML; not applicable to a CPU run"
    _check_measured(points)
    points = ranked(points)
    rows = [p.to_row() for p in points]
    meta["measurement_errors"] = measurement_errors(rows)
    if cfg.mamf:
        meta["search"] = {w.plan.dtype: w.summary() for w in walks}
    meta["best"] = {
        p.dtype: {"m": p.m, "n": p.n, "k": p.k, TFLOPS: p.tflops, "median_ms": p.median_ms} for p in points if p.is_best
    }
    return Output(rows=rows, meta=meta)


def _setup_meta(cfg: MatmulConfig, ctx: Context, support: dict, flush_nbytes: int, threads: int, shapes: int) -> dict:
    """What the run's meta says before anything is measured: each dtype's support, the flush, the timer and, on
    a CPU, what stands in for a cache flush."""
    meta: dict = {
        "support": {d: r or "ok" for d, r in support.items()},
        "flush_bytes": flush_nbytes,
        "torch_threads": threads,
        "shapes": shapes,
        "timer": "CUDA events per call" if ctx.is_cuda else "time.perf_counter_ns per call",
    }
    if not ctx.is_cuda:
        meta["cache_note"] = (
            (
                f"CPU: calls rotate through input sets totalling ≥ {bytes_text(2 * gemm.cpu_l2_bytes(), 0)} "
                "(2× the cores' L2); the last-level cache is not flushed"
            )
            if cfg.flush
            else "no flush"
        )
    return meta


def _check_measured(points: list[MatmulPoint]) -> None:
    """A run where no point was measured is no result: unsupported where every point was (the rows stay with the
    run), else an error naming each reason once."""
    if points and not any(p.ok for p in points):
        reasons = "; ".join(dict.fromkeys(str(p.reason) for p in points))
        if all(p.status == "unsupported" for p in points):
            raise Unsupported(reasons)  # not "ok": nothing was measured (the rows stay with the run)
        raise RuntimeError(f"no point could be measured: {reasons}")


def _point(dtype, shape, ctx, cfg, desc, support, flush, generator, t0_s, meta) -> MatmulPoint:
    peak, peak_note = _peak(dtype, desc)
    if dtype == "fp8" and peak:
        peak_note = FP8_SLOW_NOTE
    point = MatmulPoint(
        dtype=dtype,
        fp8_fast_accum=dtypes.get(dtype).fast_accum,
        m=shape.m,
        n=shape.n,
        k=shape.k,
        label=shape.label,
        flops=flops(shape.m, shape.n, shape.k),
        device_kind=desc.get("kind"),
        peak_tflops=peak,
        peak_note=peak_note,
        copy_bandwidth_gbs=meta.get("copy_bandwidth_gbs"),
    )
    reason = support[dtype] or shape_problem(dtype, shape, ctx.is_cuda)
    free = memory.budget(ctx.device).bytes
    need = memory_needed_bytes(dtype, shape, cfg.accuracy_rows)
    if reason is None and need > POINT_SHARE * free:
        reason = f"needs {bytes_text(need)}, {bytes_text(free)} free on {ctx.device_name}"
    if reason:
        return dataclasses.replace(point, status="unsupported", reason=f"unsupported on {ctx.device_name}: {reason}")
    try:
        timing = measure_point(dtype, shape, ctx, cfg, flush, generator, t0_s)
    except (RuntimeError, MemoryError) as exc:  # one failed point (OOM, kernel refusal) must not end the sweep
        if ctx.is_cuda:
            import torch

            torch.cuda.empty_cache()
        return dataclasses.replace(
            point, status="error", reason=f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
        )
    point = point.measured(timing).checked().against(published.for_device(desc))
    if meta.get("roofline_bandwidth_gbs"):  # memory traffic (bytes read + written) per second
        ceiling = meta["roofline_bandwidth_gbs"] * timing["intensity_flop_per_byte"] / 1e3
        point = dataclasses.replace(point, bandwidth_bound_tflops=ceiling)
    return point


def _message(point: MatmulPoint, is_cuda: bool) -> str:
    shape = f"{point.dtype} {point.m}×{point.n}×{point.k}"
    if not point.ok or point.tflops is None or point.median_ms is None:
        return f"{shape}: {point.status}"
    unit, scale = throughput_unit(is_cuda, ops=dtypes.get(point.dtype).integer)
    value = f"{point.tflops * scale:.1f} {unit}"
    warning = " — ABOVE THE DATASHEET PEAK: measurement error" if point.above_peak else ""
    return f"{shape}: {value} ({point.median_ms:.3f} ms){warning}"


EXPERIMENTS = [
    Experiment(
        name="matmul",
        title="Matmul throughput",
        config_type=MatmulConfig,
        run=run,
        description=(__doc__ or "").partition("\n")[0],
        device_metric=DeviceMetric(TFLOPS, ("dtype", "m", "n", "k", "label"), "TFLOPS (TOPS for int8)"),
    )
]

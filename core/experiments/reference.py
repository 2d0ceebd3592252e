"""``reference``: the lab's matmul timer against an independent tool, interleaved, for the doctor.

One point (dtype, M = N = K) is timed in alternating rounds: first by the lab's own code path
(:func:`core.experiments.matmul.measure_point`: warm-up, CUDA events or ``perf_counter_ns`` per call, L2
flush or rotated inputs), then by ``triton.testing.do_bench`` on a GPU where triton is importable (its
median, with its own 256 MiB flush), otherwise by ``torch.utils.benchmark.Timer.blocked_autorange``
(which synchronises CUDA itself). Alternating rounds in one process put both through the same machine
state, so a busy CPU slows both alike; the doctor compares the medians over the rounds. Hidden from
the dashboard: it exists to check the lab, not to teach.
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass, field

from core.errors import ConfigError
from core.experiment import Context, Experiment, Output, Progress


@dataclass(frozen=True)
class ReferenceConfig:
    dtype: str = field(default="fp32", metadata={"help": "matmul dtype (one of the matmul experiment's)"})
    size: int = field(default=512, metadata={"help": "M = N = K"})
    rounds: int = field(default=3, metadata={"help": "alternating rounds of lab timer and reference tool"})
    rep_ms: float = field(default=100.0, metadata={"help": "the lab timer's timed calls per round fill this long"})
    min_run_time_s: float = field(default=0.2, metadata={"help": "torch.utils.benchmark: seconds per round"})
    seed: int = field(default=0, metadata={"help": "random seed of the inputs"})

    def __post_init__(self) -> None:
        from core.experiments.matmul import DTYPES

        if self.dtype not in DTYPES:
            raise ConfigError(f"dtype {self.dtype!r} is not one of {', '.join(DTYPES)}")
        if not 16 <= self.size <= 32768:
            raise ConfigError(f"size must be between 16 and 32768, got {self.size}")
        if not 1 <= self.rounds <= 20:
            raise ConfigError(f"rounds must be between 1 and 20, got {self.rounds}")
        if not 10 <= self.rep_ms <= 10_000 or not 0.05 <= self.min_run_time_s <= 60:
            raise ConfigError("rep_ms must be 10…10000 and min_run_time_s 0.05…60")


def _triton_bench():
    try:
        from triton.testing import do_bench  # pyright: ignore[reportMissingImports]  # optional: CUDA builds of torch bring it
    except Exception:  # noqa: BLE001 - not installed, or installed without a usable backend
        return None
    return do_bench


def reference_ms(op, is_cuda: bool, min_run_time_s: float) -> tuple[float, str]:
    """Median milliseconds of ``op`` by the independent tool, and the tool's name."""
    import torch
    from torch.utils.benchmark import Timer

    do_bench = _triton_bench() if is_cuda else None
    if do_bench is not None:
        return float(do_bench(op, warmup=25, rep=100, return_mode="median")), "triton.testing.do_bench"
    # Timer defaults to num_threads=1; the lab runs with torch's thread count, so the reference must too.
    timer = Timer(stmt="op()", globals={"op": op}, num_threads=torch.get_num_threads())
    return timer.blocked_autorange(min_run_time=min_run_time_s).median * 1e3, "torch.utils.benchmark"


def run(cfg: ReferenceConfig, ctx: Context):
    import torch

    from core.experiments import matmul
    from core.hardware.device import describe
    from core.transformer.training import matmul_precision

    desc = describe(ctx.device)
    shape = matmul.Shape(cfg.size, cfg.size, cfg.size, label="reference")
    problem = matmul.dtype_support(cfg.dtype, desc) or matmul.shape_problem(cfg.dtype, shape, ctx.is_cuda)
    if problem:
        raise ctx.unsupported(problem)
    lab_cfg = matmul.MatmulConfig(
        dtypes=(cfg.dtype,), sizes=(cfg.size,), rep_ms=cfg.rep_ms, seed=cfg.seed, accuracy=False, roofline=False
    )
    generator = torch.Generator(ctx.device).manual_seed(cfg.seed)
    flush, _ = matmul._flush_for(ctx, desc, lab_cfg.flush)
    warm = matmul._warm_up(ctx, lab_cfg, {cfg.dtype: None})
    ops = matmul.make_operands(cfg.dtype, shape, ctx.device, generator)
    rows = []
    for i in range(cfg.rounds):
        lab = matmul.measure_point(cfg.dtype, shape, ctx, lab_cfg, flush, generator, time.perf_counter())
        with matmul_precision("tf32" if cfg.dtype == "tf32" else "fp32"):  # the flags measure_point sets
            ref_ms, tool = reference_ms(ops.op, ctx.is_cuda, cfg.min_run_time_s)
        row = {
            "round": i + 1,
            "dtype": cfg.dtype,
            "m": shape.m,
            "n": shape.n,
            "k": shape.k,
            "tool": tool,
            "lab_median_ms": lab["median_ms"],
            "lab_reps": lab["reps"],
            "reference_median_ms": ref_ms,
        }
        rows.append(row)
        yield Progress(
            i + 1, cfg.rounds, f"round {i + 1}: lab {lab['median_ms']:.4f} ms, {tool} {ref_ms:.4f} ms", rows=(row,)
        )
    lab_ms = statistics.median(r["lab_median_ms"] for r in rows)
    ref_ms = statistics.median(r["reference_median_ms"] for r in rows)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    return Output(
        rows=rows,
        meta={
            "tool": rows[0]["tool"],
            "lab_median_ms": lab_ms,
            "reference_median_ms": ref_ms,
            "ratio": lab_ms / ref_ms,
            "tflops_lab": matmul.flops(*[cfg.size] * 3) / (lab_ms * 1e9),
            "triton_importable": _triton_bench() is not None,
            "cpu_load_1min": load,
            "cpu_cores": os.cpu_count(),
            **warm,
        },
    )


EXPERIMENTS = [
    Experiment(
        name="reference",
        title="Lab timer vs an independent tool",
        config_type=ReferenceConfig,
        run=run,
        description=(__doc__ or "").partition("\n")[0],
        hidden=True,
    )
]

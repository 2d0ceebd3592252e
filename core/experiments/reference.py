"""``reference``: the lab's matmul timer against an independent tool, interleaved, for the doctor.

One point (dtype, M = N = K) is timed in alternating rounds: first by the lab's own code path
(:func:`core.measure.gemm.measure_point` with the matmul experiment's default timing: warm-up, CUDA events
or ``perf_counter_ns`` per call, L2 flush or rotated inputs), then by the reference
(:class:`ReferenceTimer`): on a GPU ``triton.testing.do_bench`` (its median, with its own 256 MiB flush)
where triton is importable and do_bench runs (its first call compiles a C stub, which needs a C compiler and
``Python.h``), otherwise :func:`cuda_event_ms` (CUDA events per call after a 256 MiB flush, written apart
from the lab's timer), the reason do_bench was not used kept in the run; on a CPU
``torch.utils.benchmark.Timer.blocked_autorange``. Alternating rounds in one process put both through the
same machine state, so a busy CPU slows both alike; the doctor compares the medians over the rounds. Hidden
from the dashboard: it exists to check the lab, not to teach.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from core.errors import ConfigError
from core.experiment import Context, Experiment, Output, Progress
from core.hardware import dtypes
from core.rows.reference import ReferenceRound


@dataclass(frozen=True)
class ReferenceConfig:
    dtype: str = field(default="fp32", metadata={"help": "matmul dtype (one of the matmul experiment's)"})
    size: int = field(default=512, metadata={"help": "M = N = K"})
    rounds: int = field(default=3, metadata={"help": "alternating rounds of lab timer and reference tool"})
    rep_ms: float = field(default=100.0, metadata={"help": "the lab timer's timed calls per round fill this long"})
    min_run_time_s: float = field(default=0.2, metadata={"help": "torch.utils.benchmark: seconds per round"})
    seed: int = field(default=0, metadata={"help": "random seed of the inputs"})

    def __post_init__(self) -> None:
        if self.dtype not in dtypes.NAMES:
            raise ConfigError(f"dtype {self.dtype!r} is not one of {', '.join(dtypes.NAMES)}")
        if not 16 <= self.size <= 32768:
            raise ConfigError(f"size must be between 16 and 32768, got {self.size}")
        if not 1 <= self.rounds <= 20:
            raise ConfigError(f"rounds must be between 1 and 20, got {self.rounds}")
        if not 10 <= self.rep_ms <= 10_000 or not 0.05 <= self.min_run_time_s <= 60:
            raise ConfigError("rep_ms must be 10…10000 and min_run_time_s 0.05…60")


# The reference tools, as the ``tool`` of a row and of the run's meta (the doctor names its check after it).
DO_BENCH = "triton.testing.do_bench"
CUDA_EVENTS = "torch.cuda.Event, L2 flushed"  # cuda_event_ms: the GPU fallback where do_bench fails
TORCH_BENCHMARK = "torch.utils.benchmark"
FLUSHING_TOOLS = frozenset({DO_BENCH, CUDA_EVENTS})  # flush L2 before each call, as the lab does on a GPU
FLUSH_BYTES = 256 * 2**20  # what do_bench writes between calls


def _triton_bench():
    try:
        from triton.testing import do_bench  # pyright: ignore[reportMissingImports]  # optional: CUDA builds of torch bring it
    except Exception:  # noqa: BLE001 - not installed, or installed without a usable backend
        return None
    return do_bench


def _first_line(exc: BaseException) -> str:
    """``Type: first line of the message``, at most 200 characters (a compiler's error runs to pages)."""
    lines = str(exc).strip().splitlines()
    return (f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__)[:200]


def _why_no_triton() -> str:
    try:
        import triton.testing  # noqa: F401  # pyright: ignore[reportMissingImports]
    except Exception as exc:  # noqa: BLE001 - the import's own error is the reason
        return f"triton.testing is not importable: {_first_line(exc)}"
    return "triton.testing.do_bench is not available"


def cuda_event_ms(op: Callable[[], object], device: str, warmup_ms: float = 25.0, rep_ms: float = 100.0) -> float:
    """Median milliseconds of ``op`` on ``device``: each call between its own pair of CUDA events, a 256 MiB
    buffer zeroed before each call (outside its events) so the inputs come from device memory, after a
    warm-up of ``warmup_ms``; the number of calls from a 5-call estimate (do_bench's method).

    Written apart from :mod:`core.measure.timing` on purpose: it is the lab timer's cross-check where
    do_bench cannot run, so it shares none of its code.
    """
    import torch

    with torch.cuda.device(device):
        stream = torch.cuda.current_stream(device)
        cache = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device=device)
        op()
        torch.cuda.synchronize(device)
        first, last = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        first.record(stream)
        for _ in range(5):
            cache.zero_()
            op()
        last.record(stream)
        torch.cuda.synchronize(device)
        estimate_ms = max(first.elapsed_time(last) / 5, 1e-3)  # a call with its flush
        for _ in range(max(1, int(warmup_ms / estimate_ms))):
            cache.zero_()
            op()
        n = min(1000, max(10, int(rep_ms / estimate_ms)))
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
        for start, end in events:
            cache.zero_()
            start.record(stream)
            op()
            end.record(stream)
        torch.cuda.synchronize(device)
    return statistics.median(start.elapsed_time(end) for start, end in events)


class ReferenceTimer:
    """The independent timer of one run: ``timer(op)`` is (median ms, tool).

    GPU: ``triton.testing.do_bench``; where it cannot be imported, or raises when called (its first call
    compiles a C stub with a C compiler and ``Python.h``; no backend), :func:`cuda_event_ms`, with the
    reason in :attr:`fallback_reason` (the first line of the error). After a failure do_bench is not tried
    again by this timer. CPU: ``torch.utils.benchmark.Timer.blocked_autorange`` for ``min_run_time_s``.
    """

    def __init__(self, device: str, min_run_time_s: float = 0.2) -> None:
        self.device = device
        self.min_run_time_s = min_run_time_s
        self.fallback_reason: str | None = None
        self._do_bench = _triton_bench() if device.startswith("cuda") else None
        if device.startswith("cuda") and self._do_bench is None:
            self.fallback_reason = _why_no_triton()

    def __call__(self, op: Callable[[], object]) -> tuple[float, str]:
        import torch
        from torch.utils.benchmark import Timer

        if not self.device.startswith("cuda"):
            # Timer defaults to num_threads=1; the lab runs with torch's thread count, so the reference must too.
            timer = Timer(stmt="op()", globals={"op": op}, num_threads=torch.get_num_threads())
            return timer.blocked_autorange(min_run_time=self.min_run_time_s).median * 1e3, TORCH_BENCHMARK
        if self._do_bench is not None:
            try:
                return float(self._do_bench(op, warmup=25, rep=100, return_mode="median")), DO_BENCH
            except Exception as exc:  # noqa: BLE001 - any failure of the optional tool: fall back, say why
                self._do_bench, self.fallback_reason = None, f"do_bench raised {_first_line(exc)}"
        return cuda_event_ms(op, self.device), CUDA_EVENTS


def run(cfg: ReferenceConfig, ctx: Context):
    import torch

    from core.hardware.device import describe
    from core.measure import gemm
    from core.measure.timing import TimingPlan
    from core.transformer.training import matmul_precision

    desc = describe(ctx.device)
    shape = gemm.Shape(cfg.size, cfg.size, cfg.size, label="reference")
    problem = gemm.dtype_support(cfg.dtype, desc) or gemm.shape_problem(cfg.dtype, shape, ctx.is_cuda)
    if problem:
        raise ctx.unsupported(problem)
    plan = TimingPlan(rep_ms=cfg.rep_ms)  # the matmul experiment's defaults otherwise
    generator = torch.Generator(ctx.device).manual_seed(cfg.seed)
    flush, _ = gemm.flush_for(ctx.device, desc, True)
    warm = gemm.warm_up(ctx.device, gemm.GPU_WARMUP_S)
    ops = gemm.make_operands(cfg.dtype, shape, ctx.device, generator)
    reference = ReferenceTimer(ctx.device, cfg.min_run_time_s)
    rows = []
    for i in range(cfg.rounds):
        with matmul_precision(cfg.dtype):  # TF32 for tf32 alone, for both timers
            lab = gemm.measure_point(cfg.dtype, shape, ctx.device, plan, flush, generator, time.perf_counter())
            ref_ms, tool = reference(ops.op)
        row = ReferenceRound(i + 1, cfg.dtype, shape.m, shape.n, shape.k, tool, lab["median_ms"], lab["reps"], ref_ms)
        rows.append(row)
        said = f"round {i + 1}: lab {row.lab_median_ms:.4f} ms, {tool} {ref_ms:.4f} ms"
        yield Progress(i + 1, cfg.rounds, said, rows=(row.to_row(),))
    lab_ms = statistics.median(r.lab_median_ms for r in rows)
    ref_ms = statistics.median(r.reference_median_ms for r in rows)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    return Output(
        rows=[r.to_row() for r in rows],
        meta={
            "tool": " + ".join(dict.fromkeys(r.tool for r in rows)),  # two names: do_bench failed mid-run
            "reference_fallback_reason": reference.fallback_reason,
            "lab_median_ms": lab_ms,
            "reference_median_ms": ref_ms,
            "ratio": lab_ms / ref_ms,
            "tflops_lab": gemm.flops(*[cfg.size] * 3) / (lab_ms * 1e9),
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
    )
]

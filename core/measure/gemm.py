"""One GEMM timed as the lab times it: shapes and their arithmetic, what a device runs, the operands, one
measured point, and the warm-up and L2 flush before it — shared by ``matmul``, ``matmul-soak`` and
``reference``, so that no experiment imports another.

Torch is imported by the functions that make or run tensors, never at import: the pages and the CLI read
the shapes' arithmetic and limits from here without loading it. The dtypes are :mod:`core.hardware.dtypes`.
"""

from __future__ import annotations

import functools
import glob
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.errors import ConfigError
from core.hardware import dtypes
from core.units import GIB, KIB, MIB

if TYPE_CHECKING:
    import torch

    from core.measure.timing import TimingPlan

MAX_DIM = 131072  # the largest M, N or K the lab times
FP8_MAX = 448.0  # largest finite float8_e4m3fn
INT8_MAX = 127.0
GPU_WARMUP_S = 1.0  # busy seconds before the first point, so the GPU's clocks have ramped up
WARMUP_SIZE = 4096  # M = N = K of the warm-up's matmul


@dataclass(frozen=True)
class Shape:
    m: int
    n: int
    k: int
    label: str = ""


def flops(m: int, n: int, k: int) -> int:
    """One multiply and one add per term of every dot product."""
    return 2 * m * n * k


def tflops_from_ms(m: int, n: int, k: int, ms: float) -> float:
    return flops(m, n, k) / (ms * 1e-3) / 1e12


def bytes_moved(dtype: str, shape: Shape) -> int:
    """Fewest bytes a matmul must move: read A and B once, write C once."""
    d = dtypes.get(dtype)
    return (shape.m * shape.k + shape.k * shape.n) * d.in_bytes + shape.m * shape.n * d.out_bytes


def memory_needed_bytes(dtype: str, shape: Shape, accuracy_rows: int) -> int:
    """Bytes a point allocates: the fp32 draws, A, B, C, and the float64 reference rows."""
    m, n, k = shape.m, shape.n, shape.k
    draws = 4 * (m * k + n * k)
    ref = 8 * n * k + 8 * min(m, accuracy_rows) * (k + 2 * n)
    return draws + bytes_moved(dtype, shape) + ref  # CPU input rotation adds at most 2× the L2 on top


# --- what runs where -------------------------------------------------------------------------------


def _capability(device: dict) -> tuple[int, int]:
    major, minor = str(device.get("compute_capability", "0.0")).split(".")
    return int(major), int(minor)


def dtype_support(dtype: str, device: dict) -> str | None:
    """Why ``device`` (a :mod:`core.hardware.device` description) cannot run ``dtype``; None if it can."""
    import torch

    fp8 = dtypes.get(dtype).fp8
    if device.get("kind") != "cuda":
        if dtype == "tf32":
            return "TF32 is a mode of NVIDIA tensor cores (compute capability ≥ 8.0); CPU matmuls have no TF32"
        if fp8:
            return (
                "fp8 matmul throughput needs fp8 tensor cores (CUDA compute capability ≥ 8.9, "
                "torch._scaled_mm); the CPU has none"
            )
        if dtype == "int8" and not hasattr(torch, "_int_mm"):
            return f"this PyTorch ({torch.__version__}) has no torch._int_mm"
        return None
    cc = _capability(device)
    cc_text = f"{device.get('name', 'this GPU')} is compute capability {cc[0]}.{cc[1]}"
    if dtype == "tf32" and cc < (8, 0):
        return f"TF32 tensor cores need compute capability ≥ 8.0; {cc_text}"
    if dtype == "bf16" and not device.get("bf16_supported", cc >= (8, 0)):
        return f"torch.cuda.is_bf16_supported() is False; {cc_text}"
    if fp8:
        if not hasattr(torch, "float8_e4m3fn") or not hasattr(torch, "_scaled_mm"):
            return f"this PyTorch ({torch.__version__}) has no float8_e4m3fn / torch._scaled_mm"
        if cc < (8, 9):
            return f"fp8 tensor cores (torch._scaled_mm) need compute capability ≥ 8.9; {cc_text}"
    if dtype == "int8":
        if not hasattr(torch, "_int_mm"):
            return f"this PyTorch ({torch.__version__}) has no torch._int_mm"
        if cc < (7, 5):
            return f"int8 tensor cores (torch._int_mm) need compute capability ≥ 7.5; {cc_text}"
    return None


def shape_problem(dtype: str, shape: Shape, is_cuda: bool) -> str | None:
    """Layout rules of the CUDA kernels, said before they fail."""
    if not is_cuda:
        return None
    if dtypes.get(dtype).fp8 and any(d % 16 for d in (shape.m, shape.n, shape.k)):
        return "torch._scaled_mm needs M, N and K divisible by 16"
    if dtype == "int8" and (shape.m <= 16 or shape.n % 8 or shape.k % 8):
        return "torch._int_mm needs M > 16 and N, K divisible by 8"
    return None


# --- the operands ----------------------------------------------------------------------------------


@dataclass
class Operands:
    """The timed operation ``op`` (writes ``c``) and how to read ``c`` back as float64 values."""

    op: Callable[[], object]
    c: torch.Tensor
    as_float64: Callable[[torch.Tensor], torch.Tensor]
    x: torch.Tensor  # the fp32 draw A was made from (M×K)
    w: torch.Tensor  # the fp32 draw B was made from (N×K; B = wᵀ, the layout of an nn.Linear weight)


def _symmetric_scale(t: torch.Tensor, limit: float) -> float:
    """Per-tensor scale mapping the largest |value| to ``limit`` (standard symmetric quantisation)."""
    return limit / max(float(t.abs().max()), 1e-12)


def make_operands(dtype: str, shape: Shape, device: str, generator: torch.Generator) -> Operands:
    """Fresh random-normal inputs in ``dtype`` and the matmul over them, writing into a preallocated C."""
    import torch

    if dtype not in dtypes.NAMES:
        raise ConfigError(f"unknown dtype {dtype!r}")
    m, n, k = shape.m, shape.n, shape.k
    x = torch.randn(m, k, device=device, generator=generator)
    w = torch.randn(n, k, device=device, generator=generator)
    identity = lambda c: c.double()  # noqa: E731
    d = dtypes.get(dtype)
    if d.fp8:
        sa, sb = _symmetric_scale(x, FP8_MAX), _symmetric_scale(w, FP8_MAX)
        a = (x * sa).to(torch.float8_e4m3fn)
        b = (w * sb).to(torch.float8_e4m3fn).t()
        scale_a = torch.tensor(1.0 / sa, device=device)
        scale_b = torch.tensor(1.0 / sb, device=device)
        c = torch.empty(m, n, dtype=torch.bfloat16, device=device)
        fast = bool(d.fast_accum)
        return Operands(
            # torch's private fp8/int8 kernels: typed in its stubs, but not exported from torch.
            lambda: torch._scaled_mm(a, b, scale_a, scale_b, out_dtype=torch.bfloat16, use_fast_accum=fast, out=c),  # pyright: ignore[reportPrivateImportUsage]
            c,
            identity,
            x,
            w,
        )
    if d.integer:
        sa, sb = _symmetric_scale(x, INT8_MAX), _symmetric_scale(w, INT8_MAX)
        a = torch.round(x * sa).to(torch.int8)
        b = torch.round(w * sb).to(torch.int8).t()
        c = torch.empty(m, n, dtype=torch.int32, device=device)
        return Operands(lambda: torch._int_mm(a, b, out=c), c, lambda t: t.double() / (sa * sb), x, w)  # pyright: ignore[reportPrivateImportUsage]
    tdt = dtypes.torch_dtype(dtype)
    a, b = x.to(tdt), w.to(tdt).t()
    c = torch.empty(m, n, dtype=tdt, device=device)
    return Operands(lambda: torch.mm(a, b, out=c), c, identity, x, w)


def relative_error(ops: Operands, rows: int, generator: torch.Generator) -> float:
    """‖C − C_ref‖/‖C_ref‖ over up to ``rows`` random rows of C, C_ref = x·wᵀ in float64.

    The reference takes the fp32 draw the dtype's inputs were made from, so the error includes the
    rounding of the inputs into the dtype — what using that dtype costs. The output is poisoned with
    NaN (or a sentinel) first, so an unwritten element shows up as a non-finite error.
    """
    import torch

    m = ops.x.shape[0]
    idx = torch.randperm(m, device=ops.x.device, generator=generator)[:rows] if rows < m else None
    if ops.c.is_floating_point():
        ops.c.fill_(float("nan"))
    else:
        ops.c.fill_(torch.iinfo(ops.c.dtype).min)
    ops.op()
    got = ops.as_float64(ops.c if idx is None else ops.c[idx])
    ref = (ops.x if idx is None else ops.x[idx]).double() @ ops.w.double().t()
    if not ops.c.is_floating_point() and bool((ops.c == torch.iinfo(ops.c.dtype).min).any()):
        return float("nan")
    return float(torch.linalg.vector_norm(got - ref) / torch.linalg.vector_norm(ref))


# --- keeping inputs out of cache -------------------------------------------------------------------


def flush_for(device: str, desc: dict, enabled: bool) -> tuple[Callable[[], None] | None, int]:
    """GPU only: a buffer of twice the L2 (at least 256 MiB) zeroed before every call."""
    if not enabled or not device.startswith("cuda"):
        return None, 0
    from core.measure.timing import flush_bytes, make_flush

    nbytes = flush_bytes(desc.get("l2_cache_bytes"))
    return make_flush(device, nbytes), nbytes


def input_sets(dtype: str, shape: Shape, is_cuda: bool, enabled: bool) -> int:
    """CPU: how many input sets to rotate through so that consecutive calls never find theirs in L2.

    A CPU flush (a memset between calls) wakes the thread pool and was measured to slow the next
    small matmul 100-fold on this lab's 2-core box, so the CPU rotates inputs instead.
    """
    if is_cuda or not enabled:
        return 1
    return int(min(64, max(1, math.ceil(2 * cpu_l2_bytes() / bytes_moved(dtype, shape)))))


def _rotating(ops: list[Callable[[], object]]) -> Callable[[], object]:
    if len(ops) == 1:
        return ops[0]
    state = {"i": 0}

    def op():
        state["i"] = (state["i"] + 1) % len(ops)
        return ops[state["i"]]()

    return op


@functools.lru_cache(maxsize=1)
def cpu_l2_bytes() -> int:
    """Sum of the private L2 caches of this CPU (Linux sysfs; 1 MiB per core if unreadable)."""
    seen, total = set(), 0
    for path in glob.glob("/sys/devices/system/cpu/cpu[0-9]*/cache/index[0-9]*"):
        try:
            with open(os.path.join(path, "level")) as f:
                if f.read().strip() != "2":
                    continue
            with open(os.path.join(path, "shared_cpu_list")) as f:
                shared = f.read().strip()
            with open(os.path.join(path, "size")) as f:
                size = f.read().strip().upper()
        except OSError:
            continue
        if shared in seen:
            continue
        seen.add(shared)
        scale = {"K": KIB, "M": MIB, "G": GIB}.get(size[-1], 1)
        total += int(size.rstrip("KMG")) * scale
    return total or (os.cpu_count() or 1) * MIB


# --- one point -------------------------------------------------------------------------------------


def measure_point(
    dtype: str,
    shape: Shape,
    device: str,
    plan: TimingPlan,
    flush: Callable[[], None] | None,
    generator: torch.Generator,
    t0_s: float,
    out_of_cache: bool = True,
    accuracy_rows: int | None = None,
) -> dict:
    """Time one dtype at one shape and, given ``accuracy_rows``, check that many rows against fp64.

    It runs under the caller's float32 matmul flags (``core.transformer.training.matmul_precision``) and
    says which they were; ``out_of_cache`` rotates input sets on a CPU (a GPU flushes with ``flush``). The
    throughput is derived from these times by the row (:meth:`core.rows.matmul.MatmulPoint.measured`).
    """
    import torch

    from core.measure.stats import summarize, time_fields
    from core.measure.timing import time_op

    is_cuda = device.startswith("cuda")
    sets = input_sets(dtype, shape, is_cuda, out_of_cache)
    opsets = [make_operands(dtype, shape, device, generator) for _ in range(sets)]
    precision = torch.get_float32_matmul_precision()
    allow_tf32 = bool(torch.backends.cuda.matmul.allow_tf32)
    start = time.perf_counter()
    samples = time_op(_rotating([o.op for o in opsets]), device, plan, flush)
    end = time.perf_counter()
    error = relative_error(opsets[-1], accuracy_rows, generator) if accuracy_rows is not None else None
    stats = summarize(samples)
    f = flops(shape.m, shape.n, shape.k)
    moved = bytes_moved(dtype, shape)
    return {
        **time_fields(stats),
        "rel_error": error,
        "rel_error_rows": min(shape.m, accuracy_rows) if accuracy_rows is not None else None,
        "bytes_moved": moved,
        "intensity_flop_per_byte": f / moved,
        "input_sets": sets,
        "float32_matmul_precision": precision,
        "allow_tf32": allow_tf32,
        "t_start_s": start - t0_s,
        "t_end_s": end - t0_s,
        "samples_ms": samples,
    }


def warm_up(device: str, gpu_seconds: float, bf16: bool = True) -> dict:
    """Before the first point: GPU clocks ramped by ``gpu_seconds`` of busy matmuls (bf16 where the GPU runs
    it, else fp32); a CPU's thread pool woken and settled."""
    import torch

    from core.measure.timing import cpu_load, keep_busy, wake_cpu

    if not device.startswith("cuda"):
        return {"cpu_warmup": wake_cpu()} | cpu_load()
    if gpu_seconds <= 0:
        return {}
    dtype = "bf16" if bf16 else "fp32"
    shape = Shape(WARMUP_SIZE, WARMUP_SIZE, WARMUP_SIZE)
    ops = make_operands(dtype, shape, device, torch.Generator(device).manual_seed(1))
    calls = keep_busy(ops.op, device, gpu_seconds)
    return {"gpu_warmup": {"dtype": dtype, "size": WARMUP_SIZE, "seconds": gpu_seconds, "calls": calls}}

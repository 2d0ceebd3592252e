"""The lab's matmul timer against a reference timer, same shapes, same dtypes, same operation, one run.

Reference: the engine's :class:`core.experiments.reference.ReferenceTimer`: ``triton.testing.do_bench``
(median, with its own L2 flush) on GPU, or where do_bench cannot be imported or run (its first call compiles
a C stub: a C compiler and ``Python.h``), CUDA events per call after a 256 MiB flush, with the reason
printed; ``torch.utils.benchmark.Timer.blocked_autorange`` (median) on CPU. Prints lab/reference time per
point and the tool used; the target is ±3% on GPU and ±5% on CPU for every point slower than 1 ms.

    python benchmarks/matmul_vs_reference.py --device cpu --sizes 256,512,1024 --dtypes fp64,fp32,bf16,fp16,int8
    python benchmarks/matmul_vs_reference.py --device cuda --sizes 1024,4096,8192 --dtypes fp32,tf32,bf16,fp16,fp8,int8
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from core.experiment import Context  # noqa: E402
from core.experiments.matmul import MatmulConfig, measure_point  # noqa: E402
from core.experiments.reference import ReferenceTimer  # noqa: E402
from core.hardware import device as devices  # noqa: E402
from core.measure.gemm import Shape, dtype_support, make_operands, shape_problem, tflops_from_ms, warm_up  # noqa: E402
from core.measure.timing import flush_bytes, make_flush  # noqa: E402
from core.transformer.training import matmul_precision  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--sizes", default="")
    parser.add_argument("--dtypes", default="")
    parser.add_argument("--rounds", type=int, default=1, help="alternate lab/reference this many times per point")
    args = parser.parse_args(argv)
    dev = devices.resolve(args.device)
    desc = devices.describe(dev)
    ctx = Context(device=dev, device_name=desc["name"])
    is_cuda = ctx.is_cuda
    sizes = [int(s) for s in args.sizes.split(",") if s] or ([1024, 2048, 4096, 8192] if is_cuda else [256, 512, 1024])
    dtypes = [d for d in args.dtypes.split(",") if d] or (
        ["fp32", "tf32", "bf16", "fp16", "fp8", "int8"] if is_cuda else ["fp64", "fp32", "bf16", "fp16", "int8"]
    )
    # The lab's defaults (GPU: flush before each call; CPU: rotate input sets; blocked_autorange re-uses one set).
    cfg = MatmulConfig(dtypes=tuple(dtypes), sizes=tuple(sizes), accuracy=False)
    flush = make_flush(dev, flush_bytes(desc.get("l2_cache_bytes"))) if is_cuda else None
    gen = torch.Generator(dev).manual_seed(0)
    warm_up(dev, cfg.gpu_warmup_s, bf16=dtype_support("bf16", desc) is None)  # GPU clock ramp; CPU pool woken
    print(f"device: {desc['label']}  torch {torch.__version__}  threads {torch.get_num_threads()}")
    print(f"{'dtype':6} {'size':>6} {'lab ms':>10} {'ref ms':>10} {'lab/ref':>8} {'TFLOPS':>9}  note")
    tolerance = 0.03 if is_cuda else 0.05
    worst = 0.0
    reference = ReferenceTimer(ctx.device, min_run_time_s=max(0.2, cfg.rep_ms / 1e3))
    tools: dict[str, None] = {}
    for size in sizes:
        shape = Shape(size, size, size)
        for dtype in dtypes:
            reason = dtype_support(dtype, desc) or shape_problem(dtype, shape, is_cuda)
            if reason:
                print(f"{dtype:6} {size:>6}  unsupported: {reason}")
                continue
            ratios, labs, refs = [], [], []
            for _ in range(args.rounds):
                lab = measure_point(dtype, shape, ctx, cfg, flush, gen, time.perf_counter())["median_ms"]
                ops = make_operands(dtype, shape, dev, gen)
                with matmul_precision("tf32" if dtype == "tf32" else "fp32"):
                    ref, tool = reference(ops.op)
                tools[tool] = None
                labs.append(lab)
                refs.append(ref)
                ratios.append(lab / ref)
            lab, ref = statistics.median(labs), statistics.median(refs)
            ratio = lab / ref
            judged = ref > 1.0
            note = (
                ("OK" if abs(ratio - 1) <= tolerance else f"OUTSIDE ±{tolerance:.0%}")
                if judged
                else "< 1 ms: not judged"
            )
            if judged:
                worst = max(worst, abs(ratio - 1))
            spread = f" (rounds {min(ratios):.3f}–{max(ratios):.3f})" if len(ratios) > 1 else ""
            print(
                f"{dtype:6} {size:>6} {lab:10.4f} {ref:10.4f} {ratio:8.3f} {tflops_from_ms(size, size, size, lab):9.3f}"
                f"  {note}{spread}"
            )
    print(f"worst |lab/ref − 1| over points > 1 ms: {worst:.1%} (target ±{tolerance:.0%})")
    print(f"reference: {' + '.join(tools) or 'not run'}", end="")
    print(f" (do_bench not used: {reference.fallback_reason})" if reference.fallback_reason else "")
    return 0


if __name__ == "__main__":
    sys.exit(main())

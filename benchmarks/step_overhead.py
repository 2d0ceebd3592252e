"""Does the lab's step timing add overhead? Its timed step against a bare training loop, in one run.

Same model object (compiled where the stack compiles), optimizer, batches, precision and stack for both; the
bare loop is what a user would write: ``synchronize(); t0 = perf_counter(); forward; loss; backward; step;
zero_grad; synchronize()``. Blocks of lab steps and bare steps alternate (A B B A …) so that drift of a shared
machine hits both alike; the two halves of the bare samples are compared too, as the noise floor.
Target: the lab's median within 2% of the bare loop's.

    python benchmarks/step_overhead.py --model tiny --device cpu
    python benchmarks/step_overhead.py --model gpt2-124m --batch 16 --context 1024 --device cuda \
        --precision bf16-autocast --stack modern
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
from core.measure.step_timer import PhaseTimer  # noqa: E402
from core.transformer.bench import Bench, warm_up  # noqa: E402
from core.transformer.planner import MeasuredStep  # noqa: E402
from core.transformer.stack import parse_stack  # noqa: E402
from core.transformer.training import PRECISIONS, TrainStep, check_precision, matmul_precision  # noqa: E402

AUTOCAST = {"bf16-autocast": torch.bfloat16, "fp16-autocast": torch.float16, "fp8": torch.bfloat16}


def bare_step(step: TrainStep, x, y, precision: str, device: str) -> float:
    """One plain training step of the same objects, timed with synchronize + perf_counter; milliseconds."""
    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    with torch.autocast(
        "cuda" if cuda else "cpu", dtype=AUTOCAST.get(precision, torch.float32), enabled=precision in AUTOCAST
    ):
        # the logits are dropped before backward, as TrainStep does (their memory is reused by the grads)
        loss = torch.nn.functional.cross_entropy(step.model(x).flatten(0, 1).float(), y.flatten())
    optimizer, scaler, master = step.optimizer, step.scaler, step.master
    assert optimizer is not None
    if scaler:
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    else:
        loss.backward()
        if master:  # bf16 weights, fp32 masters: the masters step, the weights are copied back
            master.grads_to_masters()
        optimizer.step()
        if master:
            master.copy_back()
    (master or optimizer).zero_grad(set_to_none=True)
    if cuda:
        torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e3


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    p.add_argument("--model", default="tiny")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--context", type=int, default=128)
    p.add_argument("--precision", default="fp32", choices=PRECISIONS)
    p.add_argument("--optimizer", default="adamw")
    p.add_argument("--stack", default="course", help="course, modern, or switches joined by +")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--steps", type=int, default=10, help="steps per block")
    p.add_argument("--rounds", type=int, default=10, help="lab/bare block pairs, alternating order")
    p.add_argument("--threads", type=int, help="torch CPU threads (1 is steadier on a busy shared CPU)")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    device = "cuda:0" if args.device == "cuda" else args.device
    ctx = Context(device, torch.cuda.get_device_name(device) if device.startswith("cuda") else "CPU")
    check_precision(args.precision, ctx)
    stack = parse_stack(args.stack)
    setup = MeasuredStep(
        model=args.model,
        batch=args.batch,
        context=args.context,
        precision=args.precision,
        optimizer=args.optimizer,
        **stack.setup_fields(),
    )
    bench = Bench.build(setup, device)
    timer = PhaseTimer(device)
    warm = warm_up(bench, timer, args.warmup, max(args.warmup, 50))

    lab: list[float] = []
    bare: list[float] = []
    paired: list[float] = []  # per round: lab block median / bare block median (cancels slow drift)
    with matmul_precision(args.precision):  # the bare loop's TF32 setting, as a user would set it once
        for _ in range(args.warmup):
            bare_step(bench.step, *bench.next_batch(), args.precision, device)
        for r in range(args.rounds):
            for which in ("lab", "bare") if r % 2 == 0 else ("bare", "lab"):
                for _ in range(args.steps):
                    if which == "lab":
                        lab.append(timer.time_step(bench.step, *bench.next_batch())["step"])
                    else:
                        bare.append(bare_step(bench.step, *bench.next_batch(), args.precision, device))
            paired.append(statistics.median(lab[-args.steps :]) / statistics.median(bare[-args.steps :]))

    target = 0.02
    lab_ms, bare_ms = statistics.median(lab), statistics.median(bare)
    half = len(bare) // 2
    noise = statistics.median(bare[half:]) / statistics.median(bare[:half])
    ratio = lab_ms / bare_ms
    print(
        f"device {ctx.device_name} · {args.model} · batch {args.batch} × {args.context} · {args.precision} · "
        f"{args.optimizer} · stack {stack.name} · {len(lab)} + {len(bare)} steps (torch threads "
        f"{torch.get_num_threads()}) · warmed up in {len(warm.step_ms)} steps ({'steady' if warm.steady else 'not steady'})"
    )
    print(f"{'':6} {'median ms':>10} {'p20':>9} {'p80':>9}")
    for name, values in (("lab", lab), ("bare", bare)):
        q = statistics.quantiles(values, n=5)
        print(f"{name:6} {statistics.median(values):10.3f} {q[0]:9.3f} {q[3]:9.3f}")
    print(f"bare, second half / first half (noise floor): {noise:.3f}")
    print(
        f"per-round lab/bare ratios: median {statistics.median(paired):.3f}, range {min(paired):.3f}–{max(paired):.3f}"
    )
    verdict = "PASS" if abs(ratio - 1) <= target else "FAIL"
    if abs(noise - 1) > target:
        print(
            f"warning: the bare loop alone drifted {abs(noise - 1):.0%} between its halves, more than the "
            f"target: this machine is too noisy for the verdict to mean much (busy CPU? try --threads 1)"
        )
    print(f"ratio lab/bare = {ratio:.3f}  (target 1 ± {target:.0%}) {verdict}")
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())

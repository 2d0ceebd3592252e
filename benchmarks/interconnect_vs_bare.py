"""The lab's collective timing against a bare torch.distributed timing loop, in the same processes, same run.

Reference: the loop every distributed-communication benchmark starts from — a few warm-up calls, then
``perf_counter`` around each ``dist.<collective>(x)`` on every rank, each rank's median, the slowest
rank's median reported. The lab (:func:`core.distributed.collectives.measure`) must agree within
±15% on points slower than 1 ms. Lab and bare loop alternate for ``--rounds`` rounds per point (the
order rotating), and the ratio is the median of the rounds' lab/bare ratios; a second bare loop in
every round gives the noise floor (bare/bare), which on a shared 2-core box can be as large as the
tolerance: read the ratio against it.

    python benchmarks/interconnect_vs_bare.py                          # Gloo, 2 ranks on 127.0.0.1
    python benchmarks/interconnect_vs_bare.py --world-size 4 --sizes 1MiB,16MiB,64MiB
    python benchmarks/interconnect_vs_bare.py --backend nccl --world-size 8 --sizes 64MiB,1GiB   # a GPU box
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import socket
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

TOLERANCE = 0.15
BARE_WARMUP_CALLS = 5


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bare_ms(collective: str, elements: int, reps: int, device: str) -> float:
    """The slowest rank's median of ``reps`` plain calls, timed with perf_counter (synchronised on a GPU)."""
    import torch
    import torch.distributed as dist

    world = dist.get_world_size()
    x = torch.randn(elements, device=device)
    if collective == "all_reduce":
        op = lambda: dist.all_reduce(x)  # noqa: E731
    elif collective == "all_gather":
        part, out = torch.randn(elements // world, device=device), torch.empty(elements, device=device)
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        op = lambda: gather(out, part)  # noqa: E731
    else:
        op = lambda: dist.broadcast(x, 0)  # noqa: E731
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    for _ in range(BARE_WARMUP_CALLS):
        op()
    sync()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        op()
        sync()
        times.append((time.perf_counter() - t0) * 1e3)
    worst = torch.tensor([statistics.median(times)], dtype=torch.float64, device=device)
    dist.all_reduce(worst, op=dist.ReduceOp.MAX)
    return float(worst.item())


def rank_main(rank: int, world: int, port: int, args: argparse.Namespace) -> None:
    import torch
    import torch.distributed as dist

    from core.distributed.collectives import Comm, make_point, measure, point_rows
    from core.measure.timing import TimingPlan
    from core.units import exact_size_text, parse_size

    device = f"cuda:{rank}" if args.backend == "nccl" else "cpu"
    if device != "cpu":
        torch.cuda.set_device(device)
    dist.init_process_group(args.backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    comm = Comm(rank, world, device)
    plan = TimingPlan(args.warmup_ms, args.rep_ms, 10, 500)
    if rank == 0:
        print(
            f"{args.backend}, {world} ranks on 127.0.0.1, torch {torch.__version__}, OMP_NUM_THREADS="
            f"{os.environ.get('OMP_NUM_THREADS')}, {args.rounds} rounds per point (medians; ratios paired per round)"
        )
        print(f"{'collective':14} {'size':>8} {'lab ms':>9} {'bare ms':>9} {'lab/bare':>9} {'noise':>7}  verdict")
    worst, noise_floor = 0.0, 0.0
    for collective in args.collectives.split(","):
        for text in args.sizes.split(","):
            point = make_point(collective, parse_size(text), world)
            reps = point_rows(measure(point, comm, plan, seed=0), args.backend, [{}] * world)[0]["reps"]
            timers = {
                "lab": lambda r, point=point: point_rows(
                    measure(point, comm, plan, seed=r), args.backend, [{}] * world
                )[0]["median_ms"],
                "bare": lambda r, c=collective, p=point, n=reps: bare_ms(c, p.elements, n, device),
                "other": lambda r, c=collective, p=point, n=reps: bare_ms(c, p.elements, n, device),
            }
            found: dict[str, list[float]] = {name: [] for name in timers}
            for r in range(args.rounds):  # the order rotates, so a drifting machine favours no one
                names = list(timers)[r % 3 :] + list(timers)[: r % 3]
                for name in names:
                    found[name].append(timers[name](r))
            lab, bare = statistics.median(found["lab"]), statistics.median(found["bare"])
            # paired within a round, so a machine that slows down between rounds cancels out
            ratio = statistics.median(a / b for a, b in zip(found["lab"], found["bare"]))
            noise = statistics.median(a / b for a, b in zip(found["other"], found["bare"]))
            judged = bare >= 1.0
            verdict = (
                ("OK" if abs(ratio - 1) <= TOLERANCE else f"OUTSIDE ±{TOLERANCE:.0%}")
                if judged
                else "< 1 ms: not judged"
            )
            if judged:
                worst, noise_floor = max(worst, abs(ratio - 1)), max(noise_floor, abs(noise - 1))
            if rank == 0:
                print(
                    f"{collective:14} {exact_size_text(point.nbytes):>8} {lab:9.3f} {bare:9.3f} {ratio:9.3f} "
                    f"{noise:7.3f}  {verdict}"
                )
    if rank == 0:
        print(
            f"worst |lab/bare − 1| over points ≥ 1 ms: {worst:.1%} (target ±{TOLERANCE:.0%}); "
            f"noise floor |bare/bare − 1|: {noise_floor:.1%}"
        )
    dist.destroy_process_group()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    parser.add_argument("--backend", default="gloo", choices=("gloo", "nccl"))
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--collectives", default="all_reduce,all_gather,broadcast")
    parser.add_argument("--sizes", default="1MiB,4MiB,16MiB")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warmup-ms", type=float, default=20.0)
    parser.add_argument("--rep-ms", type=float, default=300.0)
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # as the lab's launcher and torchrun set it
    ctx = multiprocessing.get_context("spawn")
    port = _free_port()
    procs = [ctx.Process(target=rank_main, args=(r, args.world_size, port, args)) for r in range(args.world_size)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    return max(p.exitcode or 0 for p in procs)


if __name__ == "__main__":
    sys.exit(main())

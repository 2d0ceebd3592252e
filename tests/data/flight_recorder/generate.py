"""Small gloo jobs on CPU that hang, each rank dumping its flight recorder (pickle and JSON) while stuck.

    python tests/data/flight_recorder/generate.py OUT        # every set, OUT/<set>/rankN and OUT/<set>_json/rankN.json

Sets: skipped_rank (4 ranks; rank 3 never enters the 4th all_reduce of the default group, it is in load_batch),
desync_op (rank 1 calls broadcast there), desync_size (rank 1 all_reduces 4×16 floats, the others 4×8),
desync_dtype (rank 1 all_reduces float64), no_hang (every rank completes). Before that, every rank runs three
all_reduces of 4×8 floats and ranks 0 and 1 one of 2 floats in a group of their own ("pair"). The waiting ranks
dump 0.5 s after entering the collective, as torch's watchdog dumps on a timeout; the odd rank dumps from what it
did instead.
"""

import datetime
import os
import sys
import time

os.environ.setdefault("TORCH_FR_BUFFER_SIZE", "64")
import torch
import torch.distributed as dist


def dump(out, rank):
    with open(f"{out}/rank{rank}", "wb") as fh:
        fh.write(torch._C._distributed_c10d._dump_fr_trace())
    os.makedirs(f"{out}-json", exist_ok=True)
    with open(f"{out}-json/rank{rank}.json", "wb") as fh:
        fh.write(torch._C._distributed_c10d._dump_fr_trace_json())


def load_batch():
    time.sleep(15.0)  # the odd rank is elsewhere while the others wait (a dump can take seconds)


def main():
    rank, world, port, out, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=60),
    )
    pair = dist.new_group([0, 1], group_desc="pair")
    x = torch.ones(4, 8)
    for _ in range(3):
        dist.all_reduce(x)
    if rank in (0, 1):
        dist.all_reduce(torch.ones(2), group=pair)
    work = None
    odd = mode in ("op", "size", "dtype") and rank == 1
    if odd:
        time.sleep(15.0)  # the others dump first: gloo aborts a rank that receives a mismatched tensor
    if mode == "skip" and rank == world - 1:
        load_batch()
    elif mode == "op" and odd:
        work = dist.broadcast(x, 0, async_op=True)
    elif mode == "size" and odd:
        work = dist.all_reduce(torch.ones(4, 16), async_op=True)
    elif mode == "dtype" and odd:
        work = dist.all_reduce(torch.ones(4, 8, dtype=torch.float64), async_op=True)
    elif mode == "p2p" and rank == 0:
        work = dist.isend(torch.ones(3), 1)
    elif mode == "p2p" and rank == 1:
        load_batch()
    elif mode != "p2p":
        work = dist.all_reduce(x, async_op=True)
    if work is not None and not odd:
        time.sleep(0.5)
    if mode == "clean" and work is not None:
        work.wait()
    dump(out, rank)
    if mode in ("op", "size", "dtype") and not odd:
        time.sleep(20.0)  # alive while the odd rank posts its collective
    os._exit(0)


SETS = {
    "skipped_rank": ("skip", 4),
    "desync_op": ("op", 3),
    "desync_size": ("size", 3),
    "desync_dtype": ("dtype", 3),
    "no_hang": ("clean", 3),
}


def generate(out: str) -> None:
    import subprocess

    for port, (name, (mode, world)) in enumerate(SETS.items(), start=29_500):
        os.makedirs(f"{out}/{name}", exist_ok=True)
        procs = [
            subprocess.Popen([sys.executable, __file__, "--rank", str(r), str(world), str(port), f"{out}/{name}", mode])
            for r in range(world)
        ]
        for p in procs:
            p.wait()
        os.replace(f"{out}/{name}-json", f"{out}/{name}_json")


if __name__ == "__main__":
    if sys.argv[1] == "--rank":
        del sys.argv[1]
        main()
    else:
        generate(sys.argv[1])

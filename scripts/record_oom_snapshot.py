#!/usr/bin/env python3
"""Record a real out-of-memory memory snapshot on a CUDA GPU, for the snapshot reader's tests.

A small MLP is trained three steps with Adam (weights, gradients and both moments stay allocated), then
1 GiB tensors are requested until one fails: the snapshot ends in the allocator's own ``oom`` event with the
device's free memory at that moment. With ``--cap`` the process is limited to a fraction of the device
(``torch.cuda.set_per_process_memory_fraction``), so the failure is the cap's while the device still has
memory free — the other kind of out-of-memory an engineer meets.

    python scripts/record_oom_snapshot.py -o oom.pickle            # exhaust the device
    python scripts/record_oom_snapshot.py -o oom_cap.pickle --cap 0.02
"""

from __future__ import annotations

import argparse
import json

import torch

# each request: the last one is the failure the snapshot ends with
GIB = 1 << 30


def main() -> None:
    parser = argparse.ArgumentParser(description="Record a real out-of-memory memory snapshot on a CUDA GPU.")
    parser.add_argument("-o", "--out", required=True, help="the snapshot's path (.pickle)")
    parser.add_argument("--cap", type=float, default=0.0, help="a per-process memory fraction (0: none)")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("error: no CUDA device")
    if args.cap:
        torch.cuda.set_per_process_memory_fraction(args.cap)
    torch.cuda.memory._record_memory_history(max_entries=100_000)
    # two 64 MiB weights (and their biases), each with Adam's two moments
    layers = (torch.nn.Linear(4096, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 4096))
    model = torch.nn.Sequential(*layers).cuda()
    optimizer = torch.optim.Adam(model.parameters())
    for _ in range(3):
        loss = model(torch.randn(64, 4096, device="cuda")).square().mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    held, error = [], ""
    try:
        while True:
            held.append(torch.empty(GIB, dtype=torch.uint8, device="cuda"))
    except torch.cuda.OutOfMemoryError as exc:
        error = str(exc)
    snapshot = torch.cuda.memory._snapshot()  # what the file holds, without reading the file back
    torch.cuda.memory._dump_snapshot(args.out)
    torch.cuda.memory._record_memory_history(enabled=None)
    oom = [e for t in snapshot.get("device_traces", []) for e in t if e.get("action") == "oom"]
    print(
        json.dumps(
            {
                "gpu": torch.cuda.get_device_name(),
                "torch": torch.__version__,
                "cap": args.cap,
                "held_gib": len(held),
                "oom_events": [{"size": e.get("size"), "device_free": e.get("device_free")} for e in oom],
                "error": error.splitlines()[0][:400],
            }
        )
    )


if __name__ == "__main__":
    main()

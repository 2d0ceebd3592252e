"""Copy bandwidth between host and GPU (pinned and pageable) and between every pair of GPUs.

Timed with :mod:`core.measure.timing` (warm-up, CUDA events around every call, raw samples kept).
Host memory is pinned (page-locked: the GPU's copy engines read it directly, and the copy can be
asynchronous) or pageable (the driver stages it through a pinned buffer). Between GPUs, a copy uses
the peer-to-peer path (NVLink or PCIe) where ``torch.cuda.can_device_access_peer`` says the pair has
one, and goes through host memory where it does not — the matrix shows both, as CUDA's
``p2pBandwidthLatencyTest`` does. Bandwidth counts the bytes copied once (GB/s = 1e9 bytes/s), as
:func:`core.measure.stats.copy_bandwidth` defines it for the whole lab.
Every copy is checked: the destination must equal the source after the last timed call.
"""

from __future__ import annotations

import torch

from core.measure.stats import copy_bandwidth, summarize
from core.measure.timing import TimingPlan, time_op


def _figures(nbytes: int, samples: list[float]) -> dict:
    stats = summarize(samples)
    return {
        "median_ms": stats["median"],
        "p20_ms": stats["p20"],
        "p80_ms": stats["p80"],
        "min_ms": stats["min"],
        "max_ms": stats["max"],
        "reps": stats["count"],
        **copy_bandwidth(nbytes, stats),
        "samples_ms": samples,
    }


def _fresh(nbytes: int, device: str, pin: bool = False) -> torch.Tensor:
    """Random-normal float32 (never all zero), pinned on request."""
    values = torch.randn(nbytes // 4, device="cpu" if device == "cpu" else device)
    return values.pin_memory() if pin else values


def host_copy(gpu: int, nbytes: int, direction: str, pinned: bool, plan: TimingPlan) -> dict:
    """Host→device (``h2d``) or device→host (``d2h``) copies of ``nbytes`` from/to pinned or pageable memory."""
    device = f"cuda:{gpu}"
    host = _fresh(nbytes, "cpu", pin=pinned)
    dev = _fresh(nbytes, device)
    src, dst = (host, dev) if direction == "h2d" else (dev, host)
    with torch.cuda.device(gpu):
        samples = time_op(lambda: dst.copy_(src, non_blocking=pinned), device, plan, None)
        torch.cuda.synchronize(gpu)
    ok = torch.equal(dst.cpu(), src.cpu())
    return {
        "kind": "host_copy",
        "gpu": gpu,
        "direction": direction,
        "memory": "pinned" if pinned else "pageable",
        "bytes": src.numel() * 4,
        "status": "ok" if ok else "error",
        "reason": None if ok else "the copy's destination differs from its source",
        **_figures(src.numel() * 4, samples),
    }


def peer_copy(src_gpu: int, dst_gpu: int, nbytes: int, plan: TimingPlan) -> dict:
    """One cell of the peer matrix: ``nbytes`` from cuda:src to cuda:dst (the diagonal: within one GPU).

    The copy runs on the source GPU's current stream (PyTorch orders it against the destination's),
    so the events are recorded there.
    """
    src = _fresh(nbytes, f"cuda:{src_gpu}")
    dst = torch.empty(src.numel(), device=f"cuda:{dst_gpu}")
    peer = None if src_gpu == dst_gpu else bool(torch.cuda.can_device_access_peer(src_gpu, dst_gpu))
    with torch.cuda.device(src_gpu):
        samples = time_op(lambda: dst.copy_(src), f"cuda:{src_gpu}", plan, None)
        torch.cuda.synchronize(src_gpu)
    ok = torch.equal(dst.cpu(), src.cpu())
    path = "within the GPU" if peer is None else ("peer-to-peer" if peer else "through host memory (no peer access)")
    return {
        "kind": "peer",
        "src": src_gpu,
        "dst": dst_gpu,
        "peer_access": peer,
        "path": path,
        "bytes": src.numel() * 4,
        "status": "ok" if ok else "error",
        "reason": None if ok else "the copy's destination differs from its source",
        **_figures(src.numel() * 4, samples),
    }

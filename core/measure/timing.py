"""Per-call timing of one operation, done the way mamf-finder and ``triton.testing.do_bench`` do it.

GPU: a time-based warm-up, then every call is bracketed by its own pair of CUDA events, with a
buffer larger than L2 written *before* the start event (so each call reads its inputs from device
memory and the flush is never counted); the calls are queued and synchronised once at the end.
CPU: the same loop with ``time.perf_counter_ns`` around each call (a monotonic clock). The raw
samples are returned; :func:`core.measure.stats.summarize` turns them into median/min/p20/p80.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from core.units import MIB

MIN_FLUSH_BYTES = 256 * MIB  # what do_bench and mamf-finder write between calls


@dataclass(frozen=True)
class TimingPlan:
    """How long to warm up and how many calls to time; call counts derive from the warm-up's speed."""

    warmup_ms: float = 50.0
    rep_ms: float = 200.0
    min_reps: int = 10
    max_reps: int = 500


def flush_bytes(l2_cache_bytes: int | None) -> int:
    """Twice the L2, and never less than the references' 256 MiB, so no input survives in L2."""
    return max(MIN_FLUSH_BYTES, 2 * int(l2_cache_bytes or 0))


def make_flush(device: str, nbytes: int) -> Callable[[], None]:
    buf = torch.empty(nbytes // 4, dtype=torch.int32, device=device)

    def flush() -> None:
        buf.zero_()

    return flush


def reps_for(plan: TimingPlan, per_call_ms: float) -> int:
    """Timed calls that fill ``plan.rep_ms`` at ``per_call_ms`` each, within the plan's bounds."""
    return int(min(plan.max_reps, max(plan.min_reps, plan.rep_ms / max(per_call_ms, 1e-6))))


def warm_up(
    op: Callable[[], object],
    sync: Callable[[], None],
    plan: TimingPlan,
    flush: Callable[[], None] | None = None,
    decide: Callable[[int], int] = lambda x: x,
) -> int:
    """Whole batches of calls (doubling up to 64, ``sync`` after each) until ``plan.warmup_ms`` of wall time
    has passed; returns the number of calls to time, sized from the warm-up's speed.

    ``decide`` turns a local decision (whether to stop, how many calls) into the one every participant
    follows; across ranks, rank 0's, so every rank makes the same calls.
    """
    calls, batch, start = 0, 1, time.perf_counter()
    while True:
        for _ in range(batch):
            if flush:
                flush()
            op()
        sync()
        calls += batch
        elapsed_ms = (time.perf_counter() - start) * 1e3
        if decide(elapsed_ms >= plan.warmup_ms):
            break
        batch = min(batch * 2, 64)
    return decide(reps_for(plan, elapsed_ms / calls))


def timed_calls(op: Callable[[], object], device: str, n: int, flush: Callable[[], None] | None = None) -> list[float]:
    """Milliseconds of each of ``n`` calls of ``op``; ``flush`` (if any) runs before each call, outside its time.

    CUDA: a pair of events per call on ``device``'s current stream (never on whichever device happens to be
    current), the calls queued and synchronised once at the end. CPU: ``perf_counter_ns`` around each call.
    """
    if device.startswith("cuda"):
        stream = torch.cuda.current_stream(device)
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        for i in range(n):
            if flush:
                flush()
            starts[i].record(stream)
            op()
            ends[i].record(stream)
        torch.cuda.synchronize(device)
        return [s.elapsed_time(e) for s, e in zip(starts, ends)]
    clock = time.perf_counter_ns
    samples = []
    for _ in range(n):
        if flush:
            flush()
        a = clock()
        op()
        samples.append((clock() - a) / 1e6)
    return samples


def time_cuda(op: Callable[[], object], device: str, plan: TimingPlan, flush: Callable[[], None] | None) -> list[float]:
    """Milliseconds of each timed call of ``op`` on ``device``'s current stream (events recorded there,
    never on whichever device happens to be current)."""

    def sync() -> None:
        torch.cuda.synchronize(device)

    op()
    sync()
    n = warm_up(op, sync, plan, flush)
    return timed_calls(op, device, n, flush)


def time_cpu(op: Callable[[], object], plan: TimingPlan, flush: Callable[[], None] | None = None) -> list[float]:
    """Milliseconds of each timed call of ``op``, read from the monotonic ``perf_counter_ns``.

    The warm-up goes on past ``warmup_ms`` (up to 4× it) while its last calls are still much slower than
    its fastest one, and the number of timed calls comes from the *median* warm-up call: a few slow first
    calls (a sleeping thread pool, first-touch page faults) must not land in the samples or shrink the run
    to ``min_reps``.
    """
    clock = time.perf_counter_ns
    warm: list[int] = []
    t0 = clock()
    while True:
        if flush:
            flush()
        a = clock()
        op()
        warm.append(clock() - a)
        elapsed_ms = (clock() - t0) / 1e6
        settled = len(warm) >= 3 and max(warm[-3:]) <= 2 * min(warm)
        if elapsed_ms >= 4 * plan.warmup_ms or (elapsed_ms >= plan.warmup_ms and settled):
            break
    return timed_calls(op, "cpu", reps_for(plan, sorted(warm)[len(warm) // 2] / 1e6), flush)


def time_op(op: Callable[[], object], device: str, plan: TimingPlan, flush: Callable[[], None] | None) -> list[float]:
    if device.startswith("cuda"):
        return time_cuda(op, device, plan, flush)
    return time_cpu(op, plan, flush)


def wake_cpu(min_s: float = 0.2, max_s: float = 2.0, settle: int = 8) -> dict:
    """Wake the CPU's thread pool before the first timed point, as ``keep_busy`` ramps GPU clocks.

    A parallel matmul (256³ fp32, split over every torch thread) runs until ``min_s`` has passed *and*
    its last ``settle`` calls are within 1.5× of the fastest one (the pool's threads are awake and
    scheduled), or ``max_s`` is spent. Without it the first point of a CPU sweep paid the pool's start
    (measured on a 2-core box: ~15 ms against ~0.05 ms for the next point).
    """
    a = torch.randn(256, 256)
    b = torch.randn(256, 256)
    out = torch.empty(256, 256)
    calls: list[float] = []
    t0 = time.perf_counter()
    while True:
        start = time.perf_counter()
        torch.mm(a, b, out=out)
        calls.append((time.perf_counter() - start) * 1e3)
        elapsed = time.perf_counter() - t0
        recent = calls[-settle:]
        settled = len(calls) >= settle and max(recent) <= 1.5 * min(calls)
        if elapsed >= max_s or (elapsed >= min_s and settled):
            return {
                "seconds": elapsed,
                "calls": len(calls),
                "settled": settled,
                "first_ms": calls[0],
                "last_ms": calls[-1],
                "threads": torch.get_num_threads(),
            }


def cpu_load() -> dict:
    """The 1-minute load average, and a note when the CPU was busier than its cores (other processes then
    compete with the run for them, so its times include waits)."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    out: dict = {"cpu_load_1min": load}
    if load is not None and load > (os.cpu_count() or 1):
        out["cpu_load_note"] = (
            f"the CPU was busy (1-minute load {load:.1f} on {os.cpu_count()} cores, this run "
            f"included): other processes compete for the cores, so times include waits"
        )
    return out


def keep_busy(op: Callable[[], object], device: str, seconds: float) -> int:
    """Run ``op`` back to back for ``seconds`` so GPU clocks ramp up before anything is timed."""
    end, calls = time.perf_counter() + seconds, 0
    while time.perf_counter() < end:
        for _ in range(8):
            op()
        calls += 8
        if device.startswith("cuda"):
            torch.cuda.synchronize(device)
    return calls

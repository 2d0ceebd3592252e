"""A soak: one operation run back to back for a fixed time, its throughput counted per second.

A cold GPU's first seconds are not what it holds: clocks fall as power and temperature limits bite, so
the best early second (the *burst*) and the median of the run's second half (the *sustained* figure)
are both reported, with the drop between them (:class:`core.rows.matmul_soak.SoakSummary`). Torch-free: the device is reached through a
:data:`BatchTimer` (the timing seam), so a test injects synthetic laps — a throttle — without waiting.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

# Runs ``n`` calls, waits until the device has finished them, and returns the seconds since the previous
# lap ended: consecutive laps tile wall time, so a per-second count includes every gap between calls.
BatchTimer = Callable[[int], float]

INTERVAL_S = 1.0  # one sample per second of wall time
BATCH_S = 0.05  # calls are queued in batches of about this long between device synchronisations
WARMUP_S = 0.2  # first calls (library start-up, kernel selection) kept out of the samples
BURST_S = 5.0  # the burst window's default length
DROP_THRESHOLD_PCT = 10.0  # sustained more than this far below burst is flagged (docs/methods/matmul.md)
MAX_BATCH = 1_000_000


class LapTimer:
    """The real :data:`BatchTimer`: ``op`` ``n`` times, ``sync()``, then the clock read once."""

    def __init__(
        self, op: Callable[[], object], sync: Callable[[], None], clock: Callable[[], float] = time.perf_counter
    ):
        self.op, self.sync, self.clock = op, sync, clock
        self.last = clock()

    def __call__(self, n: int) -> float:
        for _ in range(n):
            self.op()
        self.sync()
        now = self.clock()
        lap, self.last = now - self.last, now
        return lap


@dataclass(frozen=True)
class Interval:
    """One sample: calls completed (and synchronised) between two lap ends about a second apart."""

    second: int  # 1, 2, …
    t_start_s: float  # since sampling began
    t_end_s: float
    calls: int

    @property
    def seconds(self) -> float:
        return self.t_end_s - self.t_start_s


class TooSlow(Exception):
    """One call takes longer than a sample: a per-second count would hold less than one call."""

    def __init__(self, per_call_s: float) -> None:
        super().__init__(f"one call takes {per_call_s:.2f} s, longer than the {INTERVAL_S:g}-s sample")
        self.per_call_s = per_call_s


def warm_up(timer: BatchTimer, seconds: float = WARMUP_S) -> dict:
    """Laps of 1, 2, 4 … calls until ``seconds`` have passed; the last lap's time per call sizes the batches.

    Raises :class:`TooSlow` as soon as a call (after the first, which pays one-off start-up) outlasts a sample.
    """
    first = timer(1)
    calls, spent, n, per_call = 1, first, 1, first
    while spent < seconds or calls < 3:
        lap = timer(n)
        calls, spent, per_call = calls + n, spent + lap, max(lap / n, 1e-9)
        if per_call > INTERVAL_S:
            raise TooSlow(per_call)
        n = min(2 * n, MAX_BATCH)
    return {"calls": calls, "seconds": spent, "first_call_s": first, "per_call_s": per_call}


def intervals(timer: BatchTimer, duration_s: float, per_call_s: float) -> Iterator[Interval]:
    """Samples of at least :data:`INTERVAL_S` each until ``duration_s`` is covered.

    A sample ends at the first synchronisation past its second, so it holds whole calls that have
    finished: its throughput is calls × work / its own measured length, never a call counted twice or
    one still queued. Batches are cut so a sample overshoots its second by at most one call.
    """
    elapsed, start, calls, second = 0.0, 0.0, 0, 0
    while True:
        remaining = start + INTERVAL_S - elapsed
        n = max(1, min(math.ceil(remaining / per_call_s), round(BATCH_S / per_call_s), MAX_BATCH))
        lap = timer(n)
        elapsed, calls = elapsed + lap, calls + n
        per_call_s = max(lap / n, 1e-9)
        if elapsed - start >= INTERVAL_S:
            second += 1
            yield Interval(second, start, elapsed, calls)
            if elapsed >= duration_s:
                return
            start, calls = elapsed, 0

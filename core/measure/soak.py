"""A soak: one operation run back to back for a fixed time, its throughput counted per second.

A cold GPU's first seconds are not what it holds: clocks fall as power and temperature limits bite, so
the best early second (the *burst*) and the median of the run's second half (the *sustained* figure)
are both reported, with the drop between them. Torch-free: the device is reached through a
:data:`BatchTimer` (the timing seam), so a test injects synthetic laps — a throttle — without waiting.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from core.hardware.clocks import SLOWDOWNS

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


def summarize(rows: list[dict], burst_s: float, threshold_pct: float, unit: tuple[str, float]) -> dict:
    """Burst, sustained and the drop between them, from per-second rows (``t_start_s``, ``tflops``, and where
    NVML was read ``sm_clock_mhz``, ``throttle_reasons``); ``unit`` is (name, factor) of the reason text.

    burst: the best sample begun within the first ``burst_s`` seconds. sustained: the median of the last
    half of the samples (``rows[n // 2:]``). drop: 100 × (burst − sustained) / burst, flagged above
    ``threshold_pct``. Empty when there is no sample.
    """
    if not rows:
        return {}
    burst_rows = [r for r in rows if r["t_start_s"] < burst_s] or rows[:1]
    late = rows[len(rows) // 2 :]
    best = max(burst_rows, key=lambda r: r["tflops"])
    burst, sustained = best["tflops"], statistics.median(r["tflops"] for r in late)
    drop = 100.0 * (burst - sustained) / burst if burst > 0 else 0.0
    clocks = [r["sm_clock_mhz"] for r in late if isinstance(r.get("sm_clock_mhz"), (int, float))]
    seen = sorted({x for r in late for x in (r.get("throttle_reasons") or ())} & SLOWDOWNS)
    summary = {
        "burst_tflops": burst,
        "sustained_tflops": sustained,
        "drop_pct": drop,
        "drop_threshold_pct": threshold_pct,
        "drop_flagged": drop > threshold_pct,
        "burst_s": burst_s,
        "burst_second": best["second"],
        "sustained_from_second": late[0]["second"],
        "samples": len(rows),
        "burst_sm_clock_mhz": best.get("sm_clock_mhz"),
        "sustained_sm_clock_mhz": statistics.median(clocks) if clocks else None,
        "sustained_slowdown_reasons": seen if any("throttle_reasons" in r for r in late) else None,
    }
    summary["drop_reason"] = reason_text(summary, unit)
    return summary


def reason_text(s: dict, unit: tuple[str, float]) -> str:
    """The verdict in plain words, e.g. "sustained 82.0% of burst (812 → 666 TFLOPS): a 18.0% drop, over the
    10% threshold; SM clock 1965 → 1580 MHz; NVML slowdown reasons: sw_power_cap"."""
    name, scale = unit
    share = 100.0 - s["drop_pct"]
    head = (
        f"sustained {share:.1f}% of burst ({s['burst_tflops'] * scale:,.1f} → "
        f"{s['sustained_tflops'] * scale:,.1f} {name})"
    )
    if s["drop_flagged"]:
        head += f": a {s['drop_pct']:.1f}% drop, over the {s['drop_threshold_pct']:g}% threshold"
    elif s["drop_pct"] < 0:
        head += ": throughput rose after the burst window (clocks still ramping, or another load ended)"
    else:
        head += f": within the {s['drop_threshold_pct']:g}% threshold"
    said = []
    before, after = s["burst_sm_clock_mhz"], s["sustained_sm_clock_mhz"]
    if before is not None and after is not None:
        said.append(f"SM clock {before:.0f} → {after:.0f} MHz")
    reasons = s["sustained_slowdown_reasons"]
    if reasons:
        said.append("NVML slowdown reasons: " + ", ".join(reasons))
    elif reasons is not None and not s["drop_flagged"] and s["drop_pct"] >= 0:
        said.append("no throttling seen")
    return "; ".join([head, *said])

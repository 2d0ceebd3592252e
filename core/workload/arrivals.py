"""Which rank the others wait for: each collective matched across a job's ranks, and how long each rank's kernel
waited for the last rank to arrive.

A collective's kernel runs from its start until every rank of its group has arrived and the data has moved, so
where the ranks' clocks agree (one box; nodes whose clocks are synchronised well below the waits measured), the
rank that started a collective last is the one the others waited for, and each rank's wait is that last start
less its own (TraceLens' "skew in start time"). A call is matched across ranks as the k-th call of the same
process group, collective, sizes and dtype (the figures PyTorch writes on the kernel: ranks of a group issue the
same calls in the same order); a call found on fewer than two ranks is not matched, and a trace without the
figures matches nothing. Per rank: its matched calls, the µs it waited, and how often it arrived last.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from core.workload.trace_file import TraceFile

Call = tuple[tuple, int]  # (the call's identity across ranks, its start in ns since the epoch)


def rank_calls(trace: TraceFile, device: int) -> list[Call]:
    """The collective calls with figures on ``device``, in start order, each keyed by its identity across
    ranks; starts in whole ns since the epoch, so ranks with different time origins compare exactly."""
    a = trace.activities
    ids = sorted((i for i in trace.collectives if a.device[i] == device), key=lambda i: a.start[i])
    seen: Counter[tuple] = Counter()
    out = []
    for i in ids:
        c = trace.collectives[i]
        signature = (c.group_name, c.name, c.in_elements, c.out_elements, c.dtype, c.group_size)
        out.append(((*signature, seen[signature]), trace.origin_us * 1000 + int(np.rint(a.start[i] * 1000))))
        seen[signature] += 1
    return out


def arrivals(calls: dict[int, list[Call]]) -> tuple[list[dict], dict]:
    """Rows of kind ``arrival`` (per rank: ``collectives`` matched, ``waited_us``, ``last_arrivals``) and the
    summary (``matched`` calls, the rank arriving last most often and how often; the lowest rank on a tie)."""
    starts: dict[tuple, dict[int, int]] = {}
    for rank, mine in calls.items():
        for key, start in mine:
            starts.setdefault(key, {})[rank] = start
    waited, matched, last = Counter[int](), Counter[int](), Counter[int]()
    count = 0
    for at in starts.values():
        if len(at) < 2:
            continue
        count += 1
        latest = max(at.values())
        last[min(r for r, t in at.items() if t == latest)] += 1
        for rank, start in at.items():
            waited[rank] += latest - start
            matched[rank] += 1
    rows = [
        {
            "kind": "arrival",
            "rank": r,
            "collectives": matched[r],
            "waited_us": waited[r] / 1000,
            "last_arrivals": last[r],
        }
        for r in sorted(calls)
    ]
    worst = min(sorted(calls), key=lambda r: -last[r]) if count else None
    summary = {
        "matched": count,
        "last_rank": worst,
        "last_arrivals": last[worst] if worst is not None else 0,
        "waited_us": sum(waited.values()) / 1000,
    }
    return rows, summary

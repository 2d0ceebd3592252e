"""Which rank the others wait for: each collective matched across a job's ranks, and how long each rank's kernel
waited for the last rank to arrive.

A collective's kernel runs from its start until every rank of its group has arrived and the data has moved, so
where the ranks' clocks agree (one box; nodes whose clocks are synchronised well below the waits measured), the
rank that started a collective last is the one the others waited for, and each rank's wait is that last start
less its own (TraceLens' "skew in start time"). A call is matched across ranks as the k-th call of the same
process group, collective, sizes and dtype (the figures PyTorch writes on the kernel: ranks of a group issue the
same calls in the same order). A communication kernel without the figures — NCCL's under PyTorch before 2.2, a
custom all-reduce (vLLM/SGLang ``cross_device_reduce``, Lamport, ``multimem``) — is matched as the k-th kernel of
its name on its stream, and only where every rank needs every other (all-reduce, all-gather, reduce-scatter: a
send/recv kernel may pair any two ranks) and the sequence is the same length on each rank. A call found on fewer
than two ranks is not matched.

A match is also checked: where every rank receives from every other (all_reduce, all_gather, reduce_scatter,
all_to_all), no rank's kernel can end before the last rank's starts. A call that does is left out and counted
(``inconsistent``): the ranks' clocks disagree, or the calls were not the same — and a sequence matched by
kernel name holding one is left out whole (``sequences_left_out``), since its order told nothing. Per rank: its
matched calls, the µs it waited, and how often it arrived last; per collective: how much of its kernels' time,
over its calls and ranks, was waiting for the last rank.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from core.measure.nccl_tests import RECORDED_NAMES
from core.rows.trace_ranks import Arrival, CollectiveWait
from core.workload.trace.file import COMM, EVERY_RANK_KERNEL, TraceFile

# (the call's identity across ranks, its start and end in ns since the epoch); the identity opens with FIGURES
# or KERNEL (how it was made) and ends with the call's place in its sequence
Call = tuple[tuple, int, int]
FIGURES, KERNEL = "figures", "kernel"
EVERY_RANK = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all"}  # each rank receives from every other


def rank_calls(trace: TraceFile, device: int) -> list[Call]:
    """The collective calls on ``device``, in start order, each keyed by its identity across ranks (the figures
    on its kernel, else its kernel's name and stream where every rank makes such a call); times in whole ns since
    the epoch, so ranks with different time origins compare exactly."""
    a = trace.activities
    ids = np.flatnonzero((a.kind == COMM) & (a.device == device))
    ids = ids[np.argsort(a.start[ids], kind="stable")]
    origin = trace.origin_us * 1000
    seen: Counter[tuple] = Counter()
    out = []
    for i in ids.tolist():
        c = trace.collectives.get(i)
        name = a.names[int(a.name[i])]
        if c is not None:
            signature = (FIGURES, c.group_name, c.name, c.in_elements, c.out_elements, c.dtype, c.group_size)
        elif EVERY_RANK_KERNEL.search(name):
            signature = (KERNEL, name, int(a.stream[i]))
        else:
            continue
        start, end = (origin + int(np.rint(t * 1000)) for t in (a.start[i], a.end[i]))
        out.append(((*signature, seen[signature]), start, end))
        seen[signature] += 1
    return out


def _every_rank(key: tuple) -> bool:
    """Whether each rank of the call receives from every other, so none can end before the last one starts."""
    return key[0] == KERNEL or RECORDED_NAMES.get(key[2]) in EVERY_RANK


def arrivals(calls: dict[int, list[Call]]) -> tuple[tuple[Arrival, ...], tuple[CollectiveWait, ...], dict]:
    """The arrival rows (per rank: ``collectives`` matched, ``waited_us``, ``last_arrivals``), the collective wait
    rows (per collective, over its calls and ranks: ``calls``, ``kernel_time_us``, ``waited_us`` and
    its share of that kernel time, the most waited first), and the summary (``matched`` calls, of them
    ``matched_by_kernel``; ``inconsistent`` calls and ``sequences_left_out``; the rank arriving last most often
    and how often, the lowest rank on a tie)."""
    at: dict[tuple, dict[int, tuple[int, int]]] = {}
    for rank, mine in calls.items():
        for key, start, end in mine:
            at.setdefault(key, {})[rank] = (start, end)
    matched = {key: ranks for key, ranks in at.items() if len(ranks) >= 2}
    impossible = {
        key
        for key, ranks in matched.items()
        if _every_rank(key) and min(e for _, e in ranks.values()) < max(s for s, _ in ranks.values())
    }
    lengths: dict[tuple, set[int]] = {}  # a kernel sequence's length on each rank
    for mine in calls.values():
        counted = Counter(key[:-1] for key, _, _ in mine if key[0] == KERNEL)
        for sequence, n in counted.items():
            lengths.setdefault(sequence, set()).add(n)
    dropped = {s for s, n in lengths.items() if len(n) > 1} | {k[:-1] for k in impossible if k[0] == KERNEL}
    kept = {k: r for k, r in matched.items() if k not in impossible and not (k[0] == KERNEL and k[:-1] in dropped)}

    waited, count, last = Counter[int](), Counter[int](), Counter[int]()
    by_call: dict[tuple, list[int]] = {}  # the call's identity less its place → [calls, kernel ns, waited ns]
    for key, ranks in kept.items():
        latest = max(s for s, _ in ranks.values())
        last[min(r for r, (s, _) in ranks.items() if s == latest)] += 1
        tally = by_call.setdefault(key[:-1], [0, 0, 0])
        tally[0] += 1
        for rank, (start, end) in ranks.items():
            waited[rank] += latest - start
            count[rank] += 1
            tally[1] += end - start
            tally[2] += latest - start
    rows = tuple(
        Arrival(rank=r, collectives=count[r], waited_us=waited[r] / 1000, last_arrivals=last[r]) for r in sorted(calls)
    )
    waits = tuple(
        CollectiveWait(
            collective=_call_text(identity),
            calls=n,
            kernel_time_us=kernel_ns / 1000,
            waited_us=waited_ns / 1000,
            waited_share=waited_ns / kernel_ns if kernel_ns else None,
        )
        for identity, (n, kernel_ns, waited_ns) in sorted(by_call.items(), key=lambda kv: -kv[1][2])
    )
    worst = min(sorted(calls), key=lambda r: -last[r]) if kept else None
    summary = {
        "matched": len(kept),
        "matched_by_kernel": sum(k[0] == KERNEL for k in kept),
        "inconsistent": len(impossible),
        "sequences_left_out": len(dropped),
        "last_rank": worst,
        "last_arrivals": last[worst] if worst is not None else 0,
        "waited_us": sum(waited.values()) / 1000,
    }
    return rows, waits, summary


def _call_text(identity: tuple) -> str:
    """A matched collective in words: its figures, or its kernel and stream."""
    if identity[0] == KERNEL:
        return f"{identity[1]} (stream {identity[2]}, matched by kernel name)"
    _, group, name, elements, _, dtype, size = identity
    return f"{RECORDED_NAMES.get(name, name)} of {elements:,} {dtype} in a group of {size:,}" + (
        f" (process group {group})" if group else ""
    )

"""What the host was doing while the GPU idled: each gap of the device timeline and the CPU operators behind it.

A **gap** is a stretch of the analysed GPU's span in which no activity of any stream runs (between two
intervals of the union of its kernels, copies and sets): the gaps add up to the trace's ``idle_us`` exactly
(span − busy). Each gap belongs to the thread that launched the activity ending it (its launch call, by
correlation id; the thread with the most launch calls where that call is not in the trace). Every instant of the
gap is given the cause of the operators running on that thread at that instant, the first of :data:`CAUSES`
that any of them has:

- **device→host copy**: a ``cuda/hipMemcpy*`` call whose copy (same correlation id) runs device to host, and
  the ``aten::copy_``/``_to_copy``/``to`` that issued it; pageable or pinned as the copy's name says;
- **synchronisation**: ``cuda/hip{Stream,Device,Event}Synchronize``, ``aten::item``/``_local_scalar_dense``,
  ``aten::nonzero``/``is_nonzero``, and the copies that wait for their stream (``hipMemcpyWithStream``,
  ``cudaMemcpy``, ``…2D``/``3D``/``Peer``: not ``…Async``) in any other direction (the host blocks until the
  device catches up);
- **allocator**: ``cuda/hipMalloc*``/``Free*``, ``cudaHostAlloc``;
- **data loading**: ``enumerate(DataLoader)…__next__`` and a Python ``dataloader.py``'s ``__next__``;
- **optimizer**: ``Optimizer.step``/``zero_grad`` (the optimizer's own Python and CPU work);
- **other CPU work**: any other operator, annotation or Python function;
- **no CPU event**: nothing recorded on the thread (Python between operators, another thread, the profiler).

So a ``cudaStreamSynchronize`` inside ``Optimizer.step`` is synchronisation, not optimizer. Each cause's
time is the µs of the gaps it holds (the causes add up to the gaps); its **top operators** are the operators of
that cause by the µs they overlap that cause's part of the gaps (the union of the calls of one name: an operator
that calls itself counts once; operators of different names nest, so the list is not additive; Python frames of
torch and libraries are not listed), with the number of them, and the source line of the largest where the trace has stacks (``Call stack`` or enclosing
``python_function`` events: the innermost frame outside torch and site-packages).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from core.arrays import distinct, isin, median
from core.rows.trace import HOST_CAUSES, TraceStep
from core.units import us_text
from core.workload.findings import Finding
from core.workload.trace import remedies
from core.workload.trace.cpu_ops import ANNOTATION, OP, PYTHON, RUNTIME, CpuOps
from core.workload.trace.file import MEMCPY, TraceFile, correlated
from core.workload.trace.intervals import merged, merged_groups, union_gaps

CAUSES = HOST_CAUSES  # a step row stores each (core.rows.trace): on its GPU window and in the host's step
COPY, SYNC, ALLOC, DATA, OPTIM, OTHER, NONE = range(len(CAUSES))
_SYNC = re.compile(  # the copies that block the host until the stream is done: hipMemcpyWithStream, cudaMemcpy…
    r"^(cuda|hip)(Stream|Device|Event)Synchronize$|^aten::(item|_local_scalar_dense|nonzero|is_nonzero)$"
    r"|^(cuda|hip)Memcpy(WithStream|2D|3D|Peer)?$"
)
_ALLOC = re.compile(r"^(cuda|hip)(Malloc|Free)\w*$|^(cuda|hip)HostAlloc$")
_DATA = re.compile(r"^enumerate\(DataLoader\)#.*__next__$|dataloader\.py\(\d+\): __next__$")
_OPTIM = re.compile(r"^Optimizer\.(step|zero_grad)#")
_WARMUP = re.compile(r"warm[-_ ]?up", re.I)
_MEMCPY_CALL = re.compile(r"^(cuda|hip)Memcpy")
_COPY_OPS = re.compile(r"^aten::(copy_|_to_copy|to)$")
_DTOH = re.compile(r"DtoH|Device -> (Pageable|Pinned)", re.I)
_FRAME = re.compile(r"^(.+?\.py)\((\d+)\): (.+)$")
_LIBRARY = re.compile(
    r"(^|/)(torch|site-packages|dist-packages|multiprocessing)/|^<built-in|^<frozen|^<string>|^threading\.py"
)
TOP_OPS = 5
NS = 1000


def _ns(us: np.ndarray) -> np.ndarray:
    return np.rint(us * NS).astype(np.int64)


def _covered(s: np.ndarray, e: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Length of the disjoint sorted intervals (s, e) before each point x."""
    if not len(s):
        return np.zeros(len(x), np.int64)
    before = np.concatenate([[0], np.cumsum(e - s)])
    j = np.searchsorted(s, x, side="right")  # intervals starting at or before x
    at = np.maximum(j - 1, 0)
    partial = np.where(j > 0, np.clip(x - s[at], 0, e[at] - s[at]), 0)
    return before[at] + partial


def _overlap(s: np.ndarray, e: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Each interval [a, b]'s overlap with the disjoint sorted intervals (s, e)."""
    return _covered(s, e, b) - _covered(s, e, a)


def _less(a_s, a_e, b_s, b_e) -> tuple[np.ndarray, np.ndarray]:
    """The disjoint sorted intervals A less the disjoint sorted intervals B."""
    if not len(b_s) or not len(a_s):
        return a_s, a_e
    points = np.concatenate([a_s, a_e, b_s, b_e])
    in_a = np.concatenate([np.ones(len(a_s)), -np.ones(len(a_e)), np.zeros(len(b_s) + len(b_e))]).astype(np.int64)
    in_b = np.concatenate([np.zeros(len(a_s) + len(a_e)), np.ones(len(b_s)), -np.ones(len(b_e))]).astype(np.int64)
    order = np.argsort(points, kind="stable")
    points, in_a, in_b = points[order], np.cumsum(in_a[order]), np.cumsum(in_b[order])
    keep = (in_a[:-1] > 0) & (in_b[:-1] == 0) & (points[1:] > points[:-1])
    return merged(points[:-1][keep], points[1:][keep])


def op_causes(trace: TraceFile) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Each host event's cause (an index into CAUSES, OTHER for the rest) and its label (an index into the
    labels returned): its name, a device→host copy call's with its memory (``cudaMemcpyAsync (DtoH, pageable)``)."""
    ops, a = trace.ops, trace.activities
    rule = [
        SYNC
        if _SYNC.search(n)
        else ALLOC
        if _ALLOC.search(n)
        else DATA
        if _DATA.search(n)
        else OPTIM
        if _OPTIM.search(n)
        else OTHER
        for n in ops.names
    ]
    by_name = np.array(rule or [OTHER], dtype=np.int64)
    cause = by_name[ops.name] if len(ops.name) else np.zeros(0, np.int64)
    label = ops.name.copy()
    labels = list(ops.names)
    copy_names = [i for i, n in enumerate(ops.names) if _MEMCPY_CALL.search(n)]
    calls = np.flatnonzero(isin(ops.name, copy_names) & (ops.correlation >= 0) & (ops.kind == RUNTIME))
    copies = np.flatnonzero(a.kind == MEMCPY)
    found, at = correlated(a.correlation[copies], ops.correlation[calls])
    numbered: dict[str, int] = {}
    for call, hit, k in zip(calls.tolist(), found.tolist(), at.tolist()):
        copy_name = a.names[int(a.name[copies[k]])] if hit else ""
        if not _DTOH.search(copy_name):
            continue
        lowered = copy_name.lower()
        memory = ", pinned" if "pinned" in lowered else ", pageable" if "pageable" in lowered else ""
        text = f"{ops.names[int(ops.name[call])]} (DtoH{memory})"
        if text not in numbered:
            numbered[text] = len(labels)
            labels.append(text)
        label[call] = numbered[text]
        cause[call] = COPY
    _parents_of_copies(ops, cause, np.flatnonzero(cause == COPY))
    return cause, label, labels


def _parents_of_copies(ops: CpuOps, cause: np.ndarray, calls: np.ndarray) -> None:
    """The ``aten::copy_``/``_to_copy``/``to`` operators enclosing a device→host copy call on its thread take
    its cause."""
    if not len(calls):
        return
    wanted = [i for i, n in enumerate(ops.names) if _COPY_OPS.search(n)]
    parents = np.flatnonzero(isin(ops.name, wanted) & (ops.kind == OP))
    for tid in distinct(ops.tid[calls]).tolist():
        starts = np.sort(ops.start[calls][ops.tid[calls] == tid])
        mine = parents[ops.tid[parents] == tid]
        inside = np.searchsorted(starts, ops.end[mine], side="right") - np.searchsorted(
            starts, ops.start[mine], side="left"
        )
        cause[mine[inside > 0]] = COPY


def _gap_threads(trace: TraceFile, device: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int | None]:
    """The analysed GPU's gaps (ns: starts, ends) and the thread each belongs to (the launching thread of the
    activity that ends it), and the thread with the most launch calls of this GPU's activities."""
    a, ops = trace.activities, trace.ops
    sel = np.flatnonzero(a.device == device)
    s, e = _ns(a.start[sel]), _ns(a.end[sel])
    order = np.argsort(s, kind="stable")
    s, e, sel = s[order], e[order], sel[order]
    gap_start, gap_end, opener = union_gaps(s, e)
    hit, call = trace.launch_events(sel)
    launcher = np.where(hit, ops.tid[call], -1) if len(ops.tid) else np.full(len(sel), -1, np.int64)
    tid = launcher[opener]  # the launching thread of the activity that ends each gap
    main = None
    if hit.any():
        threads, counts = np.unique(launcher[hit], return_counts=True)
        main = int(threads[np.argmax(counts)])
        tid = np.where(tid < 0, main, tid)
    return gap_start, gap_end, tid, main


def _pieces(
    g_s: np.ndarray, g_e: np.ndarray, tid: np.ndarray, cuts: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The gaps split at every cut point inside one (each piece keeps its gap's thread), so that a piece lies
    wholly inside or wholly outside any window whose edges are cuts."""
    if not len(g_s) or not len(cuts):
        return g_s, g_e, tid
    j = np.searchsorted(g_s, cuts, side="right") - 1
    inside = (j >= 0) & (cuts > g_s[np.maximum(j, 0)]) & (cuts < g_e[np.maximum(j, 0)])
    starts = np.concatenate([g_s, cuts[inside]])
    gap_of = np.concatenate([np.arange(len(g_s)), j[inside]])
    order = np.argsort(starts, kind="stable")
    starts, gap_of = starts[order], gap_of[order]
    same = np.append(gap_of[1:] == gap_of[:-1], False)  # the next piece is of the same gap: it ends this one
    ends = np.where(same, np.append(starts[1:], 0), g_e[gap_of])
    return starts, ends, tid[gap_of]


def _source(trace: TraceFile, i: int) -> str | None:
    """Where host event ``i`` was called from: the first frame of its ``Call stack`` outside torch and
    site-packages, else the innermost enclosing ``python_function`` on its thread that is outside them."""
    ops = trace.ops
    if ops.stack[i] >= 0:
        for frame in ops.stacks[int(ops.stack[i])].split(";"):
            if (m := _FRAME.match(frame.strip())) and not _LIBRARY.search(m.group(1)):
                return f"{m.group(1)}:{m.group(2)} {m.group(3)}"
    py = np.flatnonzero(
        (ops.kind == PYTHON) & (ops.tid == ops.tid[i]) & (ops.start <= ops.start[i]) & (ops.end >= ops.end[i])
    )
    for j in py[np.argsort(-ops.start[py], kind="stable")].tolist():
        if (m := _FRAME.match(ops.names[int(ops.name[j])])) and not _LIBRARY.search(m.group(1)):
            return f"{m.group(1)}:{m.group(2)} {m.group(3)}"
    return None


def host_gaps(
    trace: TraceFile, device: int, top: int = TOP_OPS, steps: Sequence[TraceStep] = ()
) -> tuple[dict, list[dict[str, float]]]:
    """The analysed GPU's gaps by the host's cause: ``{"gaps", "gap_us", "thread", "causes": [{"cause",
    "time_us", "share", "top_ops": [{"op", "time_us", "count", "source"}]}]}``, causes of no time left out; and,
    for each of the trace's steps given (:func:`core.workload.trace.timeline.analyse_trace`), the part of the gaps
    inside its GPU window by cause (:data:`CAUSES`, µs: the step's ``window_causes``): the same instants and causes as the whole, cut at the
    windows' edges, so a step's causes add up to the gaps inside its window."""
    a = trace.activities
    if not np.any(a.device == device):
        return {}, [{} for _ in steps]
    gap_start, gap_end, gap_tid, main = _gap_threads(trace, device)
    out = {"gaps": int(len(gap_start)), "gap_us": 0.0, "thread": main, "causes": []}
    lo = _ns(np.array([r.gpu_window_start_us for r in steps], float))  # the steps' GPU windows [lo, hi)
    hi = lo + _ns(np.array([r.gpu_window_us for r in steps], float))
    gap_start, gap_end, gap_tid = _pieces(gap_start, gap_end, gap_tid, distinct(np.concatenate([lo, hi])))
    total = int((gap_end - gap_start).sum())
    out["gap_us"] = total / NS
    held = np.zeros((len(gap_start), len(CAUSES)), np.int64)  # each piece's ns by cause
    tops: list[dict[int, list]] = [{} for _ in CAUSES]  # cause → label → [µs, count, longest µs, event]
    labels: list[str] = []
    if total:
        labels = _hold(trace, gap_start, gap_end, gap_tid, held, tops)
    before = np.vstack([np.zeros((1, len(CAUSES)), np.int64), np.cumsum(held, axis=0)])  # pieces are sorted
    by_step = [
        {cause: int(ns) / NS for cause, ns in zip(CAUSES, (before[j] - before[i]).tolist())}
        for i, j in zip(np.searchsorted(gap_start, lo), np.searchsorted(gap_start, hi))
    ]
    out["causes"] = _by_cause(trace, held.sum(axis=0), tops, labels, top)
    out["allocator_in_warmup"] = _in_warmup(trace)
    return out, by_step


def _in_warmup(trace: TraceFile) -> float:
    """The share of the allocator calls' time that lies inside a span the trace itself names a warm-up (an
    annotation or operator ``…warmup…`` on the call's thread): a first iteration's set-up, not a steady cost."""
    ops = trace.ops
    cause = op_causes(trace)[0]
    calls = np.flatnonzero(cause == ALLOC)
    if not len(calls):
        return 0.0
    named = np.array([bool(_WARMUP.search(n)) for n in ops.names] or [False])
    inside = 0
    for tid in distinct(ops.tid[calls]).tolist():
        mine = calls[ops.tid[calls] == tid]
        spans = np.flatnonzero(named[ops.name] & (ops.tid == tid) & (ops.kind != RUNTIME))
        w_s, w_e = merged(_ns(ops.start[spans]), _ns(ops.end[spans]))
        inside += int(_overlap(w_s, w_e, _ns(ops.start[mine]), _ns(ops.end[mine])).sum())
    total = int((_ns(ops.end[calls]) - _ns(ops.start[calls])).sum())
    return inside / total if total else 0.0


def _by_cause(trace: TraceFile, held: np.ndarray, tops: list[dict], labels: list[str], top: int) -> list[dict]:
    """The causes holding time (ns each, ``held``), the most first, each with its share and top operators."""
    ops, total = trace.ops, int(held.sum())
    out = []
    for c, ns in enumerate(held.tolist()):
        if not ns:
            continue
        # the most time first; of equal times, the innermost (the latest to start): the most specific name
        ranked = sorted(tops[c].items(), key=lambda kv: (-kv[1][0], -ops.start[kv[1][3]]))[:top]
        # the innermost event holding at least half the cause's time: what the host was in, not the frames around it
        held_most = [kv for kv in tops[c].items() if 2 * kv[1][0] >= ns]
        inner = max(held_most, key=lambda kv: (ops.start[kv[1][3]], -kv[1][0]), default=None)
        out.append(
            {
                "cause": CAUSES[c],
                "time_us": ns / NS,
                "share": ns / total,
                "top_ops": [
                    {
                        "op": labels[n],
                        "time_us": us / NS,
                        "count": count,
                        "longest_us": most / NS,
                        "source": _source(trace, event),
                    }
                    for n, (us, count, most, event) in ranked
                ],  # fmt: skip
                "inner_op": None
                if inner is None
                else {"op": labels[inner[0]], "time_us": inner[1][0] / NS, "source": _source(trace, inner[1][3])},
            }
        )
    return sorted(out, key=lambda r: -r["time_us"])


def host_in_steps(
    trace: TraceFile, device: int, steps: Sequence[TraceStep], top: int = TOP_OPS
) -> tuple[dict, list[dict[str, float]]]:
    """The device's idle inside each of the host's steps, by the host's cause on the launching thread: the step as
    its host lived it, whatever the GPU's span. Returns the part before each step's first kernel (the device's idle
    from the step's start to its first activity's: ``host_before_first_kernel_us`` of the step rows from the host's
    spans) as ``{"steps", "time_us", "wall_us", "median_share", "causes"}`` (``wall_us``: those steps' walls
    summed; ``median_share``: the median step's time over its wall; {} where no step has such time), and for each
    step given its whole idle by cause (:data:`CAUSES`, µs: its ``wall_causes``; {} for a step not from the host's spans). A
    step's first window lies before the GPU's span, so the gaps never hold it: a video model's decoding and a data
    loader's batch before the first kernel were invisible there."""
    host = [i for i, r in enumerate(steps) if r.host_before_first_kernel_us is not None]
    by_step: list[dict[str, float]] = [{} for _ in steps]
    a = trace.activities
    sel = np.flatnonzero(a.device == device)
    if not host or not len(sel):
        return {}, by_step
    busy_s, busy_e = merged(_ns(a.start[sel]), _ns(a.end[sel]))
    t0 = _ns(np.array([steps[i].start_us for i in host], float))
    t1 = t0 + _ns(np.array([steps[i].wall_us for i in host], float))
    first = np.clip(_ns(np.array([steps[i].gpu_window_start_us for i in host], float)), t0, t1)
    _, _, _, main = _gap_threads(trace, device)
    tid = -1 if main is None else main
    summaries = []
    for lo, hi in ((t0, first), (first, t1)):  # before the first kernel; the rest of the step
        p_s, p_e = _less(*merged(lo, hi), busy_s, busy_e)
        p_s, p_e, _ = _pieces(p_s, p_e, np.zeros(len(p_s), np.int64), distinct(np.concatenate([lo, hi])))
        held = np.zeros((len(p_s), len(CAUSES)), np.int64)
        tops: list[dict[int, list]] = [{} for _ in CAUSES]
        labels = _hold(trace, p_s, p_e, np.full(len(p_s), tid), held, tops) if len(p_s) else []
        summaries.append((p_s, held, tops, labels))
        before = np.vstack([np.zeros((1, len(CAUSES)), np.int64), np.cumsum(held, axis=0)])
        for k, i, j in zip(host, np.searchsorted(p_s, lo), np.searchsorted(p_s, hi)):
            for cause, ns in zip(CAUSES, (before[j] - before[i]).tolist()):
                by_step[k][cause] = by_step[k].get(cause, 0.0) + ns / NS
    _, held, tops, labels = summaries[0]
    timed = [steps[i] for i in host if steps[i].host_before_first_kernel_us]
    if not timed or not held.sum():
        return {}, by_step
    shares = [(r.host_before_first_kernel_us or 0.0) / r.wall_us for r in timed if r.wall_us > 0]
    summary = {
        "steps": len(timed),
        "time_us": int(held.sum()) / NS,
        "wall_us": float(sum(r.wall_us for r in timed)),
        "median_share": median(shares) if shares else 0.0,
        "causes": _by_cause(trace, held.sum(axis=0), tops, labels, top),
    }
    return summary, by_step


def _hold(
    trace: TraceFile, g_s: np.ndarray, g_e: np.ndarray, g_tid: np.ndarray, held: np.ndarray, tops: list[dict]
) -> list[str]:
    """Fill ``held`` (each gap piece's ns by cause) and ``tops`` (each cause's operators) from the operators on
    each piece's thread; the labels ``tops`` is keyed by are returned."""
    ops = trace.ops
    cause, label, labels = op_causes(trace)
    kinds = (ops.kind == OP) | (ops.kind == ANNOTATION) | (ops.kind == PYTHON) | (ops.kind == RUNTIME)
    # a Python frame of torch or a library (module.py's _call_impl) names nothing: it counts, but is not listed
    library = np.array([bool(_LIBRARY.search(n.partition("(")[0])) for n in ops.names] or [False])
    listed = (ops.kind != PYTHON) | ~library[ops.name]
    for tid in distinct(g_tid).tolist():
        mine = np.flatnonzero(g_tid == tid)
        p_s, p_e = g_s[mine], g_e[mine]
        on = np.flatnonzero(kinds & (ops.tid == tid))
        o_s, o_e, o_c = _ns(ops.start[on]), _ns(ops.end[on]), cause[on]
        before = np.zeros(len(mine), np.int64)
        higher_s, higher_e = np.zeros(0, np.int64), np.zeros(0, np.int64)
        for c in range(OTHER + 1):
            these = o_c == c
            u_s, u_e = merged(np.concatenate([higher_s, o_s[these]]), np.concatenate([higher_e, o_e[these]]))
            covered = _overlap(u_s, u_e, p_s, p_e)  # each piece's ns held by this cause or one before it
            held[mine, c] = covered - before
            if (covered > before).any() and these.any():
                own_s, own_e = _less(p_s, p_e, higher_s, higher_e)  # the gaps less the causes before this one
                idx = np.flatnonzero(these)
                time = _overlap(own_s, own_e, o_s[idx], o_e[idx])
                keep = (time > 0) & listed[on[idx]]
                k = idx[keep]
                _tally(tops[c], label[on[k]], (o_s[k], o_e[k]), time[keep], on[k], (own_s, own_e))
            before = covered
            higher_s, higher_e = u_s, u_e
        held[mine, NONE] = (p_e - p_s) - before
    return labels


def _tally(top: dict, lab: np.ndarray, spans: tuple, time: np.ndarray, event: np.ndarray, gaps: tuple) -> None:
    """Add calls (their label, (starts, ends), time in the ``gaps`` and event) to ``top`` (label → [ns, calls,
    longest ns, its event]). A label's time is the union of its calls in the gaps: an operator that calls itself
    (``aten::copy_`` in ``aten::copy_``) counts its time once, never more than the gaps it sat in."""
    if not len(lab):
        return
    (s, e), (g_s, g_e) = spans, gaps
    names, which = np.unique(lab, return_inverse=True)
    group, m_s, m_e = merged_groups(which, s, e)
    held = np.zeros(len(names), np.int64)
    np.add.at(held, group, _overlap(g_s, g_e, m_s, m_e))
    calls = np.bincount(which, minlength=len(names))
    by_time = np.lexsort((time, which))  # each label's longest call last
    longest = by_time[np.append(np.diff(which[by_time]) != 0, True)]
    for n, ns, count, k in zip(names.tolist(), held.tolist(), calls.tolist(), longest.tolist()):
        row = top.setdefault(int(n), [0, 0, 0, -1])
        row[0] += ns
        row[1] += count
        if time[k] > row[2]:
            row[2], row[3] = int(time[k]), int(event[k])


MIN_SPAN_SHARE = 0.05  # a cause named in a finding holds at least this share of the GPU's span
FINDINGS = 2  # at most this many causes become findings


OUTSIDE_US = 1000.0  # one blocking call that held the GPU idle this long waits for work the trace did not record


def _allocator_every_step(meta: dict, steps: Sequence[TraceStep]) -> bool | None:
    """Whether the allocator's calls recur in the steps (True), belong to set-up (False: the first step alone, or a
    span the trace names a warm-up), or the trace cannot tell (None: one step or none, no warm-up named)."""
    alloc = CAUSES[ALLOC]
    held = [  # in the host's step where it was cut from the host's spans, else on the GPU window
        next(c[alloc] for c in (r.wall_causes, r.window_causes) if alloc in c)
        for r in steps
        if alloc in r.wall_causes or alloc in r.window_causes
    ]
    if len(held) >= 2:
        return sum(1 for us in held if us > 0) * 2 >= len(held) and any(us > 0 for us in held[1:])
    return False if (meta.get("host_gaps") or {}).get("allocator_in_warmup", 0.0) >= 0.5 else None


def host_gap_findings(meta: dict, steps: Sequence[TraceStep] = ()) -> list[Finding]:
    """The largest causes of the GPU's gaps (≥ 5 % of the span) as findings naming the operator (and its line
    where recorded), with what to try where the trace supports it (:mod:`core.workload.trace.remedies`): the named
    causes first, then other CPU work and no CPU event, each largest first, its value the % of the span."""
    gaps, span = meta.get("host_gaps") or {}, meta.get("span_us") or 0.0
    out = []
    vague = (CAUSES[OTHER], CAUSES[NONE])  # a named cause is the more useful finding: it goes first
    causes = [c for c in gaps.get("causes") or [] if span and c["time_us"] / span >= MIN_SPAN_SHARE]
    for c in sorted(causes, key=lambda c: (c["cause"] in vague, -c["time_us"]))[:FINDINGS]:
        share = c["time_us"] / span
        top = next(iter(c["top_ops"]), None)
        where = f" ({top['source']})" if top and top.get("source") else ""
        held = f"{us_text(c['time_us'])} of the GPU's {us_text(gaps['gap_us'])} idle ({share:.1%} of the span)"
        if c["cause"] == CAUSES[NONE]:
            text = f"{held} with no CPU event on the launching thread: Python between operators, or another thread"
        elif c["cause"] == CAUSES[OTHER]:
            text = f"{held} in other CPU work on the launching thread, most in {top['op']}{where}" if top else held
        else:
            text = f"{held} in {top['op']}{where} — {c['cause']} on the launching thread" if top else held
        every_step = _allocator_every_step(meta, steps) if c["cause"] == "allocator" else None
        waits = bool(top and top.get("longest_us", 0.0) >= OUTSIDE_US)
        advice = remedies.for_gap(c["cause"], allocator_every_step=every_step, waits_outside=waits)
        if advice:  # what to try, or what the time is where the trace says it is no fault ("allocations of …")
            advice = f" — try: {advice}" if not advice.startswith(("allocations", "the call")) else f": {advice}"
        out.append(
            Finding("host_gap", text, 100 * share, "%", advice=advice or "", time_us=c["time_us"], cause=c["cause"])
        )
    return out


STALL_RATIO = 2.0  # a step's time in a named cause at least this many times the median step's is a stall
STALL_STEPS = 3  # a median needs at least this many steps


def step_stall_findings(steps: Sequence[TraceStep]) -> list[Finding]:
    """The step whose host held the GPU idle longest in one named cause (a copy, a synchronisation, the
    allocator, data loading, the optimizer), where that is at least :data:`STALL_RATIO` times the median step's
    and :data:`MIN_SPAN_SHARE` of the step's GPU window: one step stalls (a slow batch, a checkpoint, a
    periodic sync) rather than every step. At most one finding: the largest such time."""
    named = [name for name in CAUSES if name not in (CAUSES[OTHER], CAUSES[NONE])]
    timed = [r for r in steps if CAUSES[0] in r.window_causes and (r.gpu_window_us or 0.0) > 0]
    if len(timed) < STALL_STEPS:
        return []
    stalls = []
    for name in named:
        times = np.array([r.window_causes[name] for r in timed])
        typical, worst = median(times), timed[int(np.argmax(times))]
        us, window = worst.window_causes[name], worst.gpu_window_us or 0.0
        if us >= STALL_RATIO * typical and us >= MIN_SPAN_SHARE * window:
            stalls.append((us, name, worst, typical))
    if not stalls:
        return []
    us, name, step, typical = max(stalls, key=lambda s: s[0])
    window = step.gpu_window_us or 0.0
    share = us / window
    text = (
        f"step {step.step} stalls on {name}: the GPU idled {us_text(us)} of its {us_text(window)} "
        f"window ({share:.1%}) while the host was in it, against {us_text(typical) if typical else 'none'} in the "
        f"median step of {len(timed):,} — one step, not the steady state"
    )
    return [Finding("step_stall", text, 100 * share, "%", time_us=us, cause=name)]


def before_first_kernel_findings(meta: dict) -> list[Finding]:
    """The host's time before each step's first kernel (``meta["host_before_first_kernel"]``), where it is at least
    :data:`MIN_SPAN_SHARE` of the steps' wall: what the host was in, with what to try for its cause."""
    b = meta.get("host_before_first_kernel") or {}
    if not b.get("wall_us") or b["time_us"] < MIN_SPAN_SHARE * b["wall_us"]:
        return []
    share = b["time_us"] / b["wall_us"]
    steps = "each step" if b["steps"] > 1 else "the step"
    text = (
        f"the host works {us_text(b['time_us'])} before the GPU's first kernel of {steps} ({share:.1%} of "
        f"{us_text(b['wall_us'])} of step wall"
        + (f"; median step {b['median_share']:.1%}" if b["steps"] > 1 else "")
        + "), the GPU idle"
    )
    cause = next(iter(b["causes"]), None)
    why = advice = ""
    if cause is not None:
        inner = cause.get("inner_op")
        why = f": {cause['cause']}{_inner_text(inner)}"
        in_python = bool(inner and _FRAME.match(inner["op"]))
        if tried := remedies.before_first_kernel(cause["cause"], in_python=in_python):
            advice = f" — try: {tried}"
    named = cause["cause"] if cause is not None else None
    return [Finding("host_before_first_kernel", text, 100 * share, "%", why, advice, b["time_us"], named)]


def _inner_text(inner: dict | None) -> str:
    """What the host was in, as a finding says it: a Python frame by its source line, an operator with its line."""
    if not inner:
        return ""
    frame = _FRAME.match(inner["op"])
    name = f"{frame.group(1)}:{frame.group(2)} {frame.group(3)}" if frame else inner["op"]
    at = f" at {inner['source']}" if inner.get("source") and not frame else ""
    return f" ({name}, {us_text(inner['time_us'])}{at})"

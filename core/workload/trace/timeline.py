"""Reading a Chrome/Kineto profiler trace (``torch.profiler`` ``export_chrome_trace``, TensorBoard's
``*.pt.trace.json[.gz]``) recorded on any machine, and what its GPU did.

Every GPU activity (``kernel``, ``gpu_memcpy``, ``gpu_memset``; the 2021 names ``Kernel``/``Memcpy``/
``Memset`` too) becomes an interval on its device. Definitions, per device:

- **kernel time**: the sum of kernel durations (as ``torch.profiler``'s "CUDA total" and HolisticTrace-
  Analysis's kernel breakdown count it; overlapping kernels on two streams count twice);
- **busy**: the union of all GPU activity intervals; **span**: first GPU activity start to last end;
  **idle** = span − busy (HolisticTraceAnalysis's temporal breakdown uses the same three);
- **compute / memcpy / communication**: unions of compute kernels, copies and sets, and collective kernels
  (NCCL/RCCL/MSCCL, collectives by name, custom all-reduce, NVSHMEM and DeepEP kernels) on the device timeline,
  each within the span; their pairwise overlaps and the *exposed* communication no compute hides (the union of
  all kernels less the compute union, so within the busy time);
- **groups**: kernels by :func:`core.measure.kernels.classify_kernel` (named rules over the kernel name,
  vendor-neutral; copies and sets are "memory"); ``meta["rules"]`` lists every rule with the kernels and µs
  it matched on the analysed GPU;
- **idle by cause**, of the device: the gaps of the union of its streams (exactly span − busy), each *host wait*
  when the launch call of the activity ending it started after the gap began (the GPU waited for the CPU), else
  *kernel wait* when shorter than ``KERNEL_WAIT_US`` (back-to-back launch overhead), else *other* (waiting on an
  event, a synchronisation). Per stream, HolisticTraceAnalysis' ``get_idle_time_breakdown``: the same rules on
  each stream's kernels (and copies/sets) in start order, as ``idle`` rows; their sum over streams is kept as
  ``idle_causes_summed_over_streams`` (it is not the device's idle: an instant counts once per idle stream); a
  gap is never negative here (HTA sums the negative gaps sub-µs rounding makes);
- **launch delay**: a kernel's start − its launch call's start (through the correlation id); HTA's own
  "launch delay" (start − the call's end, ≥ 0) beside it; **launch-bound**: kernels shorter than their
  launch call took on the CPU (HTA's "short kernels": the GPU runs them faster than the CPU issues them);
- **steps**: ``ProfilerStep#N`` spans — on the GPU timeline where the trace has them, else the CPU
  span, with kernels placed by the time their launch was called; sums and unions of the step's own activities,
  busy, idle and idle by cause on its GPU window (:func:`_steps`), and launch figures.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core.arrays import distinct, isin, percentiles
from core.measure.kernels import KERNEL_GROUPS, KERNEL_RULES, NO_RULE, classify_kernel
from core.rows.kernel_rules import KERNEL_WAIT_US, RuleCount
from core.rows.trace import (
    GROUP_KEYS,
    BusyBin,
    Kernel,
    KernelGroup,
    LaunchDelayBin,
    StreamIdle,
    TraceDevice,
    TraceStep,
    TraceTables,
)
from core.workload.trace.file import COMM, COMPUTE, KINDS, MEMCPY, MEMSET, Activities, TraceFile, read_trace
from core.workload.trace.intervals import merged, merged_by_group, merged_groups, union_gaps

__all__ = ["IDLE_CAUSES", "TRACE_GROUPS", "analyse_trace", "read_trace", "union_us"]

TRACE_GROUPS = KERNEL_GROUPS
# Rules: the name rules, then copies and sets by their kind, then the names no rule matched.
RULES = tuple(r.rule for r in KERNEL_RULES) + ("memcpy (by kind)", "memset (by kind)", NO_RULE)
_RULE_GROUP = {r.rule: r.group for r in KERNEL_RULES} | {
    "memcpy (by kind)": "memory",
    "memset (by kind)": "memory",
    NO_RULE: "other",
}
IDLE_CAUSES = ("host_wait", "kernel_wait", "other_wait")
HOST_WAIT, KERNEL_WAIT, OTHER_WAIT = range(3)
DELAY_EDGES_US = (0.0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5, 2e5, 5e5, 1e6)


NS = 1000  # nanoseconds a µs: the finest digit a trace writes


def _ns(us: np.ndarray) -> np.ndarray:
    """Times in whole nanoseconds. Sums and unions of integers are exact, where float ones in a different order
    round differently: a union then never exceeds the sum of its parts, nor busy the span."""
    return np.rint(us * NS).astype(np.int64)


def union_us(start: np.ndarray, end: np.ndarray) -> float:
    """Length of the union of intervals (µs), counted in whole nanoseconds: the grouped merge every breakdown
    takes, of one group."""
    _, g_s, g_e = merged_groups(np.zeros(len(start), np.int64), _ns(start), _ns(end))
    return int((g_e - g_s).sum()) / NS


def _unions_ns(s: np.ndarray, rank: np.ndarray, ends: np.ndarray, part: np.ndarray, parts: int) -> np.ndarray:
    """The length of the union of each part's intervals (whole ns), given sorted by part then start, each end as its
    rank in ``ends`` (sorted, distinct): :func:`core.workload.trace.intervals.merged_by_group`."""
    out = np.zeros(parts, np.int64)
    g, g_s, g_e = merged_by_group(s, rank, ends, part)
    np.add.at(out, g, g_e - g_s)
    return out


def _time_breakdowns(a: Activities, parts: list[np.ndarray]) -> list[dict]:
    """Busy, idle, unions and overlaps of each selection of activities (indices; {} for an empty one), all at once:
    in whole nanoseconds until given as µs, so sums and unions are exact. One sort by selection and start serves
    every union."""
    idx = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    part = np.repeat(np.arange(len(parts)), [len(p) for p in parts])
    s, e, n = _ns(a.start[idx]), _ns(a.end[idx]), len(parts)
    order = np.lexsort((s, part))
    idx, part, s, e = idx[order], part[order], s[order], e[order]
    k = a.kind[idx]
    ends, rank = np.unique(e, return_inverse=True)

    def union_of(*kinds: int) -> np.ndarray:
        m = isin(k, kinds)
        return _unions_ns(s[m], rank[m], ends, part[m], n)

    def summed(m: np.ndarray) -> np.ndarray:
        out = np.zeros(n, np.int64)
        np.add.at(out, part[m], (e - s)[m])
        return out

    first, last = np.full(n, np.iinfo(np.int64).max), np.full(n, np.iinfo(np.int64).min)
    np.minimum.at(first, part, s)
    np.maximum.at(last, part, e)
    span = last - first
    busy = _unions_ns(s, rank, ends, part, n)
    compute, comm, copy = union_of(COMPUTE), union_of(COMM), union_of(MEMCPY, MEMSET)
    kernels_union = union_of(COMPUTE, COMM)
    kernels = (k == COMPUTE) | (k == COMM)
    figures = {
        "span_us": span,
        "busy_us": busy,
        "idle_us": span - busy,
        "kernel_time_us": summed(kernels),
        "compute_kernel_time_us": summed(k == COMPUTE),
        "communication_kernel_time_us": summed(k == COMM),
        "memcpy_time_us": summed(k == MEMCPY),
        "memset_time_us": summed(k == MEMSET),
        "compute_union_us": compute,
        "communication_union_us": comm,
        "copy_union_us": copy,
        "compute_and_communication_us": compute + comm - kernels_union,  # |A ∩ B| = |A| + |B| − |A ∪ B|
        "compute_and_copy_us": compute + copy - union_of(COMPUTE, MEMCPY, MEMSET),
        "communication_and_copy_us": comm + copy - union_of(COMM, MEMCPY, MEMSET),
        "exposed_communication_us": kernels_union - compute,  # |B \ A| = |A ∪ B| − |A|: within busy
    }
    columns = {key: (ns / NS).tolist() for key, ns in figures.items()}
    counts = np.bincount(part[kernels], minlength=n).tolist()
    streams = _streams_of(a.stream[idx], part, n)
    out = []
    for i in range(n):
        if not len(parts[i]):
            out.append({})
            continue
        row = {key: column[i] for key, column in columns.items()}
        row["idle_share"] = (span[i] - busy[i]) / span[i] if span[i] else 0.0
        row["kernel_count"] = counts[i]
        row["streams"] = streams[i].tolist()
        out.append(row)
    return out


def _streams_of(stream_of: np.ndarray, part: np.ndarray, n: int) -> list[np.ndarray]:
    """Each of the ``n`` parts' streams, sorted (``stream_of``: each activity's stream, ``part``: its part)."""
    names, stream = np.unique(stream_of, return_inverse=True)
    pairs = distinct(part * len(names) + stream)  # each part's streams, sorted
    return np.split(names[pairs % max(len(names), 1)], np.searchsorted(pairs // max(len(names), 1), np.arange(1, n)))


def _group_ids(a: Activities) -> tuple[np.ndarray, np.ndarray]:
    """Each activity's group (index into TRACE_GROUPS) and rule (index into RULES): a kernel by its name (each
    distinct name classified once), a copy or set by its kind; a collective by the trace reader stays
    communication whatever its name."""
    if not len(a.kind):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    by_name = [classify_kernel(name) for name in a.names]
    rule_of_name = np.array([RULES.index(rule) for _, rule in by_name] or [0], dtype=np.int64)
    rules = rule_of_name[a.name] if a.names else np.zeros(len(a.kind), dtype=np.int64)
    collective = RULES.index("collective by name")
    named_comm = np.array([_RULE_GROUP[r] == "communication" for r in RULES])
    rules = np.where((a.kind == COMM) & ~named_comm[rules], collective, rules)
    rules = np.where(a.kind == MEMCPY, RULES.index("memcpy (by kind)"), rules)
    rules = np.where(a.kind == MEMSET, RULES.index("memset (by kind)"), rules)
    group_of_rule = np.array([TRACE_GROUPS.index(_RULE_GROUP[r]) for r in RULES], dtype=np.int64)
    return group_of_rule[rules], rules


def _idle_causes(a: Activities, launch_ts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The gap before each activity on its stream (NaN for a stream's first, or where the stream is unknown)
    and the gap's cause (HOST_WAIT | KERNEL_WAIT | OTHER_WAIT), HolisticTraceAnalysis' idle breakdown."""
    n = len(a.start)
    gap, cause = np.full(n, np.nan), np.full(n, OTHER_WAIT, dtype=np.int64)
    known = np.flatnonzero(a.stream != -1)
    order = known[np.lexsort((a.start[known], a.stream[known], a.device[known]))]
    same = np.zeros(len(order), bool)
    same[1:] = (a.stream[order][1:] == a.stream[order][:-1]) & (a.device[order][1:] == a.device[order][:-1])
    prev_end = np.full(len(order), np.nan)
    prev_end[1:] = a.end[order][:-1]
    prev_end[~same] = np.nan
    gap[order] = np.maximum(a.start[order] - prev_end, 0.0)  # NaN stays NaN
    with np.errstate(invalid="ignore"):
        host = launch_ts[order] > prev_end  # NaN compares False: no launch call, or no previous kernel
        short = ~host & (a.start[order] - prev_end < KERNEL_WAIT_US)
    cause[order] = np.where(host, HOST_WAIT, np.where(short, KERNEL_WAIT, OTHER_WAIT))
    return gap, cause


def _idle_sums(gap: np.ndarray, cause: np.ndarray, idx: np.ndarray) -> dict:
    g, c = gap[idx], cause[idx]
    has = ~np.isnan(g)
    sums = np.bincount(c[has], weights=g[has], minlength=len(IDLE_CAUSES))
    return {f"{name}_us": float(us) for name, us in zip(IDLE_CAUSES, sums)}


def _device_gaps(a: Activities, launch_ts: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The gaps of the device timeline (the union of every stream's activities ``idx``) as (start, end) in whole
    nanoseconds and each gap's cause: HolisticTraceAnalysis' rules applied to the union instead of each stream. The
    activity that ends a gap (the first to start after it; of several starting together, the one launched first)
    decides: *host wait* when its launch call started after the gap began (the whole device ran dry waiting for the
    CPU), else *kernel wait* when the gap is shorter than ``KERNEL_WAIT_US``, else *other*. The gaps are exactly
    the idle of the span: they add up to span − busy."""
    if len(idx) < 2:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    s, e, launch = _ns(a.start[idx]), _ns(a.end[idx]), launch_ts[idx]
    order = np.lexsort((np.where(np.isnan(launch), np.inf, launch), s))
    s, e, launch = s[order], e[order], launch[order]
    g0, g1, opener = union_gaps(s, e)
    with np.errstate(invalid="ignore"):
        host = launch[opener] > g0 / NS  # NaN (no launch call) compares False
    cause = np.where(host, HOST_WAIT, np.where(g1 - g0 < KERNEL_WAIT_US * NS, KERNEL_WAIT, OTHER_WAIT))
    return g0, g1, cause


def _gap_sums(gaps: tuple[np.ndarray, np.ndarray, np.ndarray], lo: int | None = None, hi: int | None = None) -> dict:
    """µs of each cause among the device gaps, or of their parts within the window [lo, hi) (whole ns)."""
    g0, g1, cause = gaps
    if lo is not None and hi is not None:  # the gaps are disjoint and sorted: only those meeting the window
        i, j = np.searchsorted(g1, lo, side="right"), np.searchsorted(g0, hi, side="left")
        g0, g1, cause = np.maximum(g0[i:j], lo), np.minimum(g1[i:j], hi), cause[i:j]
    length = np.maximum(g1 - g0, 0)
    sums = [int(length[cause == c].sum()) for c in range(len(IDLE_CAUSES))]
    return {f"{name}_us": ns / NS for name, ns in zip(IDLE_CAUSES, sums)}


SUMMED = "_summed_over_streams_us"  # HolisticTraceAnalysis' idle breakdown: each stream's gaps, added up


def _summed_over_streams(causes: dict) -> dict:
    """HTA's per-stream idle causes added up, under names that say so (they can exceed the device's idle)."""
    return {key.removesuffix("_us") + SUMMED: us for key, us in causes.items()}


def _launch_stats(launches: _Launches, idx: np.ndarray) -> dict:
    """Launch delay percentiles, the launch-bound activities among ``idx`` and HTA's shorter-than-the-call count."""
    d = launches.delay[idx]
    has = ~np.isnan(d)
    if not has.any():
        return {"launched": 0}
    on = idx[has]
    d, q = d[has], launches.queue[on]
    graph, bound, short = launches.graph[on], launches.bound[on], launches.short[on]
    own = int((~graph).sum())  # activities with a launch call of their own: where launch-bound means something
    p50, p90, p99 = percentiles(d, [50, 90, 99])
    return {
        "launched": int(has.sum()),
        "launch_delay_p50_us": float(p50),
        "launch_delay_p90_us": float(p90),
        "launch_delay_p99_us": float(p99),
        "launch_delay_max_us": float(d.max()),
        "launch_delay_mean_us": float(d.mean()),
        "queue_delay_mean_us": float(q.mean()),
        "graph_launched": int(graph.sum()),
        "launch_bound": int(bound.sum()),
        "launch_bound_share": float(bound.sum()) / own if own else 0.0,
        "launch_wait_us": int(launches.wait_ns[on][bound].sum()) / NS,
        "shorter_than_launch_call": int(short.sum()),
        "shorter_than_launch_call_share": float(short.mean()),
    }


def _steps(trace: TraceFile, sel: np.ndarray, groups: np.ndarray, launches: _Launches) -> tuple[list[TraceStep], str]:
    """ProfilerStep#N spans and the GPU activity in each. The step is the host's: its CPU span, with activities
    placed by the time their launch was called (found through the correlation id); the GPU-side spans only where
    no activity has a launch call to place it by (a ROCm trace's GPU-side annotation can cover its first kernel
    alone, 16 µs of a 16 ms step). Activities are sorted by that time once, so each step costs its own activities,
    not the whole trace.

    Two windows, each figure on one: ``wall_us`` is the ProfilerStep's own span (the host's step); the sums
    (kernel time, groups, copies) and unions of :func:`_time_breakdowns` are of the step's own activities; busy,
    idle and idle by cause are on the step's **GPU window** (``gpu_window_us``: the GPU-side span, or for CPU spans
    from the step's first activity's start to the next step's first, the last step to its last end), on the device
    timeline (every activity of the device within the window), so busy + idle = the window and host wait ≤ idle.
    For CPU spans the host's own time around the GPU's: ``host_before_first_kernel_us``, the device's idle from the
    step's start to its first activity's (video decoding, preprocessing, data loading before any kernel), and
    ``host_after_last_kernel_us``, from its last activity's end to the step's end. HTA's per-stream sums over the
    step's activities are kept as ``…_summed_over_streams_us``."""
    a, gpu_spans, cpu_spans = trace.activities, trace.gpu_steps, trace.cpu_steps
    host = bool(cpu_spans) and bool(np.any(sel & ~np.isnan(launches.launch_ts)))
    if host:
        spans, basis = (
            sorted(cpu_spans),
            "CPU ProfilerStep spans (the host's steps); kernels placed by their launch call's time",
        )
        where = launches.launch_ts
    elif gpu_spans:
        spans, where, basis = sorted(gpu_spans), a.start, "GPU-side ProfilerStep spans (gpu_user_annotation)"
    elif cpu_spans:
        spans, basis = sorted(cpu_spans), "CPU ProfilerStep spans; no activity has a launch call to place it by"
        where = launches.launch_ts
    else:
        return [], "no ProfilerStep annotations in the trace"
    basis += "; busy, idle and its causes on each step's GPU window"
    candidates = np.flatnonzero(sel & ~np.isnan(where))
    candidates = candidates[np.argsort(where[candidates], kind="stable")]
    placed = where[candidates]
    durations = a.end - a.start
    device = np.flatnonzero(sel)
    gaps = _device_gaps(a, launches.launch_ts, device)
    busy = merged(_ns(a.start[device]), _ns(a.end[device])) if len(device) else None
    parts = [
        candidates[np.searchsorted(placed, t0, side="left") : np.searchsorted(placed, t1, side="left")]
        for t0, t1, _ in spans
    ]
    windows = _gpu_windows(a, spans, parts, not host and bool(gpu_spans))
    rows = []
    for (t0, t1, step), idx, (lo, hi), breakdown in zip(spans, parts, windows, _time_breakdowns(a, parts)):
        # the GPU window beside the wall, so a table reads the two windows side by side (filled in below)
        row = {"step": step, "wall_us": t1 - t0, "gpu_window_us": 0.0, "activities": int(len(idx))}
        row["start_us"] = t0  # where the step and its GPU window lie (µs since the trace's origin)
        row["gpu_window_start_us"] = lo / NS
        if host and len(idx):
            row.update(_host_around(busy, int(_ns(np.array(t0))), int(_ns(np.array(t1))), lo, _ns(a.end[idx]).max()))
        row.update({k: v for k, v in breakdown.items() if k not in ("streams", "span_us")})
        sums = np.bincount(groups[idx], weights=durations[idx], minlength=len(TRACE_GROUPS))
        row.update({GROUP_KEYS[group]: float(us) for group, us in zip(TRACE_GROUPS, sums)})
        row.update(_window(busy, gaps, lo, hi))
        row.update(_summed_over_streams(launches.idle(idx)))
        row.update(launches.stats(idx))
        rows.append(TraceStep.of(row))
    return rows, basis


def _host_around(union: tuple[np.ndarray, np.ndarray] | None, t0: int, t1: int, first: int, last: int) -> dict:
    """The device's idle within the host's step [t0, t1) before the step's first activity starts and after its last
    ends (whole ns in; µs out): the host's time that no kernel of the step overlaps."""
    before = max(min(first, t1) - t0, 0)
    after = max(t1 - max(last, t0), 0)
    return {
        "host_before_first_kernel_us": (before - _busy(union, t0, t0 + before)) / NS,
        "host_after_last_kernel_us": (after - _busy(union, t1 - after, t1)) / NS,
    }


def _busy(union: tuple[np.ndarray, np.ndarray] | None, lo: int, hi: int) -> int:
    """ns of the device's union (disjoint, sorted intervals) within [lo, hi)."""
    if union is None or hi <= lo:
        return 0
    g_start, g_end = union
    i, j = np.searchsorted(g_end, lo, side="right"), np.searchsorted(g_start, hi, side="left")
    return int(np.maximum(np.minimum(g_end[i:j], hi) - np.maximum(g_start[i:j], lo), 0).sum())


def _gpu_windows(a: Activities, spans: list, parts: list[np.ndarray], gpu_side: bool) -> list[tuple[int, int]]:
    """Each step's GPU window [lo, hi) in whole ns: a GPU-side span as it is; for a CPU span, its first activity's
    start to the next step's first (the last step, or one followed by none, to its own last end); (0, 0) for a
    CPU step without activities."""
    if gpu_side:
        return [(int(_ns(np.array(t0))), int(_ns(np.array(t1)))) for t0, t1, _ in spans]
    firsts = [int(_ns(a.start[idx]).min()) if len(idx) else None for idx in parts]
    following: list[int | None] = [None] * len(parts)  # the next step's first start (one pass from the end)
    nxt = None
    for i in range(len(parts) - 1, -1, -1):
        following[i] = nxt
        nxt = firsts[i] if firsts[i] is not None else nxt
    out = []
    for lo, after, idx in zip(firsts, following, parts):
        if lo is None:
            out.append((0, 0))
            continue
        hi = after if after is not None else int(_ns(a.end[idx]).max())
        out.append((lo, max(hi, lo)))
    return out


def _window(union: tuple[np.ndarray, np.ndarray] | None, gaps: tuple, lo: int, hi: int) -> dict:
    """Busy (the device's union within [lo, hi)), idle (the window − busy) and idle by cause within a GPU window:
    the device gaps' parts inside it; idle in the window before the device's first activity or after its last,
    which no gap holds, is *other*."""
    window = hi - lo
    busy = _busy(union, lo, hi)
    causes = _gap_sums(gaps, lo, hi)
    idle = window - busy
    causes["other_wait_us"] += (idle - round(sum(causes.values()) * NS)) / NS
    return {
        "gpu_window_us": window / NS,
        "busy_us": busy / NS,
        "idle_us": idle / NS,
        "idle_share": idle / window if window else 0.0,
        **causes,
    }


def _launch_times(trace: TraceFile) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each activity's launch-call start and duration (NaN where no launch has its id) and whether it came from a
    CUDA/HIP graph (:meth:`TraceFile.launch_calls`)."""
    found, at, graph = trace.launch_calls()
    if not len(trace.launch_correlation):
        return np.full(len(at), np.nan), np.full(len(at), np.nan), graph
    dur = trace.launch_dur[at] if len(trace.launch_dur) == len(trace.launch_correlation) else np.full(len(at), np.nan)
    return np.where(found, trace.launch_ts[at], np.nan), np.where(found, dur, np.nan), graph


def analyse_trace(trace: TraceFile, top: int = 20) -> tuple[TraceTables, dict]:
    """Rows (devices, groups, top kernels, idle per stream, launch delays, steps, utilisation bins) as named tables,
    and the summary of the busiest GPU."""
    a = trace.activities
    meta = _file_meta(trace)
    if not len(a.start):
        meta["note"] = "this trace has no GPU kernels or copies: was it recorded with ProfilerActivity.CUDA?"
        return TraceTables(), meta
    by_device = _grouped(a.device, np.arange(len(a.start)))
    kernels = a.kind <= COMM
    kernel_time = [float((a.end[on] - a.start[on])[kernels[on]].sum()) for _, on in by_device]
    device = by_device[int(np.argmax(kernel_time))][0]
    meta["device"] = device
    meta["device_name"] = trace.gpu_names.get(device)  # None: the file names no GPU
    sel = a.device == device
    breakdowns = dict(zip([d for d, _ in by_device], _time_breakdowns(a, [on for _, on in by_device])))
    meta.update(breakdowns[device])
    groups, rules = _group_ids(a)
    idx = np.flatnonzero(sel)
    durations = (a.end - a.start)[idx]
    group_rows, total = _group_rows(groups[idx], durations)
    meta["gpu_time_us"] = total  # kernels + copies + memsets, summed: what group and kernel rows' shares are of
    rule_count = np.bincount(rules[idx], minlength=len(RULES))
    rule_us = np.bincount(rules[idx], weights=durations, minlength=len(RULES))
    meta["rules"] = [
        RuleCount(rule, _RULE_GROUP[rule], int(n), float(us)).to_dict()
        for rule, n, us in zip(RULES, rule_count, rule_us)
    ]
    launches = _Launches.of(trace)
    meta["idle_causes"] = _gap_sums(_device_gaps(a, launches.launch_ts, idx))  # of the device: sums to idle_us
    meta["idle_causes_basis"] = "device"  # runs stored before it hold HTA's sum over streams here
    meta["idle_causes_summed_over_streams"] = launches.idle(idx)  # HTA's get_idle_time_breakdown, streams added
    meta["kernel_wait_threshold_us"] = KERNEL_WAIT_US
    device_gaps = [_gap_sums(_device_gaps(a, launches.launch_ts, on)) for _, on in by_device]
    meta["launch"] = launches.stats(idx)
    idle = [
        StreamIdle.of({"stream": stream, "activities": int(len(on)), **launches.idle(on)})
        for stream, on in _grouped(a.stream[idx], idx)
    ]
    steps, basis = _steps(trace, sel, groups, launches)
    meta["steps"] = len(steps)
    meta["step_basis"] = basis
    tables = TraceTables(
        devices=_device_rows(breakdowns, trace.gpu_names, device_gaps),
        groups=group_rows,
        kernels=_kernel_rows(a, idx, groups, durations, total, top),
        idle=tuple(idle),
        launch_delays=launches.delay_rows(idx),
        steps=tuple(steps),
        busy=_utilisation(a, sel),
    )
    return tables, meta


def _grouped(keys: np.ndarray, idx: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """``idx`` split by ``keys`` (one key each), by key ascending, each part in ``idx``'s order: one sort, not a
    pass over every activity per key (200 k devices or streams would make that quadratic)."""
    order = np.argsort(keys, kind="stable")
    values, first = np.unique(keys[order], return_index=True)
    return [(int(v), part) for v, part in zip(values, np.split(idx[order], first[1:]))]


def _file_meta(trace: TraceFile) -> dict:
    """What the file holds, whichever GPU is analysed: event counts, devices, what was odd in it."""
    return {
        "events": trace.events,
        "gpu_activities": int(len(trace.activities.start)),
        "devices": distinct(trace.activities.device).tolist(),
        "schema_version": trace.schema_version,
        "rank": trace.rank,
        "world_size": trace.world_size,
        "malformed_events": dict(trace.malformed),
        # what was odd in the file: events left out, and what was kept but is worth knowing (never silent)
        "quirks": {**{f"{why} (left out)": n for why, n in trace.malformed.items()}, **trace.quirks},
        "origin_us": trace.origin_us,
        "measure": "sum of kernel durations (kernel time); union of GPU activity intervals (busy); span − busy (idle)",
    }


def _device_rows(breakdowns: dict[int, dict], gpu_names: dict[int, str], gaps: list[dict]) -> tuple[TraceDevice, ...]:
    """A row per GPU (``breakdowns``' order): its times and its idle by cause (``gaps``, in that order)."""
    return tuple(
        TraceDevice.of(
            {"device": d, "name": gpu_names.get(d, f"GPU {d}"), **{k: v for k, v in b.items() if k != "streams"}, **g}
        )
        for (d, b), g in zip(breakdowns.items(), gaps)
    )


MEMORY_GROUP = "memory"  # copies and sets: GPU time, not kernel time


def _group_rows(groups: np.ndarray, durations: np.ndarray) -> tuple[tuple[KernelGroup, ...], float]:
    """One row per group of the analysed GPU's activities (``groups`` and ``durations`` are theirs), and their
    total µs: the GPU time (kernels + copies + memsets, summed), which ``share`` is of. ``kernel_share`` is a
    kernel group's share of the kernel time (kernels only, without the copies and memsets; None for memory)."""
    group_count = np.bincount(groups, minlength=len(TRACE_GROUPS))
    group_us = np.bincount(groups, weights=durations, minlength=len(TRACE_GROUPS))
    total = float(group_us.sum())
    kernel_total = total - float(group_us[TRACE_GROUPS.index(MEMORY_GROUP)])
    rows = tuple(
        KernelGroup(
            group=group,
            count=int(count),
            total_us=float(us),
            share=float(us) / total if total else 0.0,
            kernel_share=None if group == MEMORY_GROUP else float(us) / kernel_total if kernel_total else 0.0,
        )
        for group, count, us in zip(TRACE_GROUPS, group_count, group_us)
    )
    return rows, total


def _kernel_rows(
    a: Activities, idx: np.ndarray, groups: np.ndarray, durations: np.ndarray, total: float, top: int
) -> tuple[Kernel, ...]:
    """The ``top`` names by total time among the activities ``idx``, each in the group of its first launch."""
    by_name: dict[int, list] = {}  # name → [count, total µs, longest µs, group of its first launch]
    names, first = np.unique(a.name[idx], return_index=True)
    counts = np.bincount(a.name[idx], minlength=len(a.names))
    sums = np.bincount(a.name[idx], weights=durations, minlength=len(a.names))
    longest = np.zeros(len(a.names))
    np.maximum.at(longest, a.name[idx], durations)
    for name_i, first_i in zip(names, first):
        n = int(name_i)
        by_name[n] = [int(counts[n]), float(sums[n]), float(longest[n]), TRACE_GROUPS[int(groups[idx[first_i]])]]
    ranked = sorted(by_name.items(), key=lambda kv: -kv[1][1])
    return tuple(
        Kernel(
            rank=rank,
            name=a.names[name_i],
            group=group,
            count=count,
            total_us=us,
            mean_us=us / count,
            max_us=most,
            share=us / total if total else 0.0,
        )
        for rank, (name_i, (count, us, most, group)) in enumerate(ranked[:top], start=1)
    )


@dataclass(frozen=True)
class _Launches:
    """Per activity: the gap before it on its stream and that gap's cause (HTA's per-stream breakdown), its launch
    call's start, the delay from that start (NaN without a call), the queue delay after the call's end, whether a
    CUDA/HIP graph launched it, whether it was **launch-bound** (its own call ended after every earlier activity of
    its device had ended: the GPU had nothing queued and waited on this launch; never for a graph's kernels, whose
    launch is the graph's) with the device gap before it (``wait_ns``), and HTA's "short kernel" (it ran shorter
    than its launch call took on the CPU: meaningless for a graph's kernels, kept as HTA counts it)."""

    gap: np.ndarray
    cause: np.ndarray
    launch_ts: np.ndarray
    delay: np.ndarray
    queue: np.ndarray
    graph: np.ndarray
    bound: np.ndarray
    wait_ns: np.ndarray
    short: np.ndarray

    @classmethod
    def of(cls, trace: TraceFile) -> _Launches:
        a = trace.activities
        launch_ts, launch_dur, graph = _launch_times(trace)
        gap, cause = _idle_causes(a, launch_ts)
        delay = a.start - launch_ts
        reach, has_before = _reach_before(a)  # ns: the latest end among the device's earlier activities
        start = _ns(a.start)
        with np.errstate(invalid="ignore"):
            short = (a.end - a.start) < launch_dur  # NaN (no launch call) compares False
            bound = ~graph & has_before & (launch_ts + launch_dur >= reach / NS)
        wait = np.where(has_before, np.maximum(start - reach, 0), 0)
        return cls(gap, cause, launch_ts, delay, np.maximum(delay - launch_dur, 0.0), graph, bound, wait, short)

    def idle(self, idx: np.ndarray) -> dict:
        return _idle_sums(self.gap, self.cause, idx)

    def stats(self, idx: np.ndarray) -> dict:
        return _launch_stats(self, idx)

    def delay_rows(self, idx: np.ndarray) -> tuple[LaunchDelayBin, ...]:
        """The launch delays of the activities ``idx`` that have a launch call, as a histogram over
        ``DELAY_EDGES_US`` (empty bins left out), with how many in each bin were launch-bound, came from a graph,
        and ran shorter than their launch call (HTA's)."""
        has = idx[~np.isnan(self.delay[idx])]
        if not len(has):
            return ()
        edges = np.array(DELAY_EDGES_US + (np.inf,))
        bins = np.clip(np.searchsorted(edges, self.delay[has], side="right") - 1, 0, len(edges) - 2)
        counts = np.bincount(bins, minlength=len(edges) - 1)
        bound_counts = np.bincount(bins, weights=self.bound[has], minlength=len(edges) - 1)
        graph_counts = np.bincount(bins, weights=self.graph[has], minlength=len(edges) - 1)
        short_counts = np.bincount(bins, weights=self.short[has], minlength=len(edges) - 1)
        return tuple(
            LaunchDelayBin(
                from_us=float(lo),
                to_us=float(hi),
                count=int(counts[b]),
                launch_bound=int(bound_counts[b]),
                graph_launched=int(graph_counts[b]),
                shorter_than_launch_call=int(short_counts[b]),
            )
            for b, (lo, hi) in enumerate(zip(edges[:-1], edges[1:]))
            if counts[b]
        )


def _reach_before(a: Activities) -> tuple[np.ndarray, np.ndarray]:
    """Per activity, in whole ns: the latest end among the activities of its device that started before it (of
    those starting together, the ones earlier in the file), on every stream; and whether it has any (a device's
    first has none; times before the trace's origin are negative, so no value can mark it)."""
    out, has = np.zeros(len(a.start), dtype=np.int64), np.zeros(len(a.start), bool)
    for _, on in _grouped(a.device, np.arange(len(a.start))):
        order = on[np.argsort(a.start[on], kind="stable")]
        reach = np.maximum.accumulate(_ns(a.end[order]))
        out[order[1:]] = reach[:-1]
        has[order[1:]] = True
    return out, has


UTILISATION_BINS = 2000


def _utilisation(a: Activities, sel: np.ndarray, bins: int = UTILISATION_BINS) -> tuple[BusyBin, ...]:
    """Share of each time bin the GPU was busy, per kind: the busy/idle timeline at ≤ ``bins`` points. Worked out
    as whole columns: every trace stores these bins, so a bin at a time was a fixed cost of each import."""
    s, e, k = a.start[sel], a.end[sel], a.kind[sel]
    t0, t1 = float(s.min()), float(e.max())
    edges = np.linspace(t0, t1, bins + 1)
    width = (t1 - t0) / bins if t1 > t0 else 1.0

    def share(covered: np.ndarray) -> np.ndarray:  # at most the whole bin: the float sums can pass it by ~1e-9
        return np.minimum(covered / width, 1.0)

    columns = {"t_ms": (edges[:-1] - t0) / 1000, "busy_share": share(_coverage(s, e, edges))}
    for i, name in enumerate(KINDS):
        m = k == i
        columns[f"{name}_share"] = share(_coverage(s[m], e[m], edges))
    return BusyBin.series({key: column.tolist() for key, column in columns.items()})


def _coverage(s: np.ndarray, e: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """µs of each bin covered by the union of the intervals."""
    out = np.zeros(len(edges) - 1)
    if not len(s):
        return out
    g_start, g_end = merged(s, e)
    # covered length of [edges[0], x] as a function: integral of the union's indicator
    starts_cum = np.concatenate([[0.0], np.cumsum(g_end - g_start)])

    def covered_until(x: np.ndarray) -> np.ndarray:
        j = np.searchsorted(g_start, x, side="right")  # intervals starting before x
        full = starts_cum[np.maximum(j - 1, 0)]
        partial = np.where(
            j > 0, np.clip(x - g_start[np.maximum(j - 1, 0)], 0, (g_end - g_start)[np.maximum(j - 1, 0)]), 0.0
        )
        return np.where(j > 0, full + partial, 0.0)

    cum = covered_until(edges)
    return np.diff(cum)

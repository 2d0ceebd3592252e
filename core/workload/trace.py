"""Reading a Chrome/Kineto profiler trace (``torch.profiler`` ``export_chrome_trace``, TensorBoard's
``*.pt.trace.json[.gz]``) recorded on any machine, and what its GPU did.

Every GPU activity (``kernel``, ``gpu_memcpy``, ``gpu_memset``; the 2021 names ``Kernel``/``Memcpy``/
``Memset`` too) becomes an interval on its device. Definitions, per device:

- **kernel time**: the sum of kernel durations (as ``torch.profiler``'s "CUDA total" and HolisticTrace-
  Analysis's kernel breakdown count it; overlapping kernels on two streams count twice);
- **busy**: the union of all GPU activity intervals; **span**: first GPU activity start to last end;
  **idle** = span − busy (HolisticTraceAnalysis's temporal breakdown uses the same three);
- **compute / memcpy / communication**: unions of compute kernels, copies and sets, and collective kernels
  (NCCL/RCCL names); their pairwise overlaps and the *exposed* communication no compute hides;
- **groups**: compute kernels by :func:`core.measure.kernels.classify`, the step benchmark's groups;
- **steps**: ``ProfilerStep#N`` spans — on the GPU timeline where the trace has them, else the CPU
  span, with kernels placed by the time their launch was called.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from core.intake import InputRefused, loads_json, read_input
from core.measure.kernels import GROUPS, classify
from core.units import MIB

MAX_TRACE_BYTES = 1024 * MIB  # decompressed JSON; parsed whole
WHAT = "profiler trace"
KINDS = ("compute", "communication", "memcpy", "memset")
COMPUTE, COMM, MEMCPY, MEMSET = range(4)
TRACE_GROUPS = GROUPS + ("communication", "memcpy", "memset")
_CATEGORY = {"kernel": None, "gpu_memcpy": MEMCPY, "memcpy": MEMCPY, "gpu_memset": MEMSET, "memset": MEMSET}
_COMM = re.compile(r"nccl|rccl|all_?reduce|all_?gather|reduce_?scatter|alltoall|sendrecv", re.I)
_STEP = re.compile(r"^ProfilerStep#(\d+)$")
_LAUNCH_CATS = {"cuda_runtime", "cuda_driver", "runtime"}


def read_trace(path) -> dict:
    """A trace file's JSON (gzip by content), refused with a clear reason if it is not a Chrome trace."""
    raw = read_input(path, MAX_TRACE_BYTES, WHAT)
    if not raw.strip():
        raise InputRefused(f"the {WHAT} is empty ({len(raw)} bytes)")
    data = loads_json(raw, what=WHAT)
    if isinstance(data, list):
        data = {"traceEvents": data}
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        found = (
            f"an object with keys {', '.join(map(str, list(data)[:6]))}"
            if isinstance(data, dict)
            else f"a {type(data).__name__}"
        )
        raise InputRefused(
            f"this is not a Chrome/Kineto {WHAT}: expected an object with a 'traceEvents' list "
            f"(what torch.profiler's export_chrome_trace writes), found {found}"
        )
    if not any(isinstance(e, dict) and "ph" in e for e in data["traceEvents"]):
        raise InputRefused(
            f"this is not a Chrome/Kineto {WHAT}: its 'traceEvents' holds no trace event (an object with a 'ph' phase)"
        )
    return data


def _num(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


@dataclass
class Activities:
    """Every GPU activity of a trace as arrays (µs)."""

    start: np.ndarray
    end: np.ndarray
    kind: np.ndarray  # COMPUTE | COMM | MEMCPY | MEMSET
    device: np.ndarray
    stream: np.ndarray
    name: np.ndarray  # index into names
    correlation: np.ndarray  # -1 where absent
    names: list[str]


def gpu_activities(events: list) -> Activities:
    cols: dict[str, list] = defaultdict(list)
    names: dict[str, int] = {}
    for e in events:
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        cat = str(e.get("cat", "")).lower()
        if cat not in _CATEGORY:
            continue
        ts, dur = _num(e.get("ts")), _num(e.get("dur"))
        if ts is None or dur is None or dur < 0:
            continue
        args = e.get("args") if isinstance(e.get("args"), dict) else {}
        name = str(e.get("name", "?"))
        kind = _CATEGORY[cat]
        if kind is None:
            kind = COMM if _COMM.search(name) else COMPUTE
        device = _num(args.get("device"))
        stream = _num(args.get("stream"))
        corr = _num(args.get("correlation"))
        cols["start"].append(ts)
        cols["end"].append(ts + dur)
        cols["kind"].append(kind)
        cols["device"].append(int(device) if device is not None else int(_num(e.get("pid")) or 0))
        cols["stream"].append(int(stream) if stream is not None else -1)
        cols["name"].append(names.setdefault(name, len(names)))
        cols["correlation"].append(int(corr) if corr is not None else -1)
    as_array = {
        k: np.array(cols.get(k, []), dtype=float if k in ("start", "end") else np.int64)
        for k in ("start", "end", "kind", "device", "stream", "name", "correlation")
    }
    return Activities(**as_array, names=list(names))


def merged_intervals(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of intervals as disjoint ones, sorted: (starts, ends). Inputs must be non-empty."""
    order = np.argsort(start, kind="stable")
    s, e = start[order], end[order]
    reach = np.maximum.accumulate(e)
    new = np.ones(len(s), bool)
    new[1:] = s[1:] > reach[:-1]
    group = np.cumsum(new) - 1
    g_end = np.zeros(int(group[-1]) + 1)
    np.maximum.at(g_end, group, e)
    return s[new], g_end


def union_us(start: np.ndarray, end: np.ndarray) -> float:
    """Length of the union of intervals."""
    if not len(start):
        return 0.0
    g_start, g_end = merged_intervals(start, end)
    return float((g_end - g_start).sum())


def _time_breakdown(a: Activities, sel: np.ndarray) -> dict:
    """Busy, idle, unions and overlaps of the selected activities."""
    s, e, k = a.start[sel], a.end[sel], a.kind[sel]
    if not len(s):
        return {}
    span = float(e.max() - s.min())
    busy = union_us(s, e)

    def union_of(*kinds) -> float:
        m = np.isin(k, kinds)
        return union_us(s[m], e[m])

    compute, comm, copy = union_of(COMPUTE), union_of(COMM), union_of(MEMCPY, MEMSET)
    compute_and_comm = compute + comm - union_of(COMPUTE, COMM)  # |A ∩ B| = |A| + |B| − |A ∪ B|
    kernels = (k == COMPUTE) | (k == COMM)
    return {
        "span_us": span,
        "busy_us": busy,
        "idle_us": span - busy,
        "idle_share": (span - busy) / span if span else 0.0,
        "kernel_time_us": float((e - s)[kernels].sum()),
        "kernel_count": int(kernels.sum()),
        "compute_kernel_time_us": float((e - s)[k == COMPUTE].sum()),
        "communication_kernel_time_us": float((e - s)[k == COMM].sum()),
        "memcpy_time_us": float((e - s)[k == MEMCPY].sum()),
        "memset_time_us": float((e - s)[k == MEMSET].sum()),
        "compute_union_us": compute,
        "communication_union_us": comm,
        "copy_union_us": copy,
        "compute_and_communication_us": compute_and_comm,
        "compute_and_copy_us": compute + copy - union_of(COMPUTE, MEMCPY, MEMSET),
        "communication_and_copy_us": comm + copy - union_of(COMM, MEMCPY, MEMSET),
        "exposed_communication_us": comm - compute_and_comm,
        "streams": sorted({int(x) for x in a.stream[sel]}),
    }


def _group(a: Activities, i: int) -> str:
    kind = int(a.kind[i])
    if kind == COMPUTE:
        return classify(a.names[int(a.name[i])], None)
    return KINDS[kind]


def _steps(events: list, a: Activities, sel: np.ndarray) -> tuple[list[dict], str]:
    """ProfilerStep#N spans and the GPU activity in each: GPU-side spans if the trace has them, else CPU spans
    with activities placed by their launch call's time (found through the correlation id)."""
    gpu_spans, cpu_spans, launches = [], [], {}
    for e in events:
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        ts, dur = _num(e.get("ts")), _num(e.get("dur"))
        if ts is None or dur is None:
            continue
        cat = str(e.get("cat", "")).lower()
        m = _STEP.match(str(e.get("name", "")))
        if m:
            (gpu_spans if cat == "gpu_user_annotation" else cpu_spans).append((ts, ts + dur, int(m.group(1))))
        elif cat in _LAUNCH_CATS and isinstance(e.get("args"), dict):
            corr = _num(e["args"].get("correlation"))
            if corr is not None:
                launches[int(corr)] = ts
    if gpu_spans:
        spans, where, basis = sorted(gpu_spans), a.start, "GPU-side ProfilerStep spans (gpu_user_annotation)"
    elif cpu_spans:
        spans, basis = sorted(cpu_spans), "CPU ProfilerStep spans; kernels placed by their launch time"
        where = (
            np.array([launches.get(int(c), np.nan) for c in a.correlation], dtype=float)
            if len(a.correlation)
            else np.zeros(0)
        )
    else:
        return [], "no ProfilerStep annotations in the trace"
    rows = []
    for t0, t1, step in spans:
        inside = sel & (where >= t0) & (where < t1)
        idx = np.flatnonzero(inside)
        row = {"kind": "step", "step": step, "wall_us": t1 - t0, "activities": int(len(idx))}
        row.update({k: v for k, v in _time_breakdown(a, inside).items() if k != "streams"})
        for group in TRACE_GROUPS:
            row[f"{group}_us"] = 0.0
        for i in idx:
            row[f"{_group(a, i)}_us"] += float(a.end[i] - a.start[i])
        rows.append(row)
    return rows, basis


def analyse_trace(data: dict, top: int = 20) -> tuple[list[dict], dict]:
    """Rows (groups, top kernels, steps, devices, utilisation bins) and the summary of the busiest GPU."""
    events = data["traceEvents"]
    a = gpu_activities(events)
    props = data.get("deviceProperties") or data.get("computeProperties") or []
    gpu_names = {p.get("id"): str(p.get("name")) for p in props if isinstance(p, dict)}
    meta = {
        "events": len(events),
        "gpu_activities": int(len(a.start)),
        "devices": sorted({int(d) for d in a.device}),
        "schema_version": data.get("schemaVersion"),
        "rank": (data.get("distributedInfo") or {}).get("rank")
        if isinstance(data.get("distributedInfo"), dict)
        else None,
        "measure": "sum of kernel durations (kernel time); union of GPU activity intervals (busy); span − busy (idle)",
    }
    if not len(a.start):
        meta["note"] = "this trace has no GPU kernels or copies: was it recorded with ProfilerActivity.CUDA?"
        return [], meta
    kernel_time = {int(d): float((a.end - a.start)[(a.device == d) & (a.kind <= COMM)].sum()) for d in meta["devices"]}
    device = max(kernel_time, key=kernel_time.get)
    meta["device"] = device
    meta["device_name"] = gpu_names.get(device, f"GPU {device}")
    sel = a.device == device
    breakdowns = {d: _time_breakdown(a, a.device == d) for d in meta["devices"]}
    meta.update(breakdowns[device])
    rows: list[dict] = [
        {
            "kind": "device",
            "device": d,
            "name": gpu_names.get(d, f"GPU {d}"),
            **{k: v for k, v in breakdowns[d].items() if k != "streams"},
        }
        for d in meta["devices"]
    ]
    by_name: dict[int, list] = defaultdict(lambda: [0, 0.0, 0.0, ""])
    by_group: dict[str, list] = defaultdict(lambda: [0, 0.0])
    idx = np.flatnonzero(sel)
    durations = a.end - a.start
    for i in idx:
        g = _group(a, i)
        entry = by_name[int(a.name[i])]
        entry[0] += 1
        entry[1] += float(durations[i])
        entry[2] = max(entry[2], float(durations[i]))
        entry[3] = entry[3] or g  # a name's group: that of its first launch
        by_group[g][0] += 1
        by_group[g][1] += float(durations[i])
    total = sum(v[1] for v in by_group.values())
    for group in TRACE_GROUPS:
        count, us = by_group.get(group, (0, 0.0))
        rows.append(
            {"kind": "group", "group": group, "count": count, "total_us": us, "share": us / total if total else 0.0}
        )
    ranked = sorted(by_name.items(), key=lambda kv: -kv[1][1])
    for rank, (name_i, (count, us, longest, group)) in enumerate(ranked[:top], start=1):
        rows.append(
            {
                "kind": "kernel",
                "rank": rank,
                "name": a.names[name_i],
                "group": group,
                "count": count,
                "total_us": us,
                "mean_us": us / count,
                "max_us": longest,
                "share": us / total if total else 0.0,
            }
        )
    steps, basis = _steps(events, a, sel)
    rows += steps
    meta["steps"] = len(steps)
    meta["step_basis"] = basis
    rows += _utilisation(a, sel)
    return rows, meta


UTILISATION_BINS = 2000


def _utilisation(a: Activities, sel: np.ndarray, bins: int = UTILISATION_BINS) -> list[dict]:
    """Share of each time bin the GPU was busy, per kind: the busy/idle timeline at ≤ ``bins`` points."""
    s, e, k = a.start[sel], a.end[sel], a.kind[sel]
    t0, t1 = float(s.min()), float(e.max())
    edges = np.linspace(t0, t1, bins + 1)
    width = (t1 - t0) / bins if t1 > t0 else 1.0
    rows = []
    covered = {}
    for i, name in enumerate(KINDS):
        m = k == i
        covered[name] = _coverage(s[m], e[m], edges)
    everything = _coverage(s, e, edges)
    for b in range(bins):
        rows.append(
            {
                "kind": "busy",
                "t_ms": (edges[b] - t0) / 1000,
                "busy_share": everything[b] / width,
                **{f"{name}_share": covered[name][b] / width for name in KINDS},
            }
        )
    return rows


def _coverage(s: np.ndarray, e: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """µs of each bin covered by the union of the intervals."""
    out = np.zeros(len(edges) - 1)
    if not len(s):
        return out
    g_start, g_end = merged_intervals(s, e)
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


def report_lines(meta: dict, rows: list[dict]) -> list[str]:
    """The trace summary as text (``python -m core trace FILE``)."""
    if not meta.get("gpu_activities"):
        return [meta.get("note", "no GPU activity")]
    ms = 1000.0
    out = [
        f"{meta['events']:,} events; GPU {meta['device']} ({meta['device_name']}) of {meta['devices']}: "
        f"{meta['kernel_count']:,} kernels on streams {meta['streams']}",
        f"kernel time {meta['kernel_time_us'] / ms:,.3f} ms (sum of durations); busy {meta['busy_us'] / ms:,.3f} ms "
        f"of a {meta['span_us'] / ms:,.3f} ms span — idle {meta['idle_us'] / ms:,.3f} ms ({meta['idle_share']:.1%})",
        f"compute {meta['compute_union_us'] / ms:,.3f} ms, copies {meta['copy_union_us'] / ms:,.3f} ms, "
        f"communication {meta['communication_union_us'] / ms:,.3f} ms (exposed "
        f"{meta['exposed_communication_us'] / ms:,.3f} ms); overlap compute∩comm "
        f"{meta['compute_and_communication_us'] / ms:,.3f} ms, compute∩copy {meta['compute_and_copy_us'] / ms:,.3f} ms",
        "groups:",
    ]
    for r in rows:
        if r["kind"] == "group" and r["count"]:
            out.append(
                f"  {r['group']:<18} {r['total_us'] / ms:>10,.3f} ms  {r['share']:6.1%}  {r['count']:>7,} launches"
            )
    out.append("top kernels:")
    for r in rows:
        if r["kind"] == "kernel":
            name = r["name"] if len(r["name"]) <= 90 else r["name"][:87] + "…"
            out.append(f"  {r['total_us'] / ms:>10,.3f} ms  {r['share']:6.1%}  ×{r['count']:<6,} [{r['group']}] {name}")
    steps = [r for r in rows if r["kind"] == "step"]
    out.append(f"steps ({meta['step_basis']}):" if steps else meta["step_basis"])
    for r in steps:
        out.append(
            f"  step {r['step']:>5}: wall {r['wall_us'] / ms:,.3f} ms, kernels {r.get('kernel_time_us', 0) / ms:,.3f} ms, "
            f"busy {r.get('busy_us', 0) / ms:,.3f} ms, idle {r.get('idle_us', 0) / ms:,.3f} ms"
        )
    return out

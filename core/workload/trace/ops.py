"""Kernels → operators → modules: which CPU operator launched each GPU activity, and in which module.

Each activity of the analysed GPU is traced to its launch call (the runtime event with its correlation id), and
the call to the **operator**: the innermost CPU operator (``cpu_op``) on the call's thread whose span holds the
call's start — ``aten::mm`` under ``aten::matmul`` under ``aten::linear``, where the FLOPs are counted
(:mod:`core.workload.trace.op_flops`); of two with the same span, the later in the file (Kineto writes a caller before
its callee: ``aten::_local_scalar_dense`` within ``aten::item``). Its **module** is the innermost ``nn.Module: …`` Python event (recorded with
``with_stack``/``with_modules``) or user annotation around the operator, else, for backward work, the autograd
node (``autograd::engine::evaluate_function: MmBackward0``) it runs under; else none is recorded. An activity
without a launch call in the trace, or whose call no operator holds, is counted under :data:`NO_OP`; one a CUDA/HIP
graph replayed (:meth:`~core.workload.trace.file.TraceFile.launch_calls`), with no operator around the launch,
under :data:`GRAPH_OP`.

Per operator and module: the GPU time (the sum of its activities' durations: kernels, copies and sets), how
many kernels, and how many times the operator ran; per module the same; per operator over every module
(``op_totals``: an operator's name is the same on any GPU, so a diff matches an H100's and an MI300's kernels
through it). Two patterns are named:

- **unfused attention**: a module whose operators include a softmax (``aten::softmax``/``_softmax``/
  ``_safe_softmax``) and a batched matmul (``aten::bmm``/``baddbmm``/``matmul``): attention computed as
  separate kernels; ``scaled_dot_product_attention`` fuses them (the time is that of those operators there);
- **many tiny elementwise kernels**: elementwise kernels (the kernel rules' group) shorter than
  :data:`TINY_US` making up at least :data:`TINY_SHARE` of the kernels (and :data:`TINY_MIN` of them): each is mostly launch and memory
  traffic, a fusion or ``torch.compile`` candidate (the time is theirs, with the operators launching most).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from core.arrays import distinct
from core.measure.kernels import classify_kernel
from core.units import us_text
from core.workload.findings import Finding
from core.workload.trace.cpu_ops import ANNOTATION, OP, PYTHON, RUNTIME, CpuOps
from core.workload.trace.file import COMM, MEMCPY, MEMSET, TraceFile
from core.workload.trace.op_flops import UNALIGNED, add_rates

NO_OP = "(no CPU operator: no launch call in the trace, or none around it)"
GRAPH_OP = "(a CUDA/HIP graph's replay: its operators ran when it was captured, not in this trace)"
PLACEHOLDERS = (NO_OP, GRAPH_OP)  # what stands for an operator where there is none
_NONE, _GRAPH = -1, -2  # the operator names of those rows
NO_MODULE = "(none recorded)"
TOP = 20
TINY_US = 10.0
TINY_SHARE = 0.25
TINY_MIN = 100
MIN_SPAN_SHARE = 0.05
_MODULE = re.compile(r"^nn\.Module: ")
_BACKWARD = "autograd::engine::evaluate_function: "
_SOFTMAX = re.compile(r"^aten::(_safe_softmax|_softmax|softmax)$")
_BMM = re.compile(r"^aten::(bmm|baddbmm|matmul)$")
_LAYER_NUMBER = re.compile(r"_\d+$")  # nn.Module: TimesformerSelfAttention_5 → one name for every layer's


def _tree(ops: CpuOps) -> tuple[np.ndarray, np.ndarray]:
    """The host's operators, annotations and Python events sorted by (thread, start, longest first), and each
    one's parent: the innermost earlier one on its thread that holds it (-1 for none), as indices into the sort."""
    events = np.flatnonzero(ops.kind != RUNTIME)
    order = events[np.lexsort((-ops.end[events], ops.start[events], ops.tid[events]))]
    end, tid = ops.end[order].tolist(), ops.tid[order].tolist()
    parent = np.full(len(order), -1, np.int64)
    stack: list[int] = []
    last_tid = None
    for i in range(len(order)):
        if tid[i] != last_tid:
            stack.clear()
            last_tid = tid[i]
        while stack and end[stack[-1]] < end[i]:
            stack.pop()
        if stack:
            parent[i] = stack[-1]
        stack.append(i)
    return order, parent


def _walk(start: np.ndarray, parent: np.ndarray, want: np.ndarray) -> np.ndarray:
    """From each position in ``start`` (-1: none), up the parents to the first where ``want`` holds (-1 if none)."""
    cur = start.copy()
    for _ in range(len(parent) + 1):
        moving = (cur >= 0) & ~want[np.maximum(cur, 0)]
        if not moving.any():
            break
        cur[moving] = parent[cur[moving]]
    return cur


def attribute(trace: TraceFile, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """For the activities ``idx``: the host event index of the operator that launched each (-1: none), and its
    module (an index into the returned labels)."""
    ops = trace.ops
    op_of = np.full(len(idx), -1, np.int64)
    module_of = np.zeros(len(idx), np.int64)
    labels = [NO_MODULE]
    found, call = trace.launch_events(idx)
    if not found.any():
        return op_of, module_of, labels
    order, parent = _tree(ops)
    if not len(order):
        return op_of, module_of, labels
    tid, start = ops.tid[order], ops.start[order]
    # the last event on the call's thread starting at or before the call, then up to the first that holds it
    key_t, key_s = ops.tid[call], ops.start[call]
    pos = np.full(len(idx), -1, np.int64)
    for t in distinct(key_t[found]).tolist():
        lo, hi = np.searchsorted(tid, t, "left"), np.searchsorted(tid, t, "right")
        mine = found & (key_t == t)
        pos[mine] = lo + np.searchsorted(start[lo:hi], key_s[mine], "right") - 1
        pos[mine & (pos < lo)] = -1
    ends = ops.end[order]
    at = pos.copy()  # the nearest event, then up while it ends before the call
    for _ in range(len(order) + 1):
        moving = (at >= 0) & (ends[np.maximum(at, 0)] < key_s)
        if not moving.any():
            break
        at[moving] = parent[at[moving]]
    kind, names = ops.kind[order], ops.name[order]
    is_op = kind == OP
    inner = _walk(at, parent, is_op)
    op_of = np.where(inner >= 0, order[np.maximum(inner, 0)], -1)
    module_name = np.array([bool(_MODULE.match(n)) for n in ops.names] or [False])
    is_module = ((kind == PYTHON) & module_name[names]) | (kind == ANNOTATION)
    module = _walk(inner, parent, is_module)
    top = inner.copy()  # the outermost operator: a backward node names the module of backward work
    for _ in range(len(order) + 1):
        up = (top >= 0) & (parent[np.maximum(top, 0)] >= 0)
        if not up.any():
            break
        top[up] = parent[top[up]]
    numbered: dict[str, int] = {}
    for i, (m, t) in enumerate(zip(module.tolist(), top.tolist())):
        text = NO_MODULE
        if m >= 0:
            text = ops.names[int(names[m])]
        elif t >= 0 and ops.names[int(names[t])].startswith(_BACKWARD):
            text = ops.names[int(names[t])]
        if text not in numbered:
            numbered[text] = len(labels) if text != NO_MODULE else 0
            if text != NO_MODULE:
                labels.append(text)
        module_of[i] = numbered[text]
    return op_of, module_of, labels


@dataclass
class _Tally:
    """What one operator (in one module, or in all) put on the GPU."""

    us: float = 0.0
    kernels: int = 0
    copies: int = 0  # an operator such as aten::copy_ may launch no kernel at all
    memsets: int = 0
    events: set[int] = field(default_factory=set)  # the operator's calls (host event indices)

    def add(self, other: _Tally) -> None:
        self.us += other.us
        self.kernels += other.kernels
        self.copies += other.copies
        self.memsets += other.memsets
        self.events |= other.events

    def counts(self) -> dict:
        return {"gpu_time_us": self.us, "kernels": self.kernels, "copies": self.copies, "memsets": self.memsets}


def _sums(trace: TraceFile, idx: np.ndarray) -> tuple[dict, list[str], np.ndarray, np.ndarray, np.ndarray]:
    """The activities ``idx`` by (operator name, module): ``{(name, module): _Tally}`` (name -1: no operator),
    the module labels, and each activity's operator event, operator name and duration."""
    a, ops = trace.activities, trace.ops
    op_of, module_of, modules = attribute(trace, idx)
    dur = (a.end - a.start)[idx]
    kind = a.kind[idx]
    op_name = np.full(len(op_of), _NONE, np.int64)
    op_name[op_of >= 0] = ops.name[op_of[op_of >= 0]]
    op_name[(op_of < 0) & trace.launch_calls()[2][idx]] = _GRAPH
    rows: dict[tuple[int, int], _Tally] = {}
    for n, m, d, k, e in zip(op_name.tolist(), module_of.tolist(), dur.tolist(), kind.tolist(), op_of.tolist()):
        row = rows.setdefault((n, m), _Tally())
        row.us += d
        row.kernels += k <= COMM
        row.copies += k == MEMCPY
        row.memsets += k == MEMSET
        if e >= 0:
            row.events.add(e)
    return rows, modules, op_of, op_name, dur


def _label(names: list[str], n: int) -> str:
    """An operator row's name: the operator's, or what stands for one (-1 none, -2 a graph's replay)."""
    return names[n] if n >= 0 else GRAPH_OP if n == _GRAPH else NO_OP


def _totals(rows: dict, names: list[str], total: float) -> list[dict]:
    """Each operator over every module, the most GPU time first: ``{"op", "gpu_time_us", "share", "kernels",
    "copies", "memsets", "calls"}``."""
    by_op: dict[int, _Tally] = {}
    for (n, _), tally in rows.items():
        by_op.setdefault(n, _Tally()).add(tally)
    return [
        {"op": _label(names, n), **t.counts(), "share": t.us / total if total else 0.0, "calls": len(t.events)}
        for n, t in sorted(by_op.items(), key=lambda kv: -kv[1].us)
    ]


def op_totals(trace: TraceFile, device: int) -> list[dict]:
    """Every operator's GPU time on ``device`` over every module (as ``op_totals`` of :func:`op_breakdown`, all of
    them): what a job's ranks are compared by, an operator missing on a rank counting 0."""
    idx = np.flatnonzero(trace.activities.device == device)
    if not len(idx):
        return []
    rows, _, _, _, dur = _sums(trace, idx)
    return _totals(rows, trace.ops.names, float(dur.sum()))


def op_breakdown(trace: TraceFile, device: int, top: int = TOP) -> dict:
    """The analysed GPU's time by operator and module, the top ``top`` of each, and the patterns found:
    ``{"ops": [...], "op_totals": [...], "modules": [...], "op_patterns": [...], "ops_gpu_time_us",
    "ops_attributed_us", "ops_attributed_share"}`` (the keys of the run's meta)."""
    a, ops = trace.activities, trace.ops
    idx = np.flatnonzero(a.device == device)
    if not len(idx):
        return {}
    rows, modules, op_of, op_name, dur = _sums(trace, idx)
    total = float(dur.sum())

    ranked = sorted(rows.items(), key=lambda kv: -kv[1].us)[:top]
    op_rows = [
        {
            "op": _label(ops.names, n),
            "module": modules[m],
            **t.counts(),
            "share": t.us / total if total else 0.0,
            "calls": len(t.events),
        }
        for (n, m), t in ranked
    ]
    reference = add_rates(trace, device, op_rows, [sorted(t.events) for _, t in ranked], op_of, idx, dur)
    by_module: dict[int, _Tally] = {}
    named_ops: dict[int, int] = {}
    for (n, m), t in rows.items():
        by_module.setdefault(m, _Tally()).add(t)
        named_ops[m] = named_ops.get(m, 0) + (n >= 0)
    module_rows = [
        {"module": modules[m], **t.counts(), "share": t.us / total if total else 0.0, "ops": named_ops[m]}
        for m, t in sorted(by_module.items(), key=lambda kv: -kv[1].us)[:top]
    ]
    attributed = float(dur[op_of >= 0].sum())
    patterns = _unfused_attention(rows, modules, ops) + _tiny_elementwise(trace, idx, dur, op_name)
    unaligned = _unaligned_op(trace, idx, dur, op_of)
    return {
        "ops": op_rows,
        "op_totals": _totals(rows, ops.names, total)[:top],
        "modules": module_rows,
        "op_patterns": patterns,
        "ops_gpu_time_us": total,
        "ops_attributed_us": attributed,
        "ops_attributed_share": attributed / total if total else 0.0,
        "ops_reference": reference,
        "unaligned_op": unaligned,
    }


def _unaligned_op(trace: TraceFile, idx: np.ndarray, dur: np.ndarray, op_of: np.ndarray) -> dict | None:
    """The operator call holding the most time in GEMM kernels for unaligned operands, with its shapes and the
    dimensions in them that are not a multiple of 8 (the evidence of why cuBLAS chose them); None without any."""
    a, ops = trace.activities, trace.ops
    hit = np.array([bool(UNALIGNED.search(n)) for n in a.names] or [False])[a.name[idx]] & (op_of >= 0)
    if not hit.any():
        return None
    time = np.bincount(op_of[hit], weights=dur[hit], minlength=len(ops.name))
    event = int(np.argmax(time))
    dims = ops.shapes[int(ops.shape[event])][0] if ops.shape[event] >= 0 else ""
    numbers = [int(n) for n in re.findall(r"\d+", dims)]
    odd = sorted({n for n in numbers if n % 8 and n > 8})
    return {"op": ops.names[int(ops.name[event])], "dims": dims, "odd": odd, "time_us": float(time[event])}


def _unfused_attention(rows: dict, modules: list[str], ops: CpuOps) -> list[dict]:
    found: dict[int, dict] = {}
    for (n, m), t in rows.items():
        if n < 0 or not m:
            continue
        name = ops.names[n]
        kind = "softmax" if _SOFTMAX.match(name) else "bmm" if _BMM.match(name) else None
        if kind:
            f = found.setdefault(m, {"softmax": 0.0, "bmm": 0.0, "ops": set(), "kernels": 0})
            f[kind] += t.us
            f["ops"].add(name)
            f["kernels"] += t.kernels
    return [
        {
            "pattern": "unfused attention",
            "module": modules[m],
            "time_us": f["softmax"] + f["bmm"],
            "kernels": f["kernels"],
            "ops": sorted(f["ops"]),
            "advice": "softmax and batched matmuls as separate kernels: torch.nn.functional."
            "scaled_dot_product_attention fuses them",
        }
        for m, f in sorted(found.items(), key=lambda kv: -(kv[1]["softmax"] + kv[1]["bmm"]))
        if f["softmax"] and f["bmm"]
    ]


def _tiny_elementwise(trace: TraceFile, idx: np.ndarray, dur: np.ndarray, op_name: np.ndarray) -> list[dict]:
    a, ops = trace.activities, trace.ops
    kernel = a.kind[idx] <= COMM
    group = np.array([classify_kernel(n)[0] == "elementwise" for n in a.names] or [False])
    tiny = kernel & group[a.name[idx]] & (dur < TINY_US)
    count, kernels = int(tiny.sum()), int(kernel.sum())
    if count < TINY_MIN or count < TINY_SHARE * kernels:
        return []
    names, counts = np.unique(op_name[tiny], return_counts=True)
    top = [
        {"op": _label(ops.names, int(n)), "kernels": int(c)}
        for n, c in sorted(zip(names.tolist(), counts.tolist()), key=lambda nc: -nc[1])[:5]
    ]
    return [
        {
            "pattern": "many tiny elementwise kernels",
            "time_us": float(dur[tiny].sum()),
            "kernels": count,
            "of_kernels": kernels,
            "below_us": TINY_US,
            "ops": top,
            "advice": "each is mostly launch and memory traffic: fuse them (torch.compile, a fused optimizer, "
            "foreach ops) or capture them in a CUDA graph",
        }
    ]


def _unfused_attention_finding(patterns: list[dict], span: float) -> Finding | None:
    """One finding for every module running unfused attention (a model's layers each have theirs): how many, their
    time together, and the modules' common name."""
    if not patterns or not span:
        return None
    time = sum(p["time_us"] for p in patterns)
    share = time / span
    if share < MIN_SPAN_SHARE:
        return None
    names = sorted({_LAYER_NUMBER.sub("_…", p["module"]) for p in patterns})
    where = ", ".join(names[:3]) + (", …" if len(names) > 3 else "")
    if len(patterns) > 1:
        where = f"{len(patterns):,} modules ({where})"
    ops = sorted({op for p in patterns for op in p["ops"]})
    kernels = sum(p["kernels"] for p in patterns)
    what = f"unfused attention in {where}: {', '.join(ops)} take {us_text(time)} ({share:.1%} of the span) over {kernels:,} kernels"
    # the attention kernel group's finding says the same time less precisely: one of the two is said
    return Finding("op_pattern", what, 100 * share, "%", advice=f" — {patterns[0]['advice']}", time_us=time,
                   cause="attention kernels", extra={"count": len(patterns)})  # fmt: skip


def op_findings(meta: dict) -> list[Finding]:
    """The patterns as findings (each ≥ 5 % of the span): unfused attention once for all the modules running it,
    with their count and total; the tiny elementwise kernels naming the operators launching most."""
    span = meta.get("span_us") or 0.0
    patterns = meta.get("op_patterns") or []
    attention = _unfused_attention_finding([p for p in patterns if p["pattern"] == "unfused attention"], span)
    out = [attention] if attention else []
    for p in patterns:
        share = p["time_us"] / span if span else 0.0
        if share < MIN_SPAN_SHARE or p["pattern"] == "unfused attention":
            continue
        named = [f"{o['op']} ×{o['kernels']:,}" for o in p["ops"] if o["op"] not in PLACEHOLDERS][:3]
        most = f"most from {', '.join(named)}" if named else "no CPU operator recorded around them"
        what = (
            f"{p['kernels']:,} of {p['of_kernels']:,} kernels are elementwise and shorter than "
            f"{p['below_us']:g} µs ({us_text(p['time_us'])}, {share:.1%} of the span; {most})"
        )
        out.append(Finding("op_pattern", what, 100 * share, "%", advice=f" — {p['advice']}", time_us=p["time_us"]))
    return out

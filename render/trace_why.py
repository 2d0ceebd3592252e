"""The tables that say why a trace's GPU idled and which operators its time went to, from a stored
``profiler-trace`` run's meta: the host's side of the gaps (core/workload/trace/host_gaps.py). Pure: the page places
them."""

from __future__ import annotations

from core.rows.trace_breakdown import HostTime, TraceBreakdown
from core.workload.trace.text import tensor_core_text


def _percent(share: float | None) -> float | None:
    """A share as the percentage the page's charts and findings use, to 0.1 (None stays missing)."""
    return None if share is None else round(100 * share, 1)


def host_gap_table(host: HostTime) -> list[dict]:
    """One row per cause of the GPU's gaps (or of the host's time before the steps' first kernels), largest first:
    its time, its share, its top operators (with their source line where the trace recorded stacks). Empty for runs
    stored before the figure."""
    rows = []
    for c in host.causes:
        top = c.top_ops[:3]
        rows.append(
            {
                "cause": c.cause,
                "ms": round(c.time_us / 1000, 3),
                "% of the gaps": _percent(c.share),
                "top operators": "; ".join(f"{o.op} ({o.time_us / 1000:,.3f} ms ×{o.count:,})" for o in top),
                "source": next((o.source for o in top if o.source), ""),
            }
        )
    return rows


def ops_table(b: TraceBreakdown) -> list[dict]:
    """The top operators by GPU time, with their module, kernels and calls, and the achieved rate where the
    recorded shapes give one (empty for runs stored before the figure)."""
    rows = []
    for r in b.ops:
        row = {
            "operator": r.op,
            "module": r.module,
            "GPU ms": round(r.gpu_time_us / 1000, 3),
            "% of GPU time": _percent(r.share),
            "kernels": r.kernels,
            "copies": r.copies,  # None in runs stored before they were counted
            "memsets": r.memsets,
            "calls": r.calls,
        }
        if r.rated:
            row |= {"TFLOPS": r.tflops, "TB/s": r.tbps, "% of peak": _percent(r.peak_share)}
        rows.append(row)
    return rows


def modules_table(b: TraceBreakdown) -> list[dict]:
    """The top modules by GPU time (empty for runs stored before the figure)."""
    return [
        {
            "module": r.module,
            "GPU ms": round(r.gpu_time_us / 1000, 3),
            "% of GPU time": _percent(r.share),
            "kernels": r.kernels,
            "copies": r.copies,
            "memsets": r.memsets,
        }
        for r in b.modules
    ]


def patterns_table(b: TraceBreakdown) -> list[dict]:
    """The named patterns (unfused attention, many tiny elementwise kernels) with their time and advice."""
    return [
        {
            "pattern": p.pattern,
            "where": p.module or ", ".join(p.ops),
            "ms": round(p.time_us / 1000, 3),
            "kernels": p.kernels,
            "advice": p.advice,
        }
        for p in b.op_patterns
    ]


def rates_caption(b: TraceBreakdown, meta: dict) -> str:
    """What the operators' rates are set against, and the GPU time that used no tensor core or kernels for an
    older architecture (empty for runs stored before the figures)."""
    parts = []
    if b.ops_reference:
        parts.append(f"TFLOPS and TB/s from recorded shapes (record_shapes=True), against {b.ops_reference}")
    if text := tensor_core_text(meta):
        parts.append(text)
    return " · ".join(parts)

"""The tables that say why a trace's GPU idled and which operators its time went to, from a stored
``profiler-trace`` run's meta: the host's side of the gaps (core/workload/trace/host_gaps.py). Pure: the page places
them."""

from __future__ import annotations

from core.workload.trace.op_flops import tensor_core_text


def _percent(share: float | None) -> float | None:
    """A share as the percentage the page's charts and findings use, to 0.1 (None stays missing)."""
    return None if share is None else round(100 * share, 1)


def host_gap_table(meta: dict, key: str = "host_gaps") -> list[dict]:
    """One row per cause of the GPU's gaps (``key``: or of the host's time before the steps' first kernels,
    ``host_before_first_kernel``), largest first: its time, its share, its top operators (with their source line
    where the trace recorded stacks). Empty for runs stored before the figure."""
    rows = []
    for c in (meta.get(key) or {}).get("causes") or []:
        top = c["top_ops"][:3]
        rows.append(
            {
                "cause": c["cause"],
                "ms": round(c["time_us"] / 1000, 3),
                "% of the gaps": _percent(c["share"]),
                "top operators": "; ".join(f"{o['op']} ({o['time_us'] / 1000:,.3f} ms ×{o['count']:,})" for o in top),
                "source": next((o["source"] for o in top if o.get("source")), ""),
            }
        )
    return rows


def ops_table(meta: dict) -> list[dict]:
    """The top operators by GPU time, with their module, kernels and calls, and the achieved rate where the
    recorded shapes give one (empty for runs stored before the figure)."""
    rows = []
    for r in meta.get("ops") or []:
        row = {
            "operator": r["op"],
            "module": r["module"],
            "GPU ms": round(r["gpu_time_us"] / 1000, 3),
            "% of GPU time": _percent(r["share"]),
            "kernels": r["kernels"],
            "copies": r.get("copies"),  # None in runs stored before they were counted
            "memsets": r.get("memsets"),
            "calls": r["calls"],
        }
        if "tflops" in r or "tbps" in r:
            row |= {"TFLOPS": r.get("tflops"), "TB/s": r.get("tbps"), "% of peak": _percent(r.get("peak_share"))}
        rows.append(row)
    return rows


def modules_table(meta: dict) -> list[dict]:
    """The top modules by GPU time (empty for runs stored before the figure)."""
    return [
        {
            "module": r["module"],
            "GPU ms": round(r["gpu_time_us"] / 1000, 3),
            "% of GPU time": _percent(r["share"]),
            "kernels": r["kernels"],
            "copies": r.get("copies"),
            "memsets": r.get("memsets"),
        }
        for r in meta.get("modules") or []
    ]


def patterns_table(meta: dict) -> list[dict]:
    """The named patterns (unfused attention, many tiny elementwise kernels) with their time and advice."""
    rows = []
    for p in meta.get("op_patterns") or []:
        ops = p["ops"] if p["pattern"] == "unfused attention" else [f"{o['op']} ×{o['kernels']:,}" for o in p["ops"]]
        rows.append(
            {
                "pattern": p["pattern"],
                "where": p.get("module") or ", ".join(ops),
                "ms": round(p["time_us"] / 1000, 3),
                "kernels": p["kernels"],
                "advice": p["advice"],
            }
        )
    return rows


def rates_caption(meta: dict) -> str:
    """What the operators' rates are set against, and the GPU time that used no tensor core or kernels for an
    older architecture (empty for runs stored before the figures)."""
    parts = []
    if ref := meta.get("ops_reference"):
        parts.append(f"TFLOPS and TB/s from recorded shapes (record_shapes=True), against {ref}")
    if text := tensor_core_text(meta):
        parts.append(text)
    return " · ".join(parts)

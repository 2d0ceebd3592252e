"""The tables that say why a trace's GPU idled and which operators its time went to, from a stored
``profiler-trace`` run's meta: the host's side of the gaps (core/workload/host_gaps.py). Pure: the page places
them."""

from __future__ import annotations


def host_gap_table(meta: dict) -> list[dict]:
    """One row per cause of the GPU's gaps, largest first: its time, its share of the gaps, its top operators
    (with their source line where the trace recorded stacks). Empty for runs stored before the figure."""
    rows = []
    for c in (meta.get("host_gaps") or {}).get("causes") or []:
        top = c["top_ops"][:3]
        rows.append(
            {
                "cause": c["cause"],
                "ms": c["time_us"] / 1000,
                "share of the gaps": c["share"],
                "top operators": "; ".join(f"{o['op']} ({o['time_us'] / 1000:,.3f} ms ×{o['count']:,})" for o in top),
                "source": next((o["source"] for o in top if o.get("source")), ""),
            }
        )
    return rows

"""Values a matmul sweep's charts show that are computed over its rows, once, by the engine.

They are stored with the run, so the page, Compare and the HTML report show the same numbers and no
renderer re-derives them. Torch-free: the renderers call them only for runs stored before a field existed.
"""

from __future__ import annotations

from core.hardware import published
from core.hardware.specs import above_peak_error


def add_pct_of_best(rows: list[dict]) -> list[dict]:
    """pct_of_best = TFLOPS / best TFLOPS of the same dtype in these rows (measured rows only)."""
    best: dict[str, float] = {}
    for r in rows:
        if r.get("status") == "ok" and r.get("tflops"):
            best[r["dtype"]] = max(best.get(r["dtype"], 0.0), r["tflops"])
    for r in rows:
        top = best.get(r["dtype"])
        r["pct_of_best"] = 100.0 * r["tflops"] / top if top and r.get("status") == "ok" else None
        r["is_best"] = bool(top) and r.get("status") == "ok" and r["tflops"] == top
    return rows


def flag_above_peak(row: dict) -> dict:
    """``above_peak`` and the error text on a measured row whose median throughput beats the sheet."""
    error = above_peak_error(
        row.get("tflops"), row.get("peak_tflops"), f"{row['dtype']} {row['m']}×{row['n']}×{row['k']}"
    )
    row["above_peak"] = error is not None
    row["measurement_error"] = error
    return row


def add_published(row: dict, entries: list[published.Published]) -> dict:
    """``published_tflops`` (the source's maximum achievable for the row's dtype on that GPU) and
    ``pct_of_published``; None where the source measured no such figure or the row has no throughput."""
    best = published.figure(entries, row["dtype"])
    tflops = row.get("tflops")
    row["published_tflops"] = best.tflops if best else None
    row["pct_of_published"] = 100.0 * tflops / best.tflops if best and tflops else None
    return row

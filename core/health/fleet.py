"""Every node of a cluster in one verdict: each node's rows, tagged with the node, against the fleet median.

A GPU more than :data:`OUTLIER_FRACTION` below the fleet's median of the same figure on the same GPU model is an
outlier, as gpu-fryer flags a GPU 10 % below the best of its box; the published reference still judges every
row. CPU rows are not compared across nodes: a CPU's timings move with whatever else the machine runs, so the
CPU check is a functional one. A node that failed or stopped answering keeps the rows it sent and gets a failed
row that names it.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from core.health.verdict import step_row
from core.units import count_text

OUTLIER_FRACTION = 0.10


@dataclass
class NodeResult:
    node: int  # torchrun's group rank
    host: str = "?"
    status: str = "running"  # running → ok | failed
    rows: list[dict] = field(default_factory=list)
    error: str = ""
    step: str = ""  # what it was doing when last heard from
    device: dict = field(default_factory=dict)
    versions: dict = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"node {self.node} ({self.host})"

    def summary(self) -> dict:
        return {
            "node": self.name,
            "host": self.host,
            "status": self.status,
            "error": self.error,
            "rows": len(self.rows),
        }


def _judged(row: dict) -> bool:
    return (
        isinstance(row.get("measured"), int | float)
        and row.get("reference_kind") != "ceiling"
        and row.get("device_kind") == "cuda"
    )


def _peers(row: dict) -> tuple[str, str]:
    return row["figure"], row.get("device") or ""


def fleet_rows(nodes: list[NodeResult]) -> list[dict]:
    """Every node's rows tagged with it, each numeric figure against the fleet median (outliers flagged), and a
    failed row for every node that did not finish."""
    rows = [r | {"node": n.name, "host": n.host} for n in sorted(nodes, key=lambda n: n.node) for r in n.rows]
    by_figure: dict[tuple[str, str], list[float]] = {}
    for r in rows:
        if _judged(r):
            by_figure.setdefault(_peers(r), []).append(float(r["measured"]))
    for r in rows:
        values = by_figure.get(_peers(r)) if _judged(r) else None
        if not values or len(values) < 2:
            continue
        median = statistics.median(values)
        if not median:
            continue
        fraction = float(r["measured"]) / median
        r["fleet"] = {"median": median, "fraction": fraction, "values": len(values)}
        if fraction < 1 - OUTLIER_FRACTION:
            r["outlier"] = True
            r["reason"] = "; ".join(
                x
                for x in (
                    f"fleet outlier: {r['measured']:.4g} {r['unit']} against the fleet median {median:.4g} "
                    f"({100 * fraction:.0f}%; flagged under {100 * (1 - OUTLIER_FRACTION):.0f}%)",
                    r.get("reason"),
                )
                if x
            )
    for n in nodes:
        if n.status != "ok":
            kept = (
                f"{count_text(len(n.rows), 'row')} it sent {'is' if len(n.rows) == 1 else 'are'} kept"
                if n.rows
                else "it sent no rows"
            )
            where = f" during {n.step}" if n.step else ""
            row = step_row(n.name, "node", "fail", f"{n.error or 'stopped responding'}{where}; {kept}")
            rows.append(row | {"node": n.name, "host": n.host})
    return rows

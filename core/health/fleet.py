"""Every node of a cluster in one verdict: each node's rows, tagged with the node, against the fleet median.

A GPU more than :data:`OUTLIER_FRACTION` below the fleet's median of the same figure on the same GPU model is an
outlier, as gpu-fryer flags a GPU 10 % below the best of its box; the published reference still judges every
row. CPU rows are not compared across nodes: a CPU's timings move with whatever else the machine runs, so the
CPU check is a functional one. A node that failed or stopped answering keeps the rows it sent and gets a failed
row that names it.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field, replace

from core.health.verdict import step_row
from core.rows.health import FleetShare, HealthRow, NodeSummary, health_rows
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

    def summary(self) -> NodeSummary:
        return NodeSummary(self.name, self.host, self.status, self.error, len(self.rows))


def _judged(row: HealthRow) -> bool:
    return isinstance(row.measured, int | float) and row.reference_kind != "ceiling" and row.device_kind == "cuda"


def _peers(row: HealthRow) -> tuple[str, str]:
    return row.figure, row.device or ""


def fleet_rows(nodes: list[NodeResult]) -> list[HealthRow]:
    """Every node's rows tagged with it, each numeric figure against the fleet median (outliers flagged), and a
    failed row for every node that did not finish."""
    rows = [
        replace(r, node=n.name, host=n.host) for n in sorted(nodes, key=lambda n: n.node) for r in health_rows(n.rows)
    ]
    by_figure: dict[tuple[str, str], list[float]] = {}
    for r in rows:
        if _judged(r):
            by_figure.setdefault(_peers(r), []).append(float(r.measured or 0.0))
    return [_against_fleet(r, by_figure.get(_peers(r)) if _judged(r) else None) for r in rows] + [
        _failed(n) for n in nodes if n.status != "ok"
    ]


def _against_fleet(row: HealthRow, values: list[float] | None) -> HealthRow:
    """The row with its share of the fleet's median, flagged an outlier below :data:`OUTLIER_FRACTION`."""
    if not values or len(values) < 2:
        return row
    median = statistics.median(values)
    if not median:
        return row
    fraction = float(row.measured or 0.0) / median
    row = replace(row, fleet=FleetShare(median, fraction, len(values)))
    if fraction >= 1 - OUTLIER_FRACTION:
        return row
    said = (
        f"fleet outlier: {row.measured:.4g} {row.unit} against the fleet median {median:.4g} "
        f"({100 * fraction:.0f}%; flagged under {100 * (1 - OUTLIER_FRACTION):.0f}%)"
    )
    return replace(row, outlier=True, reason="; ".join(x for x in (said, row.reason) if x))


def _failed(n: NodeResult) -> HealthRow:
    """A node that failed or stopped answering: a failed row that names it and what it sent."""
    kept = (
        f"{count_text(len(n.rows), 'row')} it sent {'is' if len(n.rows) == 1 else 'are'} kept"
        if n.rows
        else "it sent no rows"
    )
    where = f" during {n.step}" if n.step else ""
    row = step_row(n.name, "node", "fail", f"{n.error or 'stopped responding'}{where}; {kept}")
    return replace(row, node=n.name, host=n.host)

"""The health check as one self-contained HTML page to attach to a ticket: the verdict in words, the box, the
verdict table with every reference's source, date and the card it was measured on, what the card said while
each throughput was measured and its per-clock efficiency, every rule with its source, the nodes of a cluster run.

No charts and no scripts: a few kilobytes that open anywhere, print on one page and survive a ticket system.
"""

from __future__ import annotations

import html
from datetime import UTC, datetime

from core.health.words import banner, cell, marks, reference_text, source, while_measured, why
from core.result import RunResult
from core.rows.health import HealthRow, HealthSummary, health_rows
from core.units import duration_text

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:1.5rem auto;max-width:1100px;color:#222}
table{border-collapse:collapse;font-size:.82rem;margin:.5rem 0} td,th{border:1px solid #ddd;padding:.2rem .4rem;
text-align:left;vertical-align:top} th{background:#f4f4f4} .muted{color:#666;font-size:.8rem}
.pass{color:#1b7a3a} .below-expected{color:#a66300;font-weight:600} .far-below,.fail{color:#b22;font-weight:600}
.verdict{font-size:1.2rem;padding:.5rem .8rem;border-radius:.3rem;background:#f4f4f4}
@media print{body{margin:0;max-width:none}}
"""


def _e(value) -> str:
    return html.escape("—" if value is None else str(value))


def _row(r: HealthRow, nodes: bool) -> str:
    cells = ([r.node or ""] if nodes else []) + [
        r.figure,
        r.where,
        cell(r, r.measured),
        r.per_clock.text if r.per_clock else "",
        while_measured(r),
        reference_text(r),
        r.verdict + marks(r),
        why(r),
        source(r),
    ]
    css = r.verdict.replace(" ", "-")
    return (
        "<tr>"
        + "".join(
            f"<td class='{css}'>{_e(c)}</td>" if i == len(cells) - 3 else f"<td>{_e(c)}</td>"
            for i, c in enumerate(cells)
        )
        + "</tr>"
    )


def health_html(run: RunResult) -> str:
    said, rows = HealthSummary.from_run(run), health_rows(run)
    nodes = any(r.node for r in rows)
    heads = (["node"] if nodes else []) + [
        "figure",
        "where",
        "measured",
        "per clock",
        "while measured",
        "reference",
        "verdict",
        "why",
        "source and card",
    ]
    again = said.judged_again
    rules = "".join(
        f"<li><b>{_e(r.rule)}</b>: {_e(r.says)} <span class='muted'>— {_e(r.source)}</span></li>" for r in said.rules
    )
    node_lines = "".join(
        f"<li>{_e(n.node)}: {_e(n.host)} — {_e(n.status)}{' — ' + _e(n.error) if n.error else ''}</li>"
        for n in said.nodes
    )
    generated = datetime.now(UTC).isoformat(timespec="seconds")
    took = f" in {duration_text(said.wall_s)}" if said.wall_s is not None else ""
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'><title>GPU Lab health report</title>"
        f"<style>{_CSS}</style></head><body><h1>Health report</h1>"
        + (f"<p><b>Judged again by today's rules</b>: {_e(again.origin)}, on {_e(again.at)}</p>" if again else "")
        + f"<p class='verdict'><b>{_e(said.verdict or run.status)}</b> — {_e(banner(run)[1])}</p>"
        f"<p>Box: {_e(said.host)} · devices: {_e(', '.join(said.devices))} · "
        f"{_e(run.device_info.shown)}</p>"
        f"<p class='muted'>run {_e(run.id)} · started {_e(run.started_at)}{_e(took)} · generated {generated} UTC · "
        f"torch {_e(run.versions.get('torch'))}, CUDA {_e(run.versions.get('cuda'))}, driver "
        f"{_e(run.versions.get('driver'))}</p>"
        + (f"<h2>Nodes</h2><ul>{node_lines}</ul>" if node_lines else "")
        + "<table><tr>"
        + "".join(f"<th>{_e(h)}</th>" for h in heads)
        + "</tr>"
        + "".join(_row(r, nodes) for r in rows)
        + "</table>"
        f"<p class='muted'>Thresholds: {_e(said.thresholds)}. A reference is the published measured "
        "figure for the exact SKU where one exists, else its datasheet figure × the stated expected fraction; "
        "'no reference' means none is known for this device, never a guess; 'not comparable' means the only reference "
        "was measured another way (the best of a shape search against one fixed shape). Every measured number comes "
        "from the run named above.</p>"
        + (f"<h2>Rules and their sources</h2><ul class='muted'>{rules}</ul>" if rules else "")
        + "</body></html>"
    )

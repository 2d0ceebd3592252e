"""One self-contained HTML report of stored runs: charts, device descriptions, settings, comparisons.

Written for the compare page's **Report** button and for ``python -m core report`` on headless
boxes, so nothing here calls Streamlit. plotly.js is embedded once in the page head: the file
opens offline, with interactive charts, on any machine.
"""

from __future__ import annotations

import html
from collections import defaultdict
from datetime import UTC, datetime

import pandas as pd
from plotly.offline import get_plotlyjs

from core.columns import fmt
from core.hardware.specs import datasheet_peaks
from core.result import RunResult
from core.units import bytes_text, count_text, duration_text, timestamp_text
from render import comparison
from render.chart import Chart
from render.plots import figures_for, overlay_for
from render.style import device_label

MAX_TABLE_ROWS = 200
_SUPPORT_TEXT: dict[object, str] = {True: "supported", False: "not supported"}  # by a JSON value
_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1200px;color:#222}
h1{margin-bottom:.2rem} h2{border-top:2px solid #ddd;padding-top:1rem;margin-top:2.5rem}
table{border-collapse:collapse;font-size:.85rem;margin:.5rem 0} td,th{border:1px solid #ddd;padding:.2rem .5rem;
text-align:left} th{background:#f4f4f4} .status-ok{color:#2a7d2a} .status-bad{color:#b22} .muted{color:#666}
.chart{margin:1rem 0} details{margin:.5rem 0}
"""


def _e(value) -> str:
    return html.escape(str(value))


def _kv_table(pairs: list[tuple[str, object]]) -> str:
    rows = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in pairs if v not in (None, ""))
    return f"<table>{rows}</table>"


def _frame_table(df: pd.DataFrame) -> str:
    shown = df.head(MAX_TABLE_ROWS)
    note = (
        f"<p class='muted'>first {MAX_TABLE_ROWS} of {len(df)} rows (the full data is in the runs file)</p>"
        if len(df) > MAX_TABLE_ROWS
        else ""
    )
    return shown.to_html(index=False, border=0, na_rep="", escape=True, float_format=fmt) + note


def device_pairs(run: RunResult) -> list[tuple[str, object]]:
    """The device description a reader needs to trust a number: what, how big, which datasheet."""
    device = run.device_info
    spec = device.spec or {}
    peaks = ", ".join(f"{k} {v}" for k, v in datasheet_peaks(run.device).items())
    memory = device.total_memory_bytes
    return [
        ("device", device.shown),
        ("kind", device.kind),
        ("memory", bytes_text(memory) if isinstance(memory, (int, float)) and memory else None),
        ("compute capability", device.compute_capability),
        ("SMs", device.multiprocessors),
        ("cores", device.cores),
        ("torch threads", device.torch_threads),
        ("L2 cache", bytes_text(device.l2_cache_bytes, 0) if device.l2_cache_bytes else None),
        ("bf16", _SUPPORT_TEXT.get(device.bf16_supported)),
        ("TF32 flags", ", ".join(f"{k}={v}" for k, v in (device.tf32 or {}).items())),
        ("datasheet", f"{spec.get('name')}: dense peaks (TFLOPS) {peaks}" if spec else "no datasheet entry"),
    ]


def _chart_html(chart: Chart, div_id: str) -> str:
    body = chart.figure.to_html(full_html=False, include_plotlyjs=False, div_id=div_id, config={"displaylogo": False})
    return f"<div class='chart'>{body}</div>"


class ChartError(RuntimeError):
    """A plot module failed on this run; the report says so and goes on."""


def _run_charts(run: RunResult) -> list[Chart]:
    try:
        charts = figures_for(run)
    except Exception as exc:  # noqa: BLE001 - one broken figure builder must not lose the whole report
        raise ChartError(f"the {run.experiment} charts could not be drawn: {exc}") from exc
    return charts or (comparison.generic_figures(run) if run.rows else [])


def _run_section(run: RunResult, index: int) -> str:
    ok = run.status == "ok"
    heading = f"{run.experiment}" + (f" — {run.name}" if run.name else "")
    parts = [
        f"<h2 id='run-{_e(run.id)}'>{_e(heading)} <span class='muted'>({_e(run.id[:8])})</span></h2>",
        f"<p class='{'status-ok' if ok else 'status-bad'}'>status: {_e(run.status)}"
        f"{' — ' + _e(run.error) if run.error else ''}</p>",
        f"<p class='muted'>{_e(device_label(run))} · started {_e(run.started_at)}"
        f"{f' · {duration_text(run.duration_s)}' if run.duration_s is not None else ''}"
        f"{' · imported from another box' if run.imported else ''}"
        f"{' · tags: ' + _e(', '.join(run.tags)) if run.tags else ''}</p>",
    ]
    try:
        charts = _run_charts(run)
    except ChartError as exc:
        charts = []
        parts.append(f"<p class='status-bad'>{_e(exc)}</p>")
    parts += [_chart_html(c, f"run{index}-chart{i}") for i, c in enumerate(charts)]
    parts.append(
        "<h3>Settings</h3>"
        + (
            _kv_table([(k, comparison.value_text(v)) for k, v in run.config.items()])
            if run.config
            else "<p class='muted'>defaults (no settings)</p>"
        )
    )
    parts.append("<h3>Device</h3>" + _kv_table(device_pairs(run)))
    parts.append("<h3>Versions</h3>" + _kv_table(list(run.versions.items())))
    if run.rows:
        parts.append(f"<details><summary>Data ({len(run.rows)} rows)</summary>{_frame_table(run.frame())}</details>")
    return "\n".join(parts)


def _comparison_section(runs: list[RunResult], index: int) -> str:
    experiment = runs[0].experiment
    problem = comparison.compare_problem(runs)
    head = f"<h2>Comparison: {_e(experiment)} ({len(runs)} runs)</h2>"
    if problem:
        return head + f"<p class='muted'>Not compared: {_e(problem)}</p>"
    try:
        charts = overlay_for(runs) or comparison.generic_charts(runs)
    except Exception as exc:  # noqa: BLE001
        return head + f"<p class='status-bad'>the overlay could not be drawn: {_e(exc)}</p>"
    legend = comparison.labels(runs)
    parts = [
        head,
        "<p>"
        + "<br>".join(f"{_e(label)}: {_e(device_label(r))}, run {_e(r.id[:8])}" for label, r in zip(legend, runs))
        + "</p>",
    ]
    parts += [_chart_html(c, f"cmp{index}-chart{i}") for i, c in enumerate(charts)]
    deltas = comparison.delta_table(runs)
    parts.append(
        f"<h3>Differences against {_e(legend[0])}</h3><p>{_e(comparison.pairing_text(runs, deltas))}</p>"
        + _frame_table(deltas)
    )
    return "\n".join(parts)


def build_report(runs: list[RunResult], heading: str = "GPU Lab report") -> str:
    """The whole report as one HTML string (≈ 4.8 MB: plotly.js is inside)."""
    if not runs:
        raise ValueError("a report needs at least one run")
    by_experiment: dict[str, list[RunResult]] = defaultdict(list)
    for run in runs:
        by_experiment[run.experiment].append(run)
    generated = datetime.now(UTC).isoformat(timespec="seconds")
    toc = "".join(
        f"<li><a href='#run-{_e(r.id)}'>{_e(r.experiment)} · {_e(device_label(r))} · "
        f"{_e(timestamp_text(r.started_at))}{' · ' + _e(r.name) if r.name else ''}</a> — {_e(comparison.headline(r))}"
        f"</li>"
        for r in runs
    )
    sections = [_comparison_section(group, i) for i, group in enumerate(by_experiment.values()) if len(group) > 1]
    sections += [_run_section(run, i) for i, run in enumerate(runs)]
    return (
        f"<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'><title>{_e(heading)}</title>"
        f"<style>{_CSS}</style><script type='text/javascript'>{get_plotlyjs()}</script></head><body>"
        f"<h1>{_e(heading)}</h1><p class='muted'>{count_text(len(runs), 'run')}, generated {generated} UTC. "
        f"Every number was measured by GPU Lab on the device named with it.</p><ul>{toc}</ul>"
        + "\n".join(sections)
        + "</body></html>"
    )

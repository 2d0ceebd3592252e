"""A stored health check in words: its answer before the table, its banner, each value with its unit. Judges
stored rows only (nothing here runs a job), so the renderers and the pages read it without the check's machinery."""

from __future__ import annotations

from core.hardware.identity import box_label
from core.health.verdict import UNJUDGED, below, overall, summary
from core.result import RunResult
from core.rows.health import HealthRow, HealthSummary, Value, health_rows
from core.units import count_text, throughput_unit


def answer(rows: list[HealthRow], device: dict) -> str:
    """The verdict in plain words, before the table: what is below expected and why, or that nothing is; the
    power cap where the card ran at it (normal) and every fault the card named."""
    verdict, where = overall(rows), box_label(device) if device else "this box"
    counts = summary(rows)
    clocks = _clock_words(rows)
    if verdict == "healthy":
        said = [f"{counts['pass']} pass"] if counts["pass"] else []
        if counts["not measured"]:
            said.append(f"{counts['not measured']} not measured here")
        unjudged = not_judged(rows)
        if not unjudged:
            return f"Healthy on {where}: nothing below expected — " + ", ".join(said) + "." + clocks
        named = "; ".join(_unjudged(r) for r in unjudged[:3]) + ("; …" if len(unjudged) > 3 else "")
        judged = f" Nothing judged is below expected ({', '.join(said)})." if said else ""
        figures = f"{len(unjudged)} figure{'s' if len(unjudged) > 1 else ''}"
        return f"Healthy on {where} — {figures} not judged: {named}.{judged}{clocks}"
    low = [r for r in rows if below(r)]
    failed = [r for r in rows if r.verdict == "fail"]
    parts = []
    if failed:
        parts.append(f"{len(failed)} failed ({', '.join(r.figure for r in failed[:3])})")
    if low:
        parts.append(f"{len(low)} below expected ({', '.join(_named(r) for r in low[:3])})")
    return f"Not healthy on {where}: " + "; ".join(parts) + "." + clocks


def _clock_words(rows: list[HealthRow]) -> str:
    """What the card said while its throughput was measured: the faults it named, each once, else that it ran at
    its power cap (normal), with the clock, power and per-clock efficiency of the first such figure."""
    read = [(r, r.clocks) for r in rows if r.clocks]
    faults = list(dict.fromkeys(f for _, c in read for f in c.faults))
    if faults:
        return f" The card named a fault while measured: {'; '.join(faults)}."
    capped = [(r, c) for r, c in read if c.state == "power-limited"]
    if not capped:
        return ""
    first, clocks = capped[0]
    per_clock = f"; per clock {first.per_clock.text}" if first.per_clock else ""
    return (
        f" Power-limited while measured, which is normal (NVML sw_power_cap: the card kept to its power limit): "
        f"{_named(first)} at {clocks.text}{per_clock}."
    )


def not_judged(rows: list[HealthRow]) -> list[HealthRow]:
    """The rows measured but judged by nothing (no reference for this device, a CPU's soak drop, a fixed shape
    with only a searched maximum to meet)."""
    return [r for r in rows if r.verdict in UNJUDGED]


def _unjudged(row: HealthRow) -> str:
    """A figure not judged, its value and why: ``"matmul fp32 burst→sustained drop 28% (no reference for …)"``."""
    value = f"{row.measured:.0f}%" if row.unit == "%" and isinstance(row.measured, float) else cell(row, row.measured)
    why = row.not_comparable or row.reason.split(";")[0].strip()
    return f"{row.figure} {value}" + (f" ({why})" if why else "")


def banner(run: RunResult) -> tuple[str, str]:
    """A stored health run's banner: its kind (``success``, ``warning`` when healthy but some figure was not
    judged, ``error``) and its words, from its rows (a run stored before the words counted what was not judged
    says it too)."""
    said = HealthSummary.from_run(run)
    verdict, rows = said.verdict or run.status, health_rows(run)
    text = answer(rows, run.device) if rows else (said.answer or verdict)
    if said.nodes:
        text = f"{count_text(len(said.nodes), 'node')}: {text}"
    if verdict != "healthy":
        return "error", text
    return ("warning" if not_judged(rows) else "success"), text


def _named(row: HealthRow) -> str:
    """A row's figure, node and device, and why it is below expected when it is not its reference."""
    flags = (("regressed", row.regressed), ("fleet outlier", row.outlier), ("slow GPU", row.slow_gpu))
    why = [w for w, flag in flags if flag]
    return at(row) + (f" ({', '.join(why)})" if why else "")


def at(row: HealthRow) -> str:
    """``"matmul bf16 burst @ node 1 (b) @ cuda:0"``: a row's figure and where it was measured."""
    return " @ ".join(filter(None, (row.figure, row.node, row.where)))


def place(row: HealthRow) -> str:
    """Where a row was measured: its node (a cluster's run) and its device."""
    return " ".join(filter(None, (row.node, row.where)))


def marks(row: HealthRow) -> str:
    """What the verdict column adds to a row's verdict: `` · regressed``, `` · slow GPU``."""
    return "".join(f" · {w}" for w, flag in (("regressed", row.regressed), ("slow GPU", row.slow_gpu)) if flag)


def while_measured(row: HealthRow, between: str = " — ") -> str:
    """What NVML read while the figure was measured and the state it adds up to; "" where nothing was read."""
    return f"{row.clocks.text}{between}{row.clocks.state}" if row.clocks else ""


def why(row: HealthRow) -> str:
    """The row's reasons and its history in one sentence."""
    return "; ".join(filter(None, (row.reason, row.history.text if row.history else "")))


def source(row: HealthRow) -> str:
    """The reference's source and date, and the card it was measured on."""
    return "; ".join(filter(None, (f"{row.source} ({row.date})" if row.source else "", row.reference_card)))


def reference_text(row: HealthRow) -> str:
    return row.reference_label or cell(row, row.reference)


def cell(row: HealthRow, value: Value) -> str:
    """A row's measured or reference value as text: a number with its unit (GFLOPS for a CPU's throughput, the
    lab's one unit rule), a check's words as they are."""
    unit = row.unit
    if value is None:
        return "—"
    if isinstance(value, float):
        if unit == "TFLOPS":
            unit, factor = throughput_unit(row.device_kind == "cuda")
            value *= factor
        return f"{value:.4g} {unit}".strip()
    return str(value)

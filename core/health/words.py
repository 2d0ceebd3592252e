"""A stored health check in words: its answer before the table, its banner, each value with its unit. Judges
stored rows only (nothing here runs a job), so the renderers and the pages read it without the check's machinery."""

from __future__ import annotations

from core.hardware.identity import box_label
from core.health.verdict import UNJUDGED, overall, summary
from core.result import RunResult
from core.units import count_text, throughput_unit


def answer(rows: list[dict], device: dict) -> str:
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
    below = [
        r
        for r in rows
        if r["verdict"] in ("below expected", "far below")
        or r.get("regressed")
        or r.get("outlier")
        or r.get("slow_gpu")
    ]
    failed = [r for r in rows if r["verdict"] == "fail"]
    parts = []
    if failed:
        parts.append(f"{len(failed)} failed ({', '.join(r['figure'] for r in failed[:3])})")
    if below:
        parts.append(f"{len(below)} below expected ({', '.join(_named(r) for r in below[:3])})")
    return f"Not healthy on {where}: " + "; ".join(parts) + "." + clocks


def _clock_words(rows: list[dict]) -> str:
    """What the card said while its throughput was measured: the faults it named, each once, else that it ran at
    its power cap (normal), with the clock, power and per-clock efficiency of the first such figure."""
    read = [r for r in rows if r.get("clocks")]
    faults = list(dict.fromkeys(f for r in read for f in r["clocks"]["faults"]))
    if faults:
        return f" The card named a fault while measured: {'; '.join(faults)}."
    capped = [r for r in read if r["clocks"]["state"] == "power-limited"]
    if not capped:
        return ""
    first = capped[0]
    per_clock = f"; per clock {first['per_clock']['text']}" if first.get("per_clock") else ""
    return (
        f" Power-limited while measured, which is normal (NVML sw_power_cap: the card kept to its power limit): "
        f"{_named(first)} at {first['clocks']['text']}{per_clock}."
    )


def not_judged(rows: list[dict]) -> list[dict]:
    """The rows measured but judged by nothing (no reference for this device, a CPU's soak drop, a fixed shape
    with only a searched maximum to meet)."""
    return [r for r in rows if r["verdict"] in UNJUDGED]


def _unjudged(row: dict) -> str:
    """A figure not judged, its value and why: ``"matmul fp32 burst→sustained drop 28% (no reference for …)"``."""
    value = (
        f"{row['measured']:.0f}%"
        if row["unit"] == "%" and isinstance(row["measured"], float)
        else cell(row, "measured")
    )
    why = row.get("not_comparable") or str(row.get("reason") or "").split(";")[0].strip()
    return f"{row['figure']} {value}" + (f" ({why})" if why else "")


def banner(run: RunResult) -> tuple[str, str]:
    """A stored health run's banner: its kind (``success``, ``warning`` when healthy but some figure was not
    judged, ``error``) and its words, from its rows (a run stored before the words counted what was not judged
    says it too)."""
    verdict = run.meta.get("verdict", run.status)
    text = answer(run.rows, run.device) if run.rows else str(run.meta.get("answer", verdict))
    if run.meta.get("nodes"):
        text = f"{count_text(len(run.meta['nodes']), 'node')}: {text}"
    if verdict != "healthy":
        return "error", text
    return ("warning" if not_judged(run.rows) else "success"), text


def _named(row: dict) -> str:
    """A row's figure, node and device, and why it is below expected when it is not its reference."""
    flags = (
        ("regressed", row.get("regressed")),
        ("fleet outlier", row.get("outlier")),
        ("slow GPU", row.get("slow_gpu")),
    )
    why = [w for w, flag in flags if flag]
    return " @ ".join(filter(None, (row["figure"], row.get("node"), row["where"]))) + (
        f" ({', '.join(why)})" if why else ""
    )


def cell(row: dict, key: str) -> str:
    """A row's measured or reference value as text: a number with its unit (GFLOPS for a CPU's throughput, the
    lab's one unit rule), a check's words as they are."""
    value, unit = row[key], row["unit"]
    if value is None:
        return "—"
    if isinstance(value, float):
        if unit == "TFLOPS":
            unit, factor = throughput_unit(row.get("device_kind") == "cuda")
            value *= factor
        return f"{value:.4g} {unit}".strip()
    return str(value)

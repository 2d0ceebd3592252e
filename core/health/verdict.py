"""The verdict table: one row per figure or check, against its reference, its history and the thresholds.

Row verdicts: ``pass``, ``below expected``, ``far below`` (a figure against its like-for-like reference),
``not comparable`` (the only reference was measured another way: a fixed shape against the best of a shape
search, with no same-shape figure to judge it per clock), ``no reference`` (measured, but nothing to judge it by:
"no reference for <name>"), ``not measured`` (the step is unsupported here or not in this build, with the
reason), ``fail`` (a doctor's check failed or a step did not finish). A throughput judged carries what NVML read
while it was measured (``clocks``: the SM clock, power, power limit, slowdown reasons and the state they add up
to) and its per-clock efficiency (``per_clock``); a fault the card named makes the row at least below expected.
The box is ``healthy`` when no row is below expected, far below, failed, regressed against the box's own
history, the slow GPU of its node or (a cluster run) an outlier of the fleet. Every rule and its source:
:data:`core.hardware.health_reference.RULES`.
"""

from __future__ import annotations

import statistics
from dataclasses import replace

from core.hardware import published
from core.hardware.health_reference import (
    NODE_SPREAD,
    THRESHOLD_REASON,
    Reference,
    device_name,
    judge,
    no_reference,
    per_clock_peak,
    reference,
    same_shape,
    sku_of,
)
from core.health.figures import Figure
from core.rows.health import ClocksSaid, HealthRow, History, PerClock

ROW_VERDICTS = ("pass", "below expected", "far below", "not comparable", "no reference", "not measured", "fail")
OVERALL = ("healthy", "below expected", "failed")
UNJUDGED = ("not comparable", "no reference")
_WORSE = {"pass": 0, "below expected": 1, "far below": 2}


def figure_row(figure: Figure, history: History | None = None) -> HealthRow:
    """A measured figure judged by its like-for-like reference (or its ceiling), with what the card said while it
    was measured and the box's history beside it."""
    row = HealthRow(
        figure=figure.figure,
        where=figure.where,
        device=device_name(figure.device),
        device_kind=figure.device_info.kind,
        measured=figure.value,
        unit=figure.unit,
        verdict="no reference",
        reason=figure.note,
        slowdown=figure.slowdown,
        shape=tuple(figure.shape) if figure.shape else None,
        searched=figure.searched,
        clocks=ClocksSaid.of(figure.clocks) if figure.clocks.sampled else None,
        per_clock=_per_clock(figure),
        history=history,
        regressed=bool(history and history.regressed),
    )
    if figure.ceiling is not None and not figure.device_info.is_cuda:
        flagged = f"the soak flagged it (over {figure.ceiling:g}%)" if figure.flagged else ""
        # a CPU's drop moves with whatever else the machine runs: measured, not judged
        return replace(row, reason="; ".join(x for x in (no_reference(figure.device), flagged) if x))
    if figure.ceiling is not None:
        return replace(
            row,
            reference=figure.ceiling,
            reference_kind="ceiling",
            reference_label=f"≤ {figure.ceiling:g}% (the soak's threshold)",
            verdict="below expected" if figure.flagged else "pass",
        )
    ref = reference(figure.device, figure.reference_figure) if figure.reference_figure else None
    if ref is None:
        row = replace(row, reason="; ".join(x for x in (no_reference(figure.device), figure.note) if x))
    elif ref.entry is not None and (why := published.comparable(ref.entry, figure.shape, figure.searched)):
        row = _per_clock_row(row, figure, ref, why)
    else:
        row = _against(row, figure, ref)
    return _with_faults(row, figure)


def _against(row: HealthRow, figure: Figure, ref: Reference) -> HealthRow:
    """The figure against a like-for-like reference: a search's best against the published maximum, or a figure
    against its datasheet × the stated fraction."""
    return replace(
        row,
        reference=ref.value,
        reference_kind=ref.kind,
        reference_label=ref.label(),
        reference_card=ref.card_words,
        source=ref.source,
        date=ref.date,
        fraction=figure.value / ref.value,
        verdict=judge(figure.value, ref.value),
        reason=_reason(figure.note, ref.card_words, figure.slowdown, ref.reason, THRESHOLD_REASON),
    )


def _per_clock_row(row: HealthRow, figure: Figure, ref: Reference, why: str) -> HealthRow:
    """A fixed shape the published maximum does not judge: per clock against the same shape on a healthy card,
    where the lab has one and NVML read the clock; else not comparable, and why."""
    published_said = f"published {ref.value:g} TFLOPS, {ref.card_words}: {why}"
    dtype = (figure.reference_figure or "").removeprefix("matmul ")
    same = same_shape(figure.device, dtype, figure.shape)
    clock = figure.clocks.sm_clock_mhz
    if same is None or not clock:
        missing = (
            "no SM clock was sampled while it ran (NVML)"
            if same is not None
            else "the lab has no healthy card's figure at this shape to judge it per clock"
        )
        return replace(
            row,
            verdict="not comparable",
            not_comparable=why,
            published_note=published_said,
            reason=_reason(figure.note, published_said, missing),
        )
    per_ghz = figure.value / (clock / 1000.0)
    return replace(
        row,
        reference=same.per_ghz,
        reference_kind="same shape per clock",
        reference_label=same.label(),
        reference_card=same.card_words(sku_of(figure.device)),
        source=same.source,
        date=same.date,
        fraction=per_ghz / same.per_ghz,
        verdict=judge(per_ghz, same.per_ghz),
        not_comparable=why,
        published_note=published_said,
        reason=_reason(
            figure.note,
            f"per clock: {per_ghz:.1f} TFLOPS/GHz at {clock:.0f} MHz against {same.per_ghz:.1f} on the healthy card",
            figure.slowdown,
            published_said,
            THRESHOLD_REASON,
        ),
    )


def _per_clock(figure: Figure) -> PerClock | None:
    """TFLOPS per GHz of SM clock against the card's datasheet peak per GHz: shown beside the TFLOPS, so a card
    held down by its power cap reads as the same card per clock."""
    dtype = (figure.reference_figure or "").removeprefix("matmul ")
    clock = figure.clocks.sm_clock_mhz
    peak = per_clock_peak(figure.device, dtype) if figure.unit == "TFLOPS" and dtype else None
    if not clock or peak is None:
        return None
    per_ghz, (peak_per_ghz, peak_clock, sheet) = figure.value / (clock / 1000.0), peak
    return PerClock(
        tflops_per_ghz=per_ghz,
        peak_per_ghz=peak_per_ghz,
        efficiency=per_ghz / peak_per_ghz,
        sm_clock_mhz=clock,
        peak_clock_mhz=peak_clock,
        source=sheet,
        text=f"{per_ghz:.1f} TFLOPS/GHz = {per_ghz / peak_per_ghz:.1%} of the peak per clock "
        f"({peak_per_ghz:.1f} at the sheet's {peak_clock:.0f} MHz)",
    )


def _with_faults(row: HealthRow, figure: Figure) -> HealthRow:
    """A fault the card named while measured (a hardware or thermal slowdown, a power brake, a clock far below
    boost at low power) makes the row at least below expected, named in words."""
    faults = figure.clocks.faults()
    if not faults:
        return row
    worse = row.verdict if _WORSE.get(row.verdict, 0) >= _WORSE["below expected"] else "below expected"
    said = f"the card named a fault while measured: {'; '.join(faults)}"
    return replace(row, verdict=worse, reason=_reason(said, row.reason))


def _reason(*parts: str | None) -> str:
    return "; ".join(dict.fromkeys(p for p in parts if p))


def step_row(figure: str, where: str, verdict: str, reason: str, measured=None, reference=None) -> HealthRow:
    """A row for what is not a figure: a doctor's check, a step that did not run or is not in this build."""
    return HealthRow(
        figure=figure,
        where=where,
        verdict=verdict,
        reason=reason,
        measured=measured,
        reference=reference,
        reference_kind="check" if reference is not None else None,
        reference_label=str(reference or ""),
    )


def slow_gpus(rows: list[HealthRow]) -> list[HealthRow]:
    """The rows with each GPU's throughput against its node's other GPUs: more than :data:`NODE_SPREAD` below
    the median of the same figure on the same model is the slow GPU (``slow_gpu``), said in its reason."""
    groups: dict[tuple, list[HealthRow]] = {}
    for r in rows:
        if r.unit == "TFLOPS" and r.device_kind == "cuda" and isinstance(r.measured, float):
            groups.setdefault((r.node, r.figure, r.device), []).append(r)
    slow: dict[int, HealthRow] = {}
    for peers in groups.values():
        if len({r.where for r in peers}) < 2:
            continue
        median = statistics.median(float(r.measured or 0.0) for r in peers)
        for r in peers:
            share = float(r.measured or 0.0) / median
            if share < 1 - NODE_SPREAD:
                said = (
                    f"the slow GPU of this node: {r.measured:.4g} TFLOPS against the median of its "
                    f"{len(peers)} GPUs, {median:.4g} ({share:.1%}; GPUs of one healthy node differ by about "
                    f"{NODE_SPREAD:.0%})"
                )
                slow[id(r)] = replace(r, slow_gpu=True, reason=_reason(said, r.reason))
    return [slow.get(id(r), r) for r in rows]


def below(row: HealthRow) -> bool:
    """Below its reference, its history, its fleet or its node's other GPUs."""
    return row.verdict in ("below expected", "far below") or row.regressed or row.outlier or row.slow_gpu


def overall(rows: list[HealthRow]) -> str:
    """healthy / below expected (a figure below its reference, its history or its node's other GPUs) / failed."""
    if any(r.verdict == "fail" for r in rows):
        return "failed"
    if any(below(r) for r in rows):
        return "below expected"
    return "healthy"


def summary(rows: list[HealthRow]) -> dict[str, int]:
    return {v: sum(r.verdict == v for r in rows) for v in ROW_VERDICTS} | {
        "regressed": sum(r.regressed for r in rows),
        "outliers": sum(r.outlier for r in rows),
        "slow GPUs": sum(r.slow_gpu for r in rows),
    }

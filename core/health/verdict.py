"""The verdict table: one row per figure or check, against its reference, its history and the thresholds.

Row verdicts: ``pass``, ``below expected``, ``far below`` (a figure against its SKU's reference),
``no reference`` (measured, but nothing to judge it by: "no reference for <name>"), ``not measured`` (the
step is unsupported here or not in this build, with the reason), ``fail`` (a doctor's check failed or a step
did not finish). The box is ``healthy`` when no row is below expected, far below, failed, regressed
against the box's own history or (a cluster run) an outlier of the fleet.
"""

from __future__ import annotations

from core.hardware.health_reference import THRESHOLD_REASON, device_name, judge, no_reference, reference
from core.health.figures import Figure
from core.health.history import History

ROW_VERDICTS = ("pass", "below expected", "far below", "no reference", "not measured", "fail")
BAD = ("below expected", "far below", "fail")
OVERALL = ("healthy", "below expected", "failed")


def figure_row(figure: Figure, history: History | None = None) -> dict:
    """A measured figure judged by its reference (or its ceiling), with the box's history beside it."""
    row: dict = {
        "figure": figure.figure,
        "where": figure.where,
        "device": device_name(figure.device),
        "device_kind": figure.device.get("kind"),
        "measured": figure.value,
        "unit": figure.unit,
        "reference": None,
        "reference_kind": None,
        "reference_label": "",
        "source": "",
        "date": "",
        "fraction": None,
        "verdict": "no reference",
        "reason": figure.note,
        "slowdown": figure.slowdown,
        "history": history.to_dict() if history else None,
        "regressed": bool(history and history.regressed),
    }
    if figure.ceiling is not None and figure.device.get("kind") != "cuda":
        flagged = f"the soak flagged it (over {figure.ceiling:g}%)" if figure.flagged else ""
        row["reason"] = "; ".join(x for x in (no_reference(figure.device), flagged) if x)
        return row  # a CPU's drop moves with whatever else the machine runs: measured, not judged
    if figure.ceiling is not None:
        row |= {
            "reference": figure.ceiling,
            "reference_kind": "ceiling",
            "reference_label": f"≤ {figure.ceiling:g}% (the soak's threshold)",
            "verdict": "below expected" if figure.flagged else "pass",
        }
        return row
    ref = reference(figure.device, figure.reference_figure) if figure.reference_figure else None
    if ref is None:
        row["reason"] = "; ".join(x for x in (no_reference(figure.device), figure.note) if x)
        return row
    return row | {
        "reference": ref.value,
        "reference_kind": ref.kind,
        "reference_label": ref.label(),
        "source": ref.source,
        "date": ref.date,
        "fraction": figure.value / ref.value,
        "verdict": judge(figure.value, ref.value),
        "reason": "; ".join(x for x in (figure.note, figure.slowdown, ref.reason, THRESHOLD_REASON) if x),
    }


def step_row(figure: str, where: str, verdict: str, reason: str, measured=None, reference=None) -> dict:
    """A row for what is not a figure: a doctor's check, a step that did not run or is not in this build."""
    return {
        "figure": figure,
        "where": where,
        "measured": measured,
        "unit": "",
        "reference": reference,
        "reference_kind": "check" if reference is not None else None,
        "reference_label": str(reference or ""),
        "source": "",
        "date": "",
        "fraction": None,
        "verdict": verdict,
        "reason": reason,
        "slowdown": "",
        "history": None,
        "regressed": False,
    }


def overall(rows: list[dict]) -> str:
    """healthy / below expected (a figure below its reference or its own history) / failed (a check or step)."""
    if any(r["verdict"] == "fail" for r in rows):
        return "failed"
    if any(r["verdict"] in BAD or r.get("regressed") or r.get("outlier") for r in rows):
        return "below expected"
    return "healthy"


def summary(rows: list[dict]) -> dict[str, int]:
    return {v: sum(r["verdict"] == v for r in rows) for v in ROW_VERDICTS} | {
        "regressed": sum(bool(r.get("regressed")) for r in rows),
        "outliers": sum(bool(r.get("outlier")) for r in rows),
    }

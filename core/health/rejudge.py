"""A stored health check judged again by today's rules and references: ``health --judge RUN_ID`` and Home.

The figures come from the runs the check measured with (kept inside it, ``meta.parts``; a check stored before
that names them, ``meta.run_ids``, and they are read from the store), judged as that box: its own device, its
own history. The doctor's checks and the steps that did not run are kept as they were stored: they are not
figures a rule reads. A check imported from another box says so, with the box and the time it was measured.
Nothing is measured and nothing is stored.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from core.errors import ConfigError
from core.hardware.identity import box_label
from core.health.check import HealthReport, _run_rows
from core.health.config import HealthConfig
from core.health.history import parts
from core.health.verdict import slow_gpus, step_row
from core.result import RunResult, now_iso
from core.rows.health import HealthRow, HealthSummary, JudgedAgain, health_rows
from core.units import timestamp_text

JUDGED = ("matmul-soak", "matmul", "interconnect")  # the experiments whose figures a check judges


def rejudge(check: RunResult, store) -> HealthReport:
    """``check`` (a stored health run) judged again; ConfigError where it is no health check or cannot be."""
    if check.experiment != "health":
        raise ConfigError(f"run {check.id} is a {check.experiment} run, not a health check")
    said = HealthSummary.from_run(check)
    if said.nodes:
        raise ConfigError(
            f"run {check.id} is a cluster check of {len(said.nodes)} nodes: it keeps each node's rows, not "
            "the runs they were measured with, so it cannot be judged again"
        )
    runs, missing = _measured_with(check, said, store)
    report = HealthReport(
        config=_config(check),
        device=check.device,
        versions=check.versions,
        started_at=check.started_at,
        finished_at=check.finished_at,
        wall_s=said.wall_s or 0.0,
    )
    report.runs = runs
    kept = [r for r in health_rows(check) if not r.unit]  # the doctor's checks, steps not run: as stored
    judged = [r for run in runs for r in _run_rows(_label(run), run, store)]
    report.rows = slow_gpus(judged + kept + missing)
    report.judged = [r.id for r in runs]
    report.judged_again = JudgedAgain(check.id, now_iso(), origin(check), check.imported)
    return report


def origin(check: RunResult) -> str:
    """Where the check was measured, in words: this box's store, or imported from another box."""
    device = check.device or {}
    where = box_label(device) if device else HealthSummary.from_run(check).host
    when = f"measured {timestamp_text(check.started_at)} UTC"
    if check.imported:
        return f"imported from another box: {where} ({device.get('name', '?')}), {when}; judged as that box"
    return f"{where} ({device.get('name', '?')}), {when}"


def _measured_with(check: RunResult, said: HealthSummary, store) -> tuple[list[RunResult], list[HealthRow]]:
    """The runs whose figures the check judged, and a failed row for each it names that the store lacks."""
    kept = parts(check)
    if kept:
        ids = said.judged
        chosen = [r for r in kept if r.id in ids] if ids is not None else [r for r in kept if _judged(r)]
        return chosen, []
    runs: list[RunResult] = []
    missing: list[HealthRow] = []
    for run_id in said.run_ids:
        try:
            runs.append(store.get(run_id))
        except (KeyError, AttributeError):
            missing.append(step_row(f"run {run_id}", "?", "fail", "the check names this run; the store lacks it"))
    return [r for r in runs if _judged(r)], missing


def _judged(run: RunResult) -> bool:
    """A part the check judged: a soak, a search or the interconnect, never the doctor's smallest runs."""
    return run.experiment in JUDGED and ": doctor" not in (run.name or "")


def _label(run: RunResult) -> str:
    dtype = run.config.get("dtype") or next(iter(run.config.get("dtypes") or []), "?")
    return {"matmul-soak": f"matmul {dtype} soak", "matmul": f"matmul {dtype} search"}.get(
        run.experiment, "copies and all_reduce"
    )


def _config(check: RunResult) -> HealthConfig:
    """The check's settings as stored (a field a later version added takes its default)."""
    names = {f.name for f in dataclasses.fields(HealthConfig)}
    stored: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in check.config.items() if k in names}
    try:
        return HealthConfig(**stored)
    except (ConfigError, TypeError):
        return HealthConfig()

"""Running the health check: the doctor, the soak and the bounded shape search on every GPU, copies and
all_reduce, then the verdict table.

Like the doctor, every measurement is a job of the normal path (:class:`~core.jobs.JobManager`, a worker per
device); the part runs are kept inside the one stored health run (``meta["parts"]``), so a check adds one run
to the history, not one per part. This module imports no torch. The soak is the ``matmul-soak`` experiment, found
by name in the registry: a build without it says "not available in this build" in its row and runs the rest.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from core.errors import ConfigError
from core.hardware.health_reference import RULES, THRESHOLD_REASON
from core.hardware.identity import box_identity
from core.health.config import HealthConfig
from core.health.figures import SOAK, figures_of
from core.health.history import history_of
from core.health.verdict import figure_row, overall, slow_gpus, step_row, summary
from core.health.words import answer, cell, marks, place, reference_text, while_measured
from core.result import RunResult, now_iso
from core.rows.health import HealthRow, JudgedAgain
from core.rows.interconnect import InterconnectTables
from core.units import count_text, duration_text

BUNDLE_FORMAT = "gpulab-health"
Progress = Callable[[int, int, str], None]


@dataclass
class HealthReport:
    config: HealthConfig
    rows: list[HealthRow] = field(default_factory=list)
    runs: list[RunResult] = field(default_factory=list)
    device: dict = field(default_factory=dict)  # the box as its runs described it
    versions: dict = field(default_factory=dict)
    started_at: str = field(default_factory=now_iso)
    finished_at: str | None = None
    wall_s: float = 0.0
    judged: list[str] = field(default_factory=list)  # the ids of the runs whose figures the rows judge
    judged_again: JudgedAgain | None = None  # a stored check judged again: of which run, when, from which box

    @property
    def verdict(self) -> str:
        return overall(self.rows)

    @property
    def exit_code(self) -> int:
        return 0 if self.verdict == "healthy" else 1

    def bundle(self) -> dict:
        return {
            "format": BUNDLE_FORMAT,
            "version": 1,
            "verdict": self.verdict,
            "summary": summary(self.rows),
            "answer": answer(self.rows, self.device),
            "box": box_identity(self.device),
            "device": self.device,
            "versions": self.versions,
            "config": dataclasses.asdict(self.config),
            "thresholds": THRESHOLD_REASON,
            "rules": list(RULES),
            "judged_again": dataclasses.asdict(self.judged_again) if self.judged_again else None,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "wall_s": self.wall_s,
            "rows": [r.to_row() for r in self.rows],
        }

    def to_run(self, of: RunResult | None = None) -> RunResult:
        """The health check as one stored run (experiment "health"): the home page and the report read it. ``of``:
        the stored check this report judged again, whose id, name and origin it keeps."""
        bad = [r for r in self.rows if r.verdict == "fail"]
        run = RunResult(
            experiment="health",
            config=dataclasses.asdict(self.config),
            device=self.device or {"kind": "unknown", "name": self.config.device},
            versions=self.versions,
            started_at=self.started_at,
            finished_at=self.finished_at,
            status="error" if bad else "ok",
            error=(
                f"{count_text(len(bad), 'step or check', 'steps or checks')} failed: "
                + "; ".join(r.figure for r in bad)
            )
            if bad
            else None,
            rows=[r.to_row() for r in self.rows],
            meta={k: v for k, v in self.bundle().items() if k not in ("rows", "device", "versions", "config")}
            | {"parts": [r.to_dict() for r in self.runs], "judged": self.judged},  # its runs, whole (the history)
            name="health",
        )
        if of is not None:
            run.id, run.name, run.tags, run.imported = of.id, of.name, of.tags, of.imported
        return run


def _doctor_rows(report) -> list[HealthRow]:
    """The doctor's cross-checks one row each; its "experiment runs" checks as one row unless one failed."""
    verdicts = {"pass": "pass", "fail": "fail", "unsupported": "not measured"}
    where = report.device_description.get("torch_device") or report.device
    ran = {f"({r.experiment}) runs" for r in report.runs}
    runs = [c for c in report.checks if any(c.check.endswith(x) for x in ran)]
    rows = [
        step_row(f"doctor: {c.check}", where, verdicts[c.verdict], c.reason, measured=c.result, reference=c.expected)
        for c in report.checks
        if c not in runs or c.verdict == "fail"
    ]
    if runs:
        failed = sum(c.verdict == "fail" for c in runs)
        unsupported = [c.check.removesuffix(" runs") for c in runs if c.verdict == "unsupported"]
        measured = f"{len(runs) - failed - len(unsupported)} of {len(runs)} ok" + (
            f", {len(unsupported)} unsupported here" if unsupported else ""
        )
        reason = f"unsupported here: {', '.join(unsupported)}" if unsupported else ""
        verdict = "fail" if failed else "pass"
        rows.insert(0, step_row("doctor: every experiment runs", where, verdict, reason, measured, "ok or unsupported"))
    return rows


def _unfinished(label: str, run: RunResult) -> list[HealthRow]:
    """A step whose run did not finish: not measured (unsupported here) or failed, with the reason."""
    where = run.device_info.torch_device or "?"
    if run.status == "unsupported":
        return [step_row(label, where, "not measured", run.error or "unsupported")]
    return [step_row(label, where, "fail", run.error or run.status)]


def _run_rows(label: str, run: RunResult, store) -> list[HealthRow]:
    if run.status != "ok":
        return _unfinished(label, run)
    history = history_of(store, run)
    rows = [figure_row(f, history.get(f.key)) for f in figures_of(run)]
    if run.experiment == "interconnect":  # a part the device cannot run is a row of its own, with the reason
        tables = InterconnectTables.from_run(run)
        for parts, what in ((tables.host_copies, "host↔device copies"), (tables.peers, "peer copies"),
                            (tables.collectives, "all_reduce")):  # fmt: skip
            for r in (r for r in parts if r.status == "unsupported"):
                rows.append(step_row(what, run.device_info.torch_device or "?", "not measured", r.reason or ""))
    return rows


def soak_available() -> bool:
    from core.registry import listing

    return any(e.name == SOAK for e in listing())


def soak_config(dtype: str, seconds: float) -> dict:
    """The soak's settings, given only where its config has the field (its other options keep their defaults)."""
    from core.registry import get

    names = {f.name for f in dataclasses.fields(get(SOAK).config_type)}
    return {k: v for k, v in {"dtype": dtype, "duration_s": seconds}.items() if k in names}


def _gpus(device: str) -> list[str]:
    """The devices the soak runs on: every GPU for auto/all, the one named, or the CPU."""
    if device == "cpu":
        return ["cpu"]
    if device.startswith("cuda"):
        return ["cuda:0" if device == "cuda" else device]
    from core.workerprocess import query_devices

    info = query_devices()
    gpus = [d["torch_device"] for d in info["devices"] if d.get("kind") == "cuda"]
    if device == "all" and not gpus:
        raise ConfigError(f"device {device}: this box has no CUDA GPU ({info.get('cuda_unavailable_reason')})")
    return gpus or ["cpu"]


@dataclass
class _Steps:
    """What the parts of one check share: where they run, whom they tell, and the report they add to."""

    cfg: HealthConfig
    manager: Any
    store: Any
    report: HealthReport
    devices: list[str]
    name: str
    notify: Progress
    rows_so_far: Callable[[list[HealthRow]], None]
    done: int = 0  # parts finished

    @property
    def cuda(self) -> bool:
        return self.devices[0] != "cpu"

    @property
    def total(self) -> int:
        return len(self.cfg.parts)

    def ran(self, run: RunResult | None, label: str) -> None:
        """A part's finished run, kept in the report with its rows (its figures judged, or why there are none)."""
        assert run is not None  # wait() without a timeout returns once the job has its result
        self.report.runs.append(run)
        self.report.judged.append(run.id)
        self.report.rows += _run_rows(label, run, self.store)


def run_health(
    cfg: HealthConfig,
    manager=None,
    *,
    store=None,
    on_progress: Progress | None = None,
    on_rows: Callable[[list[HealthRow]], None] | None = None,
    name: str = "health",
) -> HealthReport:
    """Run the check through ``manager`` (a fresh :class:`~core.jobs.JobManager` without a store if None);
    ``store`` is read for the box's history (and the manager's store is where the step runs go).
    ``on_rows`` receives every row so far after each part (a node of a cluster run sends them on)."""
    from core.hardware.device import check_device_string
    from core.jobs import JobManager

    check_device_string(cfg.device)
    own = manager is None
    manager = manager or JobManager(store=None)
    report = HealthReport(config=cfg)
    t0 = time.monotonic()
    notify = on_progress or (lambda done, total, message: None)
    try:
        steps = _Steps(cfg, manager, store, report, _gpus(cfg.device), name, notify, on_rows or (lambda rows: None))
        if "doctor" in cfg.parts:
            _doctor_step(steps)
        if "soak" in cfg.parts:
            _soak_step(steps)
        if "search" in cfg.parts:
            _search_step(steps)
        if "copies" in cfg.parts or "collectives" in cfg.parts:
            _interconnect_step(steps)
        notify(steps.total, steps.total, "verdict")
    finally:
        if own:
            manager.shutdown()
    report.rows = slow_gpus(report.rows)
    described = [r for r in report.runs if r.device_info.kind in ("cpu", "cuda")]
    if described:
        report.device, report.versions = described[0].device, described[0].versions
    report.finished_at = now_iso()
    report.wall_s = time.monotonic() - t0
    return report


def _doctor_step(s: _Steps) -> None:
    from core.doctor import run_doctor

    s.notify(s.done, s.total, f"doctor on {s.devices[0]}")
    doc = run_doctor(s.devices[0], s.manager, name=f"{s.name}: doctor", timeout_s=s.cfg.timeout_s, save=False)
    s.report.runs += doc.runs
    s.report.rows += _doctor_rows(doc)
    s.done += 1
    s.notify(s.done, s.total, f"doctor: {len(doc.failed)} failed")
    s.rows_so_far(s.report.rows)


def _soak_step(s: _Steps) -> None:
    dtype = s.cfg.soak_dtype(s.cuda)
    s.notify(
        s.done, s.total, f"soak: {s.cfg.soak_seconds:g} s of {dtype} matmul on {count_text(len(s.devices), 'device')}"
    )
    label = f"matmul {dtype} soak"
    if not soak_available():
        where = ",".join(s.devices)
        s.report.rows.append(
            step_row(label, where, "not measured", f"not available in this build: no {SOAK} experiment")
        )
    else:
        soak = soak_config(dtype, s.cfg.soak_seconds)
        jobs = [
            s.manager.submit(SOAK, soak, d, timeout_s=s.cfg.timeout_s, name=f"{s.name}: soak {d}", save=False)
            for d in s.devices
        ]
        for job in jobs:  # every GPU at once: each on its own queue, as a loaded node runs
            s.ran(job.wait(), label)
    s.done += 1
    s.rows_so_far(s.report.rows)


def _search_step(s: _Steps) -> None:
    """The bounded shape search on every GPU at once: its best is what the card's published maximum judges."""
    dtype = s.cfg.soak_dtype(s.cuda)
    budget = s.cfg.search_seconds
    s.notify(s.done, s.total, f"search: {budget:g} s of {dtype} shapes on {count_text(len(s.devices), 'device')}")
    config = s.cfg.search(dtype)
    jobs = [
        s.manager.submit("matmul", config, d, timeout_s=s.cfg.timeout_s, name=f"{s.name}: search {d}", save=False)
        for d in s.devices
    ]
    for job in jobs:
        s.ran(job.wait(), f"matmul {dtype} search")
    s.done += 1
    s.rows_so_far(s.report.rows)


def _interconnect_step(s: _Steps) -> None:
    """Copies and all_reduce, one job; a part with nothing to run here (one GPU: no peer) is said so."""
    gpus = len(s.devices) if s.cuda else 0
    settings = s.cfg.interconnect(gpus)
    s.notify(s.done, s.total, "copies and all_reduce" if settings["parts"] else "interconnect: nothing to run")
    if settings["parts"]:
        device = "cuda:0" if s.cuda else "cpu"
        job = s.manager.submit(
            "interconnect", settings, device, timeout_s=s.cfg.timeout_s, name=f"{s.name}: interconnect", save=False
        )
        s.ran(job.wait(), "copies and all_reduce")
    if "collectives" in s.cfg.parts and gpus == 1:
        s.report.rows.append(step_row("all_reduce busbw", s.devices[0], "not measured", "one GPU: no peer"))
    s.done += sum(p in s.cfg.parts for p in ("copies", "collectives"))
    s.rows_so_far(s.report.rows)


def table(rows: list[HealthRow]) -> str:
    """The verdict table as aligned text: figure, where, measured, per clock, reference, verdict; under each row
    what the card said while measured, the reference's card, and the reasons of rows that did not pass (each
    once)."""
    heads = ("figure", "where", "measured", "per clock", "reference", "verdict")
    cells = [
        (
            r.figure,
            place(r),
            cell(r, r.measured),
            f"{r.per_clock.efficiency:.1%} of peak" if r.per_clock else "—",
            reference_text(r),
            r.verdict + marks(r),
        )
        for r in rows
    ]
    widths = [min(44, max(len(h), *(len(c[i]) for c in cells))) if cells else len(h) for i, h in enumerate(heads)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(heads, widths)).rstrip()]
    said: set[str] = set()
    for r, c in zip(rows, cells):
        lines.append("  ".join(_clip(v, w).ljust(w) for v, w in zip(c, widths)).rstrip())
        notes = [r.history.text] if r.history else []
        if r.clocks:
            notes.append(f"while measured: {while_measured(r, ' (')})")
        if r.reference_card:
            notes.append(f"reference {r.reference_card}")
        if r.published_note and r.verdict != "not comparable":
            notes.append(r.published_note)
        if r.verdict != "pass" and r.reason and r.reason not in said:
            said.add(r.reason)
            notes.append(r.reason)
        lines += [f"    ↳ {n}" for n in notes]
    return "\n".join(lines)


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def report_text(report: HealthReport) -> str:
    again = report.judged_again
    head = [f"Judged again by today's rules: {again.origin}", ""] if again else []
    return "\n".join(
        [
            *head,
            report.bundle()["answer"],
            "",
            table(report.rows),
            "",
            f"thresholds: {THRESHOLD_REASON}",
            "every rule and its source: python -m core health --references",
            f"{len(report.rows)} rows in {duration_text(report.wall_s)}: verdict {report.verdict}",
        ]
    )

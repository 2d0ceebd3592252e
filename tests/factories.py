"""Runs built by hand for the tests: one factory, so a test names only what it is about (its experiment,
rows, meta, device or status) and every other field of a RunResult has a plain default."""

from __future__ import annotations

from core.result import RunResult
from core.rows.matmul_soak import SoakSample, SoakSummary

CPU = {"kind": "cpu", "name": "Test CPU"}
VERSIONS = {"torch": "2.13.0", "cuda": None}
STARTED = "2026-01-01T00:00:00+00:00"
FINISHED = "2026-01-01T00:00:01+00:00"


def make_run(
    experiment: str = "matmul",
    rows: list[dict] | None = None,
    meta: dict | None = None,
    device: dict | None = None,
    status: str = "ok",
    **fields,
) -> RunResult:
    """A RunResult of ``experiment`` on a CPU, started and finished at fixed times; ``fields`` (config,
    versions, started_at, finished_at, error, id, name, tags, …) replace the defaults."""
    values: dict = dict(config={}, versions=dict(VERSIONS), started_at=STARTED, finished_at=FINISHED) | fields
    return RunResult(
        experiment=experiment,
        device=dict(CPU) if device is None else device,
        status=status,
        rows=[] if rows is None else rows,
        meta={} if meta is None else meta,
        **values,
    )


def soak_summary(rows: list[dict], burst_s: float, threshold_pct: float, unit: tuple[str, float]) -> dict:
    """The engine's burst/sustained summary of hand-made soak rows, as a run's meta stores it ({} for none)."""
    summary = SoakSummary.of([SoakSample.from_row(r) for r in rows], burst_s, threshold_pct, unit)
    return summary.to_meta() if summary else {}

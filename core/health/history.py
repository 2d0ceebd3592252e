"""A figure against the same box's earlier runs of the same experiment and settings.

A regression is a value below the lowest earlier value by more than the earlier runs' own spread (their
range, and at least :data:`NOISE_FLOOR` of their median, so three identical runs do not turn a 1 % wobble
into a flag). Other boxes, other settings and runs stored without a box identity are never compared.
"""

from __future__ import annotations

import statistics

from core.hardware.identity import box_key
from core.health.figures import Figure, figures_of
from core.result import RunResult, SchemaError
from core.rows.health import History

NOISE_FLOOR = 0.03  # a GPU's repeated runs differ by a few percent (clocks, temperature)
MIN_EARLIER = 2  # a spread needs two runs
MAX_EARLIER = 50  # the newest runs of the box are what "still" means


def same_settings(a: RunResult, b: RunResult) -> bool:
    return a.experiment == b.experiment and a.config == b.config


def earlier_runs(store, run: RunResult) -> list[RunResult]:
    """The box's earlier finished runs of the same experiment and settings, oldest first."""
    key = box_key(run.device)
    if key is None or store is None:
        return []
    runs = stored_runs(store, run.experiment, until=run.started_at, limit=MAX_EARLIER * 4)
    same = [r for r in runs if r.id != run.id and same_settings(r, run) and box_key(r.device) == key]
    return list(reversed(same[:MAX_EARLIER]))


def stored_runs(store, experiment: str, until: str | None = None, limit: int = 200) -> list[RunResult]:
    """The finished runs of ``experiment``, newest first: runs of their own and the parts kept inside health
    checks (a check stores one run, its parts inside it)."""
    runs = store.list(experiment=experiment, status="ok", until=until, limit=limit)
    checks = store.list(experiment="health", until=until, limit=limit)
    runs += [p for c in checks for p in parts(c) if p.experiment == experiment and p.status == "ok"]
    return sorted(runs, key=lambda r: r.started_at, reverse=True)[:limit]


def parts(check: RunResult) -> list[RunResult]:
    """The runs a health check measured with, kept inside it (a part that does not read is skipped)."""
    found = []
    for part in check.meta.get("parts") or []:
        try:
            found.append(RunResult.from_dict(part))
        except (SchemaError, TypeError):
            continue
    return found


def compare(figure: Figure, earlier: list[tuple[str, float]]) -> History | None:
    """``figure`` against earlier (run id, value) pairs; None when there are too few to have a spread or the
    figure has a ceiling instead of a direction (the soak's drop)."""
    if figure.ceiling is not None or len(earlier) < MIN_EARLIER:
        return None
    values = [v for _, v in earlier]
    median, low, high = statistics.median(values), min(values), max(values)
    margin = max(high - low, NOISE_FLOOR * median)
    return History(
        figure.figure,
        figure.where,
        figure.unit,
        figure.value,
        values,
        [i for i, _ in earlier],
        median,
        low,
        high,
        figure.value < low - margin,
    )


def history_of(store, run: RunResult) -> dict[str, History]:
    """Every figure of ``run`` against the same box's earlier runs, by :attr:`Figure.key`."""
    earlier = [(r.id, {f.key: f.value for f in figures_of(r)}) for r in earlier_runs(store, run)]
    out = {}
    for figure in figures_of(run):
        found = compare(figure, [(i, values[figure.key]) for i, values in earlier if figure.key in values])
        if found is not None:
            out[figure.key] = found
    return out

"""Stored runs as lists and tables, for Compare's history and the import pickers: the history table, its
filter and sort orders, the one-line label of a run, and a run's settings and device as tables.

Summaries (:class:`~core.result.RunSummary`) are enough for everything but the two tables of one run, so
listing a store never decodes a whole run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pandas as pd

from core.result import RunResult, RunSummary
from core.rows.provenance import Provenance
from core.units import timestamp_text
from render import comparison
from render.report import device_pairs

LISTED = 2000  # the newest runs the history reads (their summaries); its experiment and status filters reach older
HISTORY_COLUMNS = [
    "id",
    "started",
    "experiment",
    "device",
    "settings",
    "status",
    "headline",
    "name",
    "tags",
    "imported",
]
SORTS: dict[str, Callable[[RunSummary], str]] = {
    "newest first": lambda r: r.started_at,
    "experiment": lambda r: r.experiment,
    "device": comparison.device_text,
    "status": lambda r: r.status,
    "name": lambda r: r.name.lower(),
}


def history_frame(runs: Sequence[RunSummary]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "id": r.id[:8],
                "started": timestamp_text(r.started_at),
                "experiment": r.experiment,
                "device": comparison.device_text(r),
                "settings": comparison.settings_text(r.config),
                "status": "damaged (runs check)" if r.damaged else r.status,
                "headline": r.headline,
                "name": r.name,
                "tags": ", ".join(r.tags),
                "imported": r.imported,
            }
            for r in runs
        ],
        columns=HISTORY_COLUMNS,
    )


@dataclass(frozen=True)
class Filter:
    """What the history shows: runs of any of ``experiments`` and ``statuses`` (all when empty) whose device
    contains ``device`` and whose name, tags or settings contain ``text`` (both case-insensitive)."""

    experiments: Sequence[str] = ()
    statuses: Sequence[str] = ()
    device: str = ""
    text: str = ""

    def keeps(self, run: RunSummary) -> bool:
        device, text = self.device.strip().lower(), self.text.strip().lower()
        return (
            (not self.experiments or run.experiment in self.experiments)
            and (not self.statuses or run.status in self.statuses)
            and (
                not device
                or device in comparison.device_text(run).lower()
                or device in str(run.device_info.label or "").lower()
            )
            and (
                not text or text in " ".join([run.name, *run.tags, comparison.settings_text(run.config, 10**6)]).lower()
            )
        )


def shown(runs: Sequence[RunSummary], keep: Filter, sort: str) -> list[RunSummary]:
    """The runs ``keep`` keeps, in the order ``sort`` names (the newest first; the other orders ascending)."""
    return sorted((r for r in runs if keep.keeps(r)), key=SORTS[sort], reverse=(sort == "newest first"))


def run_label(run: RunSummary) -> str:
    name = f" · {run.name}" if run.name else ""
    return f"{run.id[:8]} · {run.experiment} · {comparison.device_text(run)} · {timestamp_text(run.started_at, minutes=True)}{name}"


def import_label(run: RunResult | RunSummary) -> str:
    """An imported file in a picker: its name (a summary has no meta: the file's name where the run has none), when
    it was imported, the start of its id."""
    name = run.name or (Provenance.from_run(run).file or "" if isinstance(run, RunResult) else "") or "unnamed import"
    return f"{name} · {timestamp_text(run.started_at, minutes=True)} · {run.id[:6]}"


def settings_frame(run: RunResult) -> pd.DataFrame:
    return pd.DataFrame([(k, comparison.value_text(v)) for k, v in run.config.items()], columns=["setting", "value"])


def device_frame(run: RunResult) -> pd.DataFrame:
    """The device's description and the versions the run recorded, the empty ones left out."""
    return pd.DataFrame(
        [(k, str(v)) for k, v in device_pairs(run) if v not in (None, "")]
        + [(k, str(v)) for k, v in run.versions.items() if v],
        columns=["property", "value"],
    )

"""``runs-import``: add the runs of a runs file exported on another box (Compare's uploader), read in a worker.

The dashboard only saves the upload; this worker reads it through the store's bounded, all-or-nothing import
(:meth:`core.store.RunStore.import_file`), so a hostile runs file is parsed under the worker's memory cap,
never in the dashboard's process (a 242 KiB gzip once took the server past 4 GiB). The job is no run of its
own (the page submits it with ``save=False``): its meta says how many runs were added. A refused file is a
bad-input error naming the file; nothing was added. ``python -m core runs import`` reads in its own process.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from core.errors import ConfigError
from core.experiment import Context, Output, Progress, file_import
from core.workload.files import check_file


@dataclass(frozen=True)
class RunsImportConfig:
    path: str = field(
        default="", metadata={"help": "runs file: JSON from `runs export`, or .gz of it", "stored": False}
    )
    db: str = field(
        default="", metadata={"help": "run database to add the runs to (default: the lab's)", "stored": False}
    )

    def __post_init__(self) -> None:
        check_file(self.path, "runs")


def run(cfg: RunsImportConfig, ctx: Context):
    from core.store import ImportRefused, RunStore, StoreError

    path = Path(cfg.path)
    yield Progress(0, 1, f"reading {path.name}")
    try:
        added, present = RunStore(cfg.db or None).import_file(path)
    except (ImportRefused, StoreError) as exc:
        raise ConfigError(f"{path.name}: {exc}") from None
    yield Progress(1, 1, "done")
    return Output(rows=[], meta={"added": added, "already_present": present})


EXPERIMENTS = [
    file_import("runs-import", "Runs file (imported)", RunsImportConfig, run, __doc__, lambda cfg: (cfg.path,))
]

"""Rows with a type: per experiment, the record its runs store, built once by the engine, and the one
``upgrade`` that gives a run stored by an earlier version what its rows lacked (the store applies it to
every run it reads)."""

from __future__ import annotations

import importlib

from core.result import RunResult

# experiment → the module whose ``upgrade`` reads its earlier runs; imported when such a run is read, so that
# importing one table's rows (a trace's, in an import worker) does not import another's
UPGRADES: dict[str, str] = {"matmul": "core.rows.matmul"}


def upgrade(run: RunResult) -> RunResult:
    """The run as the current version stores it: its experiment's upgrade, or the run itself."""
    module = UPGRADES.get(run.experiment)
    return importlib.import_module(module).upgrade(run) if module else run

"""Rows with a type: per experiment, the record its runs store, built once by the engine, and the one
``upgrade`` that gives a run stored by an earlier version what its rows lacked (the store applies it to
every run it reads)."""

from __future__ import annotations

from collections.abc import Callable

from core.result import RunResult
from core.rows import matmul

UPGRADES: dict[str, Callable[[RunResult], RunResult]] = {"matmul": matmul.upgrade}


def upgrade(run: RunResult) -> RunResult:
    """The run as the current version stores it: its experiment's upgrade, or the run itself."""
    step = UPGRADES.get(run.experiment)
    return step(run) if step else run

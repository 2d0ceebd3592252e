"""Figure builders, one module per experiment: ``render/plots/<experiment>.py`` (dashes → underscores).

Each module defines ``figures(run: RunResult) -> list[Chart]``: pure Plotly, no Streamlit, so the
experiment's page, the compare page and the HTML report draw a stored run identically. A module
may also define ``overlay(runs: list[RunResult]) -> list[Chart]`` for the compare page.
"""

from __future__ import annotations

import importlib

from core.result import RunResult
from render.chart import Chart


def _module(experiment: str):
    """The experiment's plot module, or None when it has none; a plot module that exists but fails to import (a
    broken import inside it) raises, never reads as "no plot" (Compare and the report then drew nothing, silently)."""
    name = f"render.plots.{experiment.replace('-', '_')}"
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name == name:
            return None
        raise


def figures_for(run: RunResult) -> list[Chart]:
    """The experiment's own charts for a run (empty if it has no plot module or no rows)."""
    module = _module(run.experiment)
    if module is None or not run.rows:
        return []
    return module.figures(run)


def overlay_for(runs: list[RunResult]) -> list[Chart] | None:
    """Overlay charts for runs of one experiment, or None if its module defines no overlay."""
    module = _module(runs[0].experiment)
    if module is None or not hasattr(module, "overlay"):
        return None
    return module.overlay(runs)

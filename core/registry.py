"""Finds the experiments: every module of :mod:`core.experiments` contributes its ``EXPERIMENTS`` list.

Adding an experiment is adding a module to that package; nothing in the frame names it.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache

from core import experiments as _package
from core.errors import ConfigError
from core.experiment import Experiment


@lru_cache(maxsize=1)
def experiments() -> dict[str, Experiment]:
    found: dict[str, Experiment] = {}
    for info in sorted(pkgutil.iter_modules(_package.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{_package.__name__}.{info.name}")
        for exp in getattr(module, "EXPERIMENTS", ()):
            if exp.name in found:
                raise RuntimeError(f"experiment {exp.name!r} is defined twice")
            found[exp.name] = exp
    return found


def module_names() -> list[str]:
    """The experiment modules, without importing them."""
    return sorted(info.name for info in pkgutil.iter_modules(_package.__path__))


def get(name: str) -> Experiment:
    """The experiment called ``name``. Its own module (the sub-command is the module's name, dashes for
    underscores) is imported first, so asking for a torch-free experiment imports no torch."""
    module = name.replace("-", "_") if isinstance(name, str) else ""
    if module in module_names():
        found = {
            e.name: e for e in getattr(importlib.import_module(f"{_package.__name__}.{module}"), "EXPERIMENTS", ())
        }
        if name in found:
            return found[name]
    try:
        return experiments()[name]
    except KeyError:
        raise ConfigError(f"unknown experiment {name!r}; known: {', '.join(sorted(experiments()))}") from None

"""Finds the experiments: every module of :mod:`core.experiments` contributes its ``EXPERIMENTS`` list.

Adding an experiment is adding a module to that package; nothing in the frame names it.
"""
from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache

from core import experiments as _package
from core.experiment import ConfigError, Experiment


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


def get(name: str) -> Experiment:
    try:
        return experiments()[name]
    except KeyError:
        raise ConfigError(f"unknown experiment {name!r}; known: {', '.join(sorted(experiments()))}") from None

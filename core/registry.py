"""Finds the experiments: every ``core`` module that defines ``EXPERIMENTS`` contributes its list.

Adding an experiment is adding a module; nothing in the frame names it.
"""
from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache

import core
from core.experiment import ConfigError, Experiment

_FRAME = {"cli", "worker", "jobs", "store", "registry", "paths", "result", "experiment", "device", "specs"}


@lru_cache(maxsize=1)
def experiments() -> dict[str, Experiment]:
    found: dict[str, Experiment] = {}
    for info in sorted(pkgutil.iter_modules(core.__path__), key=lambda m: m.name):
        if info.name.startswith("_") or info.name in _FRAME:
            continue
        module = importlib.import_module(f"core.{info.name}")
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

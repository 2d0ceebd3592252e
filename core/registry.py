"""Finds the experiments: every module of :mod:`core.experiments` contributes its ``EXPERIMENTS`` list.

Adding an experiment is adding a module to that package; nothing in the frame names it. The modules are
imported to read their lists (as Bokeh finds its subcommands): each imports torch only in the functions
that run tensors, so ``python -m core --help`` and the commands that run no tensor never import it
(``tests/core/test_torch_free.py``). Each experiment lives in the module named after it (``matmul-soak`` in
``matmul_soak.py``), so :func:`get` imports that one module, not all of them: a command or a worker that runs
one experiment pays for no other.
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
    for module in module_names():
        for exp in getattr(importlib.import_module(f"{_package.__name__}.{module}"), "EXPERIMENTS", ()):
            if exp.name in found:
                raise RuntimeError(f"experiment {exp.name!r} is defined twice")
            found[exp.name] = exp
    return found


def module_names() -> list[str]:
    """The experiment modules, without importing them."""
    return sorted(info.name for info in pkgutil.iter_modules(_package.__path__))


def get(name: str) -> Experiment:
    """The experiment called ``name``: from its own module where that defines it, else from every module."""
    own = name.replace("-", "_") if isinstance(name, str) else None
    if own in module_names():
        for exp in getattr(importlib.import_module(f"{_package.__name__}.{own}"), "EXPERIMENTS", ()):
            if exp.name == name:
                return exp
    try:
        return experiments()[name]
    except (KeyError, TypeError):
        raise ConfigError(f"unknown experiment {name!r}; known: {', '.join(sorted(experiments()))}") from None


def listing() -> tuple[Experiment, ...]:
    """Every experiment, by name: what ``--help`` lists."""
    return tuple(sorted(experiments().values(), key=lambda e: e.name))

"""Finds the experiments: every module of :mod:`core.experiments` contributes its ``EXPERIMENTS`` list.

Adding an experiment is adding a module to that package; nothing in the frame names it. Most experiment
modules import torch: :func:`listing` names every experiment by reading the modules' source instead, so
``python -m core --help`` and the commands that run no tensor never import it.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

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


@dataclass(frozen=True)
class Listed:
    """What ``--help`` shows of an experiment, read from its module's source without importing it."""

    name: str
    title: str
    description: str
    command: bool
    module: str


@lru_cache(maxsize=1)
def listing() -> tuple[Listed, ...]:
    """Every experiment, from the literal ``Experiment(...)`` calls of each module's ``EXPERIMENTS`` (the
    description being the module docstring's first line where it is not a literal). A module whose list is
    not written that way is imported instead, so the listing is never wrong, only slower."""
    found: list[Listed] = []
    for module in module_names():
        source = Path(_package.__path__[0], f"{module}.py").read_text(encoding="utf-8")
        listed = _literal_listing(module, source)
        if listed is None:
            imported = importlib.import_module(f"{_package.__name__}.{module}")
            listed = [
                Listed(e.name, e.title, e.description, e.command, module) for e in getattr(imported, "EXPERIMENTS", ())
            ]
        found += listed
    return tuple(sorted(found, key=lambda e: e.name))


_DOC = re.compile(r'\A\s*(?:"""|\'\'\')\s*(.*?)\s*(?:\n|"""|\'\'\')', re.S)


def _literal_listing(module: str, source: str) -> list[Listed] | None:
    """Only the module's docstring and its ``EXPERIMENTS = [...]`` statement are parsed (a whole module's
    tree costs ten times more, and ``--help`` reads sixteen of them)."""
    start = source.find("\nEXPERIMENTS = [")
    if start < 0:
        return None
    try:
        tree = ast.parse(source[start + 1 :])
    except SyntaxError:  # something follows the list that needs the rest of the module
        return None
    found = _DOC.match(source)
    doc = found.group(1) if found else ""
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.value, ast.List)):
            continue
        target = node.targets[0]
        if not (isinstance(target, ast.Name) and target.id == "EXPERIMENTS"):
            continue
        out = []
        for call in node.value.elts:
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "Experiment"):
                return None
            kw = {k.arg: k.value for k in call.keywords if k.arg}
            values = {k: v.value for k, v in kw.items() if isinstance(v, ast.Constant)}
            name, title = values.get("name"), values.get("title")
            description = values.get("description", doc if "description" in kw else "")
            command = values.get("command", True)
            if not (isinstance(name, str) and isinstance(title, str) and isinstance(description, str)):
                return None
            out.append(Listed(name, title, description, command is not False, module))
        return out
    return None

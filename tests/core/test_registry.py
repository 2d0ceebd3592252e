"""The experiments are found from the package's modules; nothing else names them."""

from pathlib import Path

import pytest

from core import registry
from core.experiment import ConfigError

PACKAGE = Path(__file__).resolve().parents[2] / "core" / "experiments"


def test_module_names_are_the_files_of_the_package():
    files = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__")
    assert registry.module_names() == files


def test_every_experiment_once_under_its_name():
    found = registry.experiments()
    assert all(name == exp.name for name, exp in found.items())
    assert {"matmul", "step-bench", "estimate", "probe", "memory-snapshot", "profiler-trace"} <= set(found)
    assert registry.get("step-bench") is found["step-bench"]


def test_an_unknown_experiment_names_the_known_ones():
    with pytest.raises(ConfigError, match=r"unknown experiment 'nope'; known: .*matmul"):
        registry.get("nope")
    with pytest.raises(ConfigError):
        registry.get(None)


def test_the_listing_is_every_imported_experiment_by_name():
    listed = {e.name: (e.title, e.description, e.command) for e in registry.listing()}
    imported = {e.name: (e.title, e.description, e.command) for e in registry.experiments().values()}
    assert listed == imported and len(listed) >= 16
    assert [e.name for e in registry.listing()] == sorted(listed)


def test_a_list_built_by_code_is_found_by_importing_its_module(tmp_path, monkeypatch):
    """No source is parsed: a module whose ``EXPERIMENTS`` is made by a function call is listed like any other."""
    import sys

    from core import experiments as package

    (tmp_path / "made_by_code.py").write_text(
        '"""Doc line."""\n'
        "from core.experiment import Experiment\n"
        "def _make():\n"
        "    return [Experiment(name='made-by-code', title='Made', config_type=dict, run=print, description='d')]\n"
        "EXPERIMENTS = _make()\n"
    )
    monkeypatch.setattr(package, "__path__", [*package.__path__, str(tmp_path)])
    monkeypatch.delitem(sys.modules, "core.experiments.made_by_code", raising=False)
    registry.experiments.cache_clear()
    try:
        assert "made_by_code" in registry.module_names()
        made = registry.get("made-by-code")
        assert (made.title, made.description) == ("Made", "d")
        assert "made-by-code" in [e.name for e in registry.listing()]
    finally:
        registry.experiments.cache_clear()
        sys.modules.pop("core.experiments.made_by_code", None)


def test_no_experiment_module_imports_another():
    """What two experiments share lives below them (core.measure.gemm for the matmul family), so each module is
    one hop from its page, plot and test, and importing one never drags in another."""
    import ast

    names = {f"core.experiments.{m}" for m in registry.module_names()}
    found = []
    for path in sorted(PACKAGE.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported = {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                imported = {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
            else:
                continue
            found += [f"{path.stem} → {m}" for m in sorted(imported & names) if m != f"core.experiments.{path.stem}"]
    assert not found

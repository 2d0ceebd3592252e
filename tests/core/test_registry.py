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


def test_the_listing_read_from_source_matches_the_imported_experiments():
    listed = {e.name: (e.title, e.description, e.command) for e in registry.listing()}
    imported = {e.name: (e.title, e.description, e.command) for e in registry.experiments().values()}
    assert listed == imported and len(listed) >= 16


def test_a_list_not_written_as_literal_calls_is_imported_instead():
    assert registry._literal_listing("x", "EXPERIMENTS = make_all()") is None
    assert registry._literal_listing("x", "EXPERIMENTS = [Experiment(name=NAME, title='t')]") is None
    listed = registry._literal_listing(
        "x", '"""Doc line.\n\nMore."""\nEXPERIMENTS = [Experiment(name="a", title="A", description=__doc__)]'
    )
    assert listed == [registry.Listed("a", "A", "Doc line.", True, "x")]

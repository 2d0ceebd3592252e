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

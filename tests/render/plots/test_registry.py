"""The plot modules as a registry: every one imports, an experiment without one draws no plot, and one that is
there but broken says so instead of drawing nothing."""

import pytest

pytest.importorskip("plotly")

from core import registry
from render import plots


def test_every_experiment_s_plot_module_imports():
    for name in registry.experiments():
        plots._module(name)  # raises for a broken one


def test_no_module_is_no_plot_and_a_broken_one_raises(monkeypatch):
    """A plot module whose own import fails (it imports a package that is not there) is not "no plot module"."""
    import importlib

    assert plots._module("no-such-experiment") is None
    real_import = importlib.import_module

    def broken_inside(name, *args, **kwargs):
        if name == "render.plots.broken_probe":
            raise ModuleNotFoundError("No module named 'some_dependency'", name="some_dependency")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(importlib, "import_module", broken_inside)
    with pytest.raises(ModuleNotFoundError, match="some_dependency"):
        plots._module("broken-probe")

"""The import contract of pyproject.toml ([tool.importlinter], docs/ARCHITECTURE.md "Layers"): it holds on the
code, it fails on a deliberately added upward import, UI import or cycle, and no module imports itself back."""

import itertools
import re
import shutil
import subprocess
import sys
import tomllib

import pytest

pytest.importorskip("importlinter")  # a test tool (requirements-dev.txt); it brings grimp

import grimp

from tests.conftest import ROOT

LINT = "import sys; from importlinter.cli import lint_imports; sys.exit(lint_imports(no_cache=True, no_logo=True))"


def lint_imports(cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", LINT], cwd=cwd, capture_output=True, text=True, timeout=300)


def test_the_contracts_hold():
    out = lint_imports(ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Contracts: 4 kept, 0 broken." in out.stdout


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """A copy of the packages and the contract to break."""
    root = tmp_path_factory.mktemp("contract")
    for package in ("core", "pages", "render"):
        shutil.copytree(ROOT / package, root / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    return root


def test_the_copy_holds_before_an_import_is_added(tree):
    """What the probes below break is theirs: the unchanged copy keeps every contract."""
    out = lint_imports(tree)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize(
    "importer, imported, broken",
    [
        # a shared fact reaching up to the CLI
        ("core/hardware/device.py", "core.cli.output", "Layers: pages > render > CLI"),
        # the frame reaching up to an experiment
        ("core/store.py", "core.experiments.matmul", "Layers: pages > render > CLI"),
        # two independent siblings of the shared facts
        ("core/workload/files.py", "core.transformer.presets", "Layers: pages > render > CLI"),
        # the engine importing the UI, or the renderers
        ("core/text.py", "streamlit", "core imports no pages, render, Streamlit or Plotly"),
        ("core/cli/runs.py", "render.report", "core imports no pages, render, Streamlit or Plotly"),
        # a renderer reaching up to a page
        ("render/report.py", "pages.common.lab", "Layers: pages > render > CLI"),
        # a cycle inside one layer: the datasheet peaks and the device description
        ("core/hardware/specs.py", "core.hardware.device", "No cycles between sibling packages or modules"),
        # the frame's tiers: the errors every layer raises, paths and units reaching up to what they serve
        ("core/errors.py", "core.store", "Layers: pages > render > CLI"),
        ("core/paths.py", "core.protocol", "Layers: pages > render > CLI"),
        ("core/units.py", "core.locks", "Layers: pages > render > CLI"),
        # the job layer's tiers: a verdict on stored runs reaching up to the queues
        ("core/health/verdict.py", "core.jobs", "Layers: pages > render > CLI"),
        # the declared exception is one import, not a module free to import any renderer
        ("core/cli/report.py", "render.report", "core imports no pages, render, Streamlit or Plotly"),
        # a renderer drawing with Streamlit, or running what it should only draw
        ("render/chart.py", "streamlit", "render draws finished runs: no Streamlit, no jobs, no workers"),
        ("render/node.py", "core.fanout", "render draws finished runs: no Streamlit, no jobs, no workers"),
        ("render/health.py", "core.health.check", "render draws finished runs: no Streamlit, no jobs, no workers"),
    ],
)
def test_an_added_import_breaks_the_contract(tree, importer, imported, broken):
    path = tree / importer
    original = path.read_text()
    path.write_text(original + f"\n\ndef _added() -> None:\n    import {imported}  # noqa: F401\n")
    try:
        out = lint_imports(tree)
    finally:
        path.write_text(original)
    assert out.returncode == 1, out.stdout + out.stderr
    report = out.stdout.split("Broken contracts", 1)[-1]
    assert f"{broken}" in report and "BROKEN" in out.stdout, out.stdout
    module = importer.removesuffix(".py").replace("/", ".")
    assert module.rsplit(".", 1)[-1] in report  # the report names where the import is


def _cycles(graph) -> list[set[str]]:
    """Strongly connected components of more than one module (Tarjan), imports inside functions included."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    counter = itertools.count()

    def visit(v: str) -> None:
        index[v] = low[v] = next(counter)
        stack.append(v)
        on_stack.add(v)
        for w in graph.find_modules_directly_imported_by(v):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(component)

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return found


def test_no_module_imports_itself_back(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    graph = grimp.build_graph("core", "pages", "render")
    cycles = _cycles(graph)
    assert cycles == []


def test_every_module_sits_in_a_layer(monkeypatch):
    """A module in no layer is held by no tier. Only the two packages whose modules sit in several tiers are
    left out (``core``, ``core.health``), and they may import nothing of the lab."""
    monkeypatch.syspath_prepend(str(ROOT))
    graph = grimp.build_graph("core", "pages", "render")
    with open(ROOT / "pyproject.toml", "rb") as f:
        contracts = tomllib.load(f)["tool"]["importlinter"]["contracts"]
    layers = next(c for c in contracts if c["id"] == "layers")["layers"]
    named = [name.strip("() ") for layer in layers for name in re.split(r"[|:]", layer)]
    outside = sorted(m for m in graph.modules if not any(m == n or m.startswith(n + ".") for n in named))
    assert outside == ["core", "core.health"]
    assert all(not graph.find_modules_directly_imported_by(m) for m in outside)


def test_the_cycle_check_finds_an_added_cycle(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    graph = grimp.build_graph("core", "pages", "render")
    graph.add_import(importer="core.hardware.specs", imported="core.hardware.device", line_number=1, line_contents="")
    assert {"core.hardware.specs", "core.hardware.device"} in _cycles(graph)

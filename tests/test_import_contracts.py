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
    assert "Contracts: 8 kept, 0 broken." in out.stdout


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
        ("core/hardware/device.py", "core.cli.output", "Layers: pages > CLI > render"),
        # the frame reaching up to an experiment
        ("core/store.py", "core.experiments.matmul", "Layers: pages > CLI > render"),
        # two independent siblings of the shared facts
        ("core/workload/files.py", "core.transformer.presets", "Layers: pages > CLI > render"),
        # the engine importing the renderers: only the command line sits above them
        ("core/store.py", "render.chart", "Layers: pages > CLI > render"),
        ("core/experiments/matmul.py", "render.plots.matmul", "Layers: pages > CLI > render"),
        # the two ways in stay apart: the command line's entry point importing a page
        ("core/__main__.py", "pages.common.lab", "Layers: pages > CLI > render"),
        # the engine importing the UI, the command line drawing with Plotly itself
        ("core/text.py", "streamlit", "core imports no pages, Streamlit or Plotly"),
        ("core/cli/runs.py", "plotly", "core imports no pages, Streamlit or Plotly"),
        # a renderer reaching up to a page, or to the command line
        ("render/report.py", "pages.common.lab", "Layers: pages > CLI > render"),
        ("render/history.py", "core.cli.output", "Layers: pages > CLI > render"),
        # a cycle inside one layer: the datasheet peaks and the device description
        ("core/hardware/specs.py", "core.hardware.device", "No cycles between sibling packages or modules"),
        # the frame's tiers: the errors every layer raises, paths and units reaching up to what they serve
        ("core/errors.py", "core.store", "Layers: pages > CLI > render"),
        ("core/paths.py", "core.protocol", "Layers: pages > CLI > render"),
        ("core/units.py", "core.locks", "Layers: pages > CLI > render"),
        # the job layer's tiers: a verdict on stored runs reaching up to the queues
        ("core/health/verdict.py", "core.jobs", "Layers: pages > CLI > render"),
        # a renderer drawing with Streamlit, or running what it should only draw
        ("render/chart.py", "streamlit", "render draws finished runs: no Streamlit, no jobs, no workers"),
        ("render/node.py", "core.fanout", "render draws finished runs: no Streamlit, no jobs, no workers"),
        ("render/health.py", "core.health.check", "render draws finished runs: no Streamlit, no jobs, no workers"),
        # render's tiers: the style reaching up to a chart, a chart to a plot, two views of one tier to each other
        ("render/style.py", "render.chart", "Tiers inside render"),
        ("render/chart.py", "render.plots.matmul", "Tiers inside render"),
        ("render/trace_view.py", "render.snapshot_view", "Tiers inside render"),
        # the pages' tiers: the lab reaching up to the run panel, a helper to a page, one page to another
        ("pages/common/lab.py", "pages.common.run_panel", "Tiers inside pages"),
        ("pages/common/markdown.py", "pages.matmul", "Tiers inside pages"),
        ("pages/matmul.py", "pages.step_bench", "Tiers inside pages"),
        # the workload's tiers: what they share reaching up to a reader, one kind of file to another
        ("core/workload/findings.py", "core.workload.trace.timeline", "Tiers inside core.workload"),
        ("core/workload/trace/ranks.py", "core.workload.snapshot.reader", "Tiers inside core.workload"),
        # an import's words reaching into the analysis, which brings numpy into the command that waits on its worker
        ("core/workload/trace/text.py", "core.workload.trace.timeline", "load no numpy"),
        ("core/workload/snapshot/text.py", "core.workload.snapshot.analysis", "load no numpy"),
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


@pytest.mark.parametrize("contract", ["render-tiers", "pages-tiers", "workload-tiers"])
def test_every_module_of_a_tiered_package_sits_in_a_tier(monkeypatch, contract):
    """A module added to render, pages or core.workload outside every tier would be held by none: each one is in a
    tier of its package's contract, but for the packages that only hold tiers (``pages.common``), which import
    nothing."""
    monkeypatch.syspath_prepend(str(ROOT))
    graph = grimp.build_graph("core", "pages", "render")
    with open(ROOT / "pyproject.toml", "rb") as f:
        contracts = tomllib.load(f)["tool"]["importlinter"]["contracts"]
    found = next(c for c in contracts if c["id"] == contract)
    (container,) = found["containers"]
    named = [f"{container}.{name.strip('() ')}" for layer in found["layers"] for name in re.split(r"[|:]", layer)]
    inside = [m for m in graph.modules if m.startswith(container + ".")]
    outside = sorted(m for m in inside if not any(m == n or m.startswith(n + ".") for n in named))
    assert all(not graph.find_modules_directly_imported_by(m) for m in outside), outside
    assert all(any(n.startswith(m + ".") for n in named) for m in outside), outside

"""A command imports what it runs: the CLI process and the worker of ``trace``, ``snapshot`` or ``hang`` import the
one experiment they run (never every experiment module), and the engine's heavy libraries only where the work needs
them.

Each command runs with a ``sitecustomize`` on PYTHONPATH that writes down every import of a watched module with the
process that made it (workers inherit PYTHONPATH), the way tests/core/test_torch_free.py watches torch.
"""

import os
import subprocess
import sys

import pytest

from core import registry
from tests.conftest import ROOT

TRACE = ROOT / "tests" / "data" / "workload" / "kineto_v100_trace.json"
SNAPSHOT = ROOT / "tests" / "data" / "workload" / "snapshots" / "cs336_mem_snapshot.pickle.gz"
WATCHER = """
import os, sys

class _Watch:
    def find_spec(self, name, path=None, target=None):
        if name.startswith("core.experiments."):
            role = "worker" if sys.argv[0].endswith("worker.py") else "cli"
            with open(os.environ["GPULAB_IMPORT_LOG"], "a") as log:
                log.write(f"{role} {name}\\n")
        return None

sys.meta_path.insert(0, _Watch())
"""


def _imports(tmp_path, *args: str) -> dict[str, set[str]]:
    """The experiment modules each process of ``python -m core ARGS`` imported, by role (cli, worker)."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(WATCHER)
    log = tmp_path / "imports.log"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)]), "GPULAB_IMPORT_LOG": str(log)}
    env["GPULAB_DATA_DIR"] = str(tmp_path / "data")
    env.pop("GPULAB_DB", None)
    out = subprocess.run(
        [sys.executable, "-m", "core", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode in (0, 1), out.stderr[-2000:]
    found: dict[str, set[str]] = {"cli": set(), "worker": set()}
    for line in log.read_text().splitlines() if log.exists() else []:
        role, module = line.split()
        found[role].add(module)
    return found


def test_every_experiment_lives_in_the_module_named_after_it():
    """What lets a command import one experiment's module: ``matmul-soak`` is found in ``matmul_soak.py``."""
    import importlib

    for module in registry.module_names():
        names = [e.name for e in importlib.import_module(f"core.experiments.{module}").EXPERIMENTS]
        assert names == [module.replace("_", "-")]


@pytest.mark.parametrize(
    ("args", "experiment"),
    [
        (["trace", str(TRACE), "--no-save", "--json"], "profiler_trace"),
        (["snapshot", str(SNAPSHOT), "--no-save", "--json"], "memory_snapshot"),
        (["hang", "--example", "hang-skipped-rank", "--no-save", "--json"], "flight_recorder"),
    ],
    ids=["trace", "snapshot", "hang"],
)
def test_an_import_command_imports_its_own_experiment_only(tmp_path, args, experiment):
    found = _imports(tmp_path, *args)
    assert found == {"cli": {f"core.experiments.{experiment}"}, "worker": {f"core.experiments.{experiment}"}}


def test_an_experiment_command_imports_its_own_module_and_help_lists_them_all(tmp_path):
    assert _imports(tmp_path, "estimate", "--model", "small", "--no-save", "--json")["cli"] == {
        "core.experiments.estimate"
    }
    (tmp_path / "help").mkdir()
    listed = _imports(tmp_path / "help", "--help")["cli"]
    assert listed == {f"core.experiments.{m}" for m in registry.module_names()}

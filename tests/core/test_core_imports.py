"""core must run on a GPU box that has only PyTorch: no streamlit, no plotly, anywhere in it."""

import subprocess
import sys

from tests.conftest import ROOT

SCRIPT = r"""
import importlib, pkgutil, sys
sys.modules["streamlit"] = None   # makes `import streamlit` raise ImportError
sys.modules["plotly"] = None
import core
names = []
for info in pkgutil.walk_packages(core.__path__, "core."):
    if info.name == "core.__main__":
        continue
    importlib.import_module(info.name)
    names.append(info.name)
from core import registry
registry.experiments()
bad = [m for m in sys.modules if m.split(".")[0] in ("streamlit", "plotly") and sys.modules[m] is not None]
assert not bad, bad
print(len(names))
"""


def test_core_and_every_submodule_import_without_streamlit_and_plotly():
    out = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout.strip()) >= 10  # the frame's modules at least


def test_the_cli_entry_point_is_importable_without_ui_packages():
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            'import sys; sys.modules["streamlit"] = None; '
            'sys.modules["plotly"] = None; sys.argv = ["core", "--help"]; import runpy; '
            'runpy.run_module("core", run_name="__main__")',
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "info" in out.stdout and "runs" in out.stdout


def test_what_the_dashboard_process_runs_imports_no_torch():
    """The server process runs the doctor's orchestration and the planner: neither may import torch
    (torch can initialise CUDA, which must never happen in the Streamlit process)."""
    code = (
        "import sys\nimport core.doctor, core.jobs, core.store, core.transformer.planner\n"
        "import core.experiments.estimate\nassert 'torch' not in sys.modules, 'torch imported'\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr

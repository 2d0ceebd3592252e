"""Commands that run no tensor import no torch, in the CLI process or in any worker it starts (--help,
info without a GPU query, runs, report, estimate, snapshot, trace, trace-diff, examples).

Each command runs with a ``sitecustomize`` on PYTHONPATH that refuses ``import torch`` and writes down the
process that tried (workers inherit PYTHONPATH): a command passes only if it did its work and no process
asked for torch. The negative case shows the blocker sees a worker that does import it.
"""

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

SNAPSHOT = ROOT / "tests" / "data" / "workload" / "snapshots" / "cs336_mem_snapshot.pickle.gz"
TRACE = ROOT / "tests" / "data" / "workload" / "kineto_v100_trace.json"
BLOCKER = """
import os, sys

class _NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            with open(os.environ["GPULAB_TORCH_LOG"], "a") as log:
                log.write(f"{os.getpid()} {' '.join(sys.argv)}\\n")
            raise ImportError("torch is refused in this test")
        return None

sys.meta_path.insert(0, _NoTorch())
"""


@pytest.fixture
def blocked(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BLOCKER)
    log = tmp_path / "torch.log"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(ROOT)])
    env["GPULAB_TORCH_LOG"] = str(log)
    env["GPULAB_DATA_DIR"] = str(tmp_path / "data")
    env.pop("GPULAB_DB", None)

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "core", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
        )

    run.log = log  # type: ignore[attr-defined]
    return run


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["info", "--no-gpu-query", "--json"],
        ["runs", "list"],
        ["estimate", "--model", "small", "--json"],
        ["snapshot", str(SNAPSHOT), "--json"],
        ["trace", str(TRACE), "--json"],
        ["trace", *(str(TRACE.parent / f"hta_recsys_sampled_rank{i}.json.gz") for i in (0, 1)), "--json"],
        ["trace-diff", str(TRACE), str(TRACE), "--json"],
        ["examples", "--json"],
        ["snapshot", "--example", "forward-fp32-snapshot", "--json"],
    ],
    ids=lambda a: " ".join(a[:2]).replace(str(ROOT) + "/", ""),
)
def test_a_command_that_runs_no_tensor_imports_no_torch(blocked, args):
    out = blocked(*args)
    assert out.returncode == 0, out.stderr[-2000:]
    assert not blocked.log.exists(), blocked.log.read_text()


def test_report_and_runs_of_an_import_import_no_torch(blocked, tmp_path):
    assert blocked("trace", str(TRACE)).returncode == 0
    listed = blocked("runs", "list", "--json")
    run_id = json.loads(listed.stdout)[0]["id"]
    assert blocked("runs", "show", run_id).returncode == 0
    assert blocked("report", run_id, "-o", str(tmp_path / "r.html")).returncode == 0
    assert (tmp_path / "r.html").stat().st_size > 1_000_000
    assert not blocked.log.exists(), blocked.log.read_text()


def test_the_blocker_sees_a_worker_that_imports_torch(blocked):
    out = blocked("probe", "--steps", "1", "--device", "cpu", "--json")
    assert out.returncode != 0
    assert "core/worker.py" in blocked.log.read_text()


EXPERIMENT_MODULES = sorted(p.stem for p in (ROOT / "core" / "experiments").glob("*.py") if p.stem != "__init__")


@pytest.mark.parametrize("module", EXPERIMENT_MODULES)
def test_an_experiment_module_imports_no_torch(module):
    """Torch is imported where tensors run: the registry, the CLI and the pages import every experiment module."""
    code = f"import sys, core.experiments.{module}; assert 'torch' not in sys.modules, 'torch imported'"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]

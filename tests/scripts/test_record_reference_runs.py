"""scripts/record_reference_runs.py: the tiny budget on the CPU writes one runs file the lab imports as is."""

import importlib.util
import json
import subprocess
import sys

from core.store import RunStore
from tests.conftest import ROOT

SCRIPT = ROOT / "scripts" / "record_reference_runs.py"


def _script():
    spec = importlib.util.spec_from_file_location("record_reference_runs", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_config_of_the_full_gpu_set_is_valid():
    """The full set cannot run here, but a typo in it would only show on a GPU box: validate every config."""
    from core import registry

    plan = _script().full_plan()
    for _label, experiment, config in plan:
        registry.get(experiment).make_config(config)  # raises ConfigError naming the field
    dtypes = {d for _, e, c in plan if e == "matmul" for d in c["dtypes"]}
    assert {"fp8", "fp8-fast-accum", "bf16", "int8"} <= dtypes
    assert {(c["model"], c.get("sweep", False)) for _, e, c in plan if e == "step-bench"} == {
        ("small", True),
        ("small", False),
        ("medium", True),
        ("medium", False),
    }
    assert {c["scenario"] for _, e, c in plan if e == "allocator"} == {"lifecycle", "backward-peak", "fragmentation"}


def test_tiny_budget_on_the_cpu_records_a_runs_file_the_lab_imports(tmp_path):
    output = tmp_path / "examples" / "cpu.json"
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--budget", "tiny", "--device", "cpu", "-o", str(output)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    data = json.loads(output.read_text())
    plan = _script().tiny_plan()
    assert data["format"] == "gpulab-runs" and len(data["runs"]) == len(plan)
    assert [r["name"] for r in data["runs"]] == [f"reference: {label}" for label, _, _ in plan]
    assert all(r["status"] in ("ok", "unsupported") and "reference" in r["tags"] for r in data["runs"])
    # the normal validated import takes it whole, into a store that has never seen these runs
    store = RunStore(tmp_path / "other.sqlite")
    assert store.import_file(output) == (len(plan), 0)
    assert {r.experiment for r in store.list()} == {e for _, e, _ in plan} and all(r.imported for r in store.list())


def test_a_bad_device_is_refused_with_exit_2(tmp_path):
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--budget", "tiny", "--device", "tpu", "-o", str(tmp_path / "x.json")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2 and "not one of: auto, cpu, cuda, cuda:N" in out.stderr
    assert not (tmp_path / "x.json").exists()

"""``python -m core record`` and ``record_memory``: on a machine without CUDA the program runs unchanged (same
output, same exit code), a line on stderr says nothing was recorded, and no file appears. The recording
itself needs a GPU (marked gpu)."""

import subprocess
import sys

import pytest

from tests.conftest import ROOT

SCRIPT = """
import sys
print("out", sys.argv[1:], flush=True)
print("err line", file=sys.stderr)
sys.exit(int(sys.argv[1]))
"""


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def run(args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "core", *args], cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(_cuda(), reason="checks the no-CUDA path; a GPU box records (test_records_a_snapshot_on_a_gpu)")
def test_without_cuda_the_script_runs_unchanged(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    direct = subprocess.run([sys.executable, str(script), "3", "x"], capture_output=True, text=True)
    out = tmp_path / "snap.pickle"
    recorded = run(["record", "-o", str(out), "--", sys.executable, str(script), "3", "x"])
    assert recorded.returncode == direct.returncode == 3
    assert recorded.stdout == direct.stdout == "out ['3', 'x']\n"
    assert "CUDA is not available here" in recorded.stderr and "err line" in recorded.stderr
    assert not out.exists()


def test_module_and_code_forms_and_non_python_commands(tmp_path):
    ok = run(["record", "-o", str(tmp_path / "s.pickle"), "--", sys.executable, "-c", "print('hi')"])
    assert ok.returncode == 0 and ok.stdout == "hi\n"
    module = run(["record", "-o", str(tmp_path / "s.pickle"), "--", sys.executable, "-m", "json.tool", "--help"])
    assert module.returncode == 0 and "usage" in module.stdout
    refused = run(["record", "--", "bash", "-c", "true"])
    assert refused.returncode == 2 and "record runs a Python program" in refused.stderr


def test_the_context_manager_yields_none_without_cuda(capsys):
    if _cuda():
        pytest.skip("checks the no-CUDA path")
    from core.workload.recorder import record_memory

    with record_memory("never.pickle") as path:
        value = 6 * 7
    assert path is None and value == 42
    assert "no memory snapshot is recorded" in capsys.readouterr().err


@pytest.mark.gpu
def test_records_a_snapshot_on_a_gpu(tmp_path):
    """On a GPU: the snapshot has the script's allocations with Python stacks, is pickle protocol 4, and the
    lab's importer reads it with the allocation's size at the peak."""
    script = tmp_path / "train.py"
    script.write_text("import torch\nx = torch.empty(64 * 2**20, dtype=torch.uint8, device='cuda')\ndel x\n")
    out = tmp_path / "snap.pickle"
    done = run(["record", "-o", str(out), "--", sys.executable, str(script)])
    assert done.returncode == 0, done.stderr
    raw = out.read_bytes()
    assert raw[:2] == b"\x80\x04"
    from core.workload.snapshot import read_snapshot
    from core.workload.snapshot_analysis import analyse

    m = analyse(read_snapshot(out)).summary()
    assert m["peak_allocated_bytes"] - m["baseline_allocated_bytes"] >= 64 * 2**20
    assert any("train.py" in f for f in m["peak_stack"])
    from core.intake import loads_pickle

    assert loads_pickle(raw)["device_traces"]  # plain data only, as the importer demands

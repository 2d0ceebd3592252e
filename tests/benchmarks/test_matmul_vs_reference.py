"""benchmarks/matmul_vs_reference.py: the engine's reference timer (not a copy), its fallback named in the output."""

import importlib.util
import subprocess
import sys

from core.experiments import reference
from tests.conftest import ROOT

SCRIPT = ROOT / "benchmarks" / "matmul_vs_reference.py"
ARGS = ["--device", "cpu", "--sizes", "64", "--dtypes", "fp32"]


def _load():
    spec = importlib.util.spec_from_file_location("matmul_vs_reference", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_on_a_cpu_the_benchmark_names_torch_utils_benchmark():
    out = subprocess.run([sys.executable, str(SCRIPT), *ARGS], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert any(line.split()[:2] == ["fp32", "64"] for line in out.stdout.splitlines())
    assert out.stdout.rstrip().endswith("reference: torch.utils.benchmark")


def test_a_do_bench_that_fails_is_replaced_and_the_benchmark_says_why(monkeypatch, capsys):
    bench = _load()
    assert bench.ReferenceTimer is reference.ReferenceTimer  # the engine's timer, not a copy

    def failing_do_bench(op, **kwargs):
        raise RuntimeError("failed to compile cuda_utils.c\nPython.h: No such file or directory")

    class OnTheGpuPath(reference.ReferenceTimer):  # the lab's side runs on this CPU; the reference takes the GPU path
        def __init__(self, device, min_run_time_s=0.2):
            super().__init__("cuda:0", min_run_time_s)

    devices = []
    monkeypatch.setattr(reference, "_triton_bench", lambda: failing_do_bench)
    monkeypatch.setattr(reference, "cuda_event_ms", lambda op, device, **kw: devices.append(device) or 0.5)
    monkeypatch.setattr(bench, "ReferenceTimer", OnTheGpuPath)
    assert bench.main(ARGS) == 0
    out = capsys.readouterr().out
    assert devices == ["cuda:0"]
    assert " 0.5000 " in out  # the fallback's median is the reference column
    assert out.rstrip().endswith(
        "reference: torch.cuda.Event, L2 flushed "
        "(do_bench not used: do_bench raised RuntimeError: failed to compile cuda_utils.c)"
    )

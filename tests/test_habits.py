"""The code base's habits, checked like any test: ruff's lint and format, and basedpyright's type check of
``core``, the renderers, the pages, the scripts and the benchmarks against torch's and Streamlit's own inline types, configured in pyproject.toml. The type check is
what catches a misspelled or wrongly called ``torch.cuda`` API on a machine without a GPU, so the last
test proves that it still does: a config that stops catching such misuse fails here."""

import subprocess
import sys

from tests.conftest import ROOT


def _run(*args: str, cwd=ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], cwd=cwd, capture_output=True, text=True, timeout=600)


def _output(proc: subprocess.CompletedProcess) -> str:
    return f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"


def _basedpyright(*args: str, cwd=ROOT) -> subprocess.CompletedProcess:
    # --pythonpath: resolve torch and the other imports from the interpreter that runs the tests.
    return _run("basedpyright", "--pythonpath", sys.executable, *args, cwd=cwd)


def test_ruff_check_passes():
    proc = _run("ruff", "check", ".")
    assert proc.returncode == 0, _output(proc)


def test_ruff_format_leaves_every_file_as_it_is():
    proc = _run("ruff", "format", "--check", ".")
    assert proc.returncode == 0, _output(proc)


def test_basedpyright_finds_nothing():
    proc = _basedpyright()
    assert proc.returncode == 0, _output(proc)
    assert "0 errors" in proc.stdout, _output(proc)


def test_basedpyright_catches_torch_cuda_misuse(tmp_path):
    """Run with the project's config on a file that misuses torch.cuda: each misuse is an error."""
    misuse = tmp_path / "misuse.py"
    misuse.write_text(
        "import torch\n"
        "\n"
        "torch.cuda.max_memory_alocated()\n"  # misspelled
        'torch.cuda.mem_get_info("x", 2)\n'  # one device, not two arguments
        "torch.cuda.reset_peak_memory_stats(devcie=0)\n"  # no such keyword
    )
    proc = _basedpyright("--project", str(ROOT / "pyproject.toml"), str(misuse), cwd=tmp_path)
    out = _output(proc)
    assert proc.returncode == 1, out
    assert '"max_memory_alocated" is not a known attribute of module "torch.cuda"' in out, out
    for line in (3, 4, 5):
        assert f"misuse.py:{line}:" in out, f"no error reported on line {line}\n{out}"
    assert "3 errors" in proc.stdout, out

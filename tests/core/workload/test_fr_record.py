"""``record --flight-recorder DIR -- CMD``: the command and everything it starts see the recorder's variables, its
exit code is the command's, and a DIR that is a file is refused before anything runs."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import ROOT

SHOW_ENV = (
    "import json, os, sys; print(json.dumps({k: v for k, v in os.environ.items() if k.startswith('TORCH_')})); "
    "sys.exit(3)"
)


def record(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "core", "record", *args], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def test_the_command_sees_the_recorder_variables_and_its_exit_code_is_kept(tmp_path):
    where = tmp_path / "dumps"
    out = record("--flight-recorder", str(where), "--buffer", "500", "--", sys.executable, "-c", SHOW_ENV)
    assert out.returncode == 3, out.stderr
    env = json.loads(out.stdout)
    assert env["TORCH_FR_BUFFER_SIZE"] == env["TORCH_NCCL_TRACE_BUFFER_SIZE"] == "500"
    assert env["TORCH_FR_DUMP_TEMP_FILE"] == env["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"] == f"{where.resolve()}/rank_"
    assert env["TORCH_NCCL_DUMP_ON_TIMEOUT"] == "1"
    assert where.is_dir()


def test_a_variable_the_user_set_is_kept(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_FR_BUFFER_SIZE", "77")
    out = record("--flight-recorder", str(tmp_path), "--", sys.executable, "-c", SHOW_ENV)
    assert json.loads(out.stdout)["TORCH_FR_BUFFER_SIZE"] == "77"


def test_a_file_as_the_folder_is_refused_before_anything_runs(tmp_path):
    file = tmp_path / "taken"
    file.write_text("x")
    out = record("--flight-recorder", str(file), "--", sys.executable, "-c", "print('ran')")
    assert out.returncode == 2 and "not a folder" in out.stderr and "ran" not in out.stdout

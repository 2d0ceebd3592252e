"""``python -m core record`` and ``record_memory``: on a machine without CUDA the program runs unchanged (same
output, same exit code), a line on stderr says nothing was recorded, and no file appears. The recording
itself needs a GPU (marked gpu)."""

import os
import signal
import stat
import subprocess
import sys
import time

import psutil
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
    from core.workload.snapshot.recorder import record_memory

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
    from core.workload.snapshot.analysis import analyse
    from core.workload.snapshot.reader import read_snapshot

    m = analyse(read_snapshot(out)).summary()
    assert m["peak_allocated_bytes"] - m["baseline_allocated_bytes"] >= 64 * 2**20
    assert any("train.py" in f for f in m["peak_stack"])
    from core.intake import loads_pickle

    assert loads_pickle(raw)["device_traces"]  # plain data only, as the importer demands


# --- the output is checked before anything runs; signals reach the program; its exit code comes back --------


def _marker_script(tmp_path, body: str = ""):
    marker = tmp_path / "ran.marker"
    script = tmp_path / "train.py"
    script.write_text(f"open({str(marker)!r}, 'w').close()\n{body}")
    return script, marker


@pytest.mark.parametrize(
    ("output", "words"),
    [
        ("{tmp}/a_folder", "is a folder"),
        ("{tmp}/missing/x.pickle", "does not exist"),
        ("/dev/null", "not a regular file"),
    ],
)
def test_an_output_that_cannot_hold_the_snapshot_is_refused_before_the_program_runs(tmp_path, output, words):
    (tmp_path / "a_folder").mkdir()
    script, marker = _marker_script(tmp_path)
    output = output.format(tmp=tmp_path)
    out = run(["record", "-o", output, "--", sys.executable, str(script)])
    assert out.returncode == 2, out.stderr
    assert words in out.stderr and output in out.stderr
    assert not marker.exists()  # the training never started
    assert (tmp_path / "a_folder").is_dir() and not list((tmp_path / "a_folder").iterdir())
    assert os.path.exists("/dev/null") and stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_the_program_exit_code_is_records_exit_code(tmp_path):
    script, marker = _marker_script(tmp_path, "raise SystemExit(3)\n")
    out = run(["record", "-o", str(tmp_path / "snap.pickle"), "--", sys.executable, str(script)])
    assert out.returncode == 3, out.stderr
    assert marker.exists()


def _start_record(tmp_path, body: str):
    script, marker = _marker_script(tmp_path, body)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "core",
            "record",
            "-o",
            str(tmp_path / "snap.pickle"),
            "--",
            sys.executable,
            str(script),
        ],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group: a Ctrl-C reaches the group, as from a terminal
    )
    _wait_for(marker, proc)
    return proc


def _wait_for(path, proc=None, within_s: float = 60) -> None:
    deadline = time.monotonic() + within_s
    while not path.exists():
        assert proc is None or proc.poll() is None, f"record ended early: {proc.stderr.read() if proc.stderr else ''}"
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.02)


# The program: writes its pid, trains until stopped, then takes as long as the test says to finish (as a
# snapshot being dumped would), and says it finished.
CLEANUP = """
import os, pathlib, time
here = pathlib.Path(__file__).parent
(here / "pid.tmp").write_text(str(os.getpid()))
(here / "pid.tmp").rename(here / "pid")  # appears with its content: the test reads it at once
try:
    while True:
        time.sleep(0.01)
finally:
    (here / "stopping").touch()
    while not (here / "go").exists():
        time.sleep(0.01)
    (here / "finished").touch()
"""


@pytest.mark.parametrize(
    ("send", "code"),
    [
        (lambda proc: os.killpg(proc.pid, signal.SIGINT), 130),  # Ctrl-C in a terminal: the whole group
        (lambda proc: proc.send_signal(signal.SIGTERM), 143),  # `kill`, `timeout`: the parent only
    ],
    ids=["ctrl-c", "sigterm"],
)
def test_a_signal_stops_the_program_and_record_waits_for_it_to_finish(tmp_path, send, code):
    proc = _start_record(tmp_path, CLEANUP)
    try:
        _wait_for(tmp_path / "pid", proc)
        child = psutil.Process(int((tmp_path / "pid").read_text()))
        send(proc)
        _wait_for(tmp_path / "stopping")
        # The program takes its time to finish (on a GPU: the snapshot's dump); for 2 s, nobody kills it.
        window = time.monotonic() + 2
        while time.monotonic() < window:
            assert child.status() != psutil.STATUS_ZOMBIE and proc.poll() is None
            time.sleep(0.05)
        (tmp_path / "go").touch()
        assert proc.wait(timeout=60) == code, proc.stderr.read() if proc.stderr else ""
        assert (tmp_path / "finished").exists()
        child.wait(timeout=30)  # no orphan: the program has ended too
    finally:
        if proc.poll() is None:
            proc.kill()
        try:
            psutil.Process(int((tmp_path / "pid").read_text())).kill()
        except (psutil.Error, OSError, ValueError):
            pass


@pytest.mark.gpu
def test_sigterm_keeps_the_snapshot_on_a_gpu(tmp_path):
    proc = _start_record(tmp_path, "import torch\nx = torch.ones(2**20, device='cuda')\n" + CLEANUP)
    try:
        _wait_for(tmp_path / "pid", proc)
        proc.send_signal(signal.SIGTERM)
        _wait_for(tmp_path / "stopping")
        (tmp_path / "go").touch()
        assert proc.wait(timeout=300) == 143
        assert (tmp_path / "snap.pickle").stat().st_size > 0
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.mark.gpu
def test_a_name_taken_during_the_run_keeps_the_snapshot_aside_and_the_exit_code(tmp_path):
    out_path = tmp_path / "snap.pickle"
    script, _ = _marker_script(
        tmp_path,
        f"import os, torch\nx = torch.ones(2**20, device='cuda')\nos.mkdir({str(out_path)!r})\nraise SystemExit(3)\n",
    )
    out = run(["record", "-o", str(out_path), "--", sys.executable, str(script)])
    assert out.returncode == 3, out.stderr
    assert "is a folder" in out.stderr and (tmp_path / ".snap.pickle.partial").stat().st_size > 0

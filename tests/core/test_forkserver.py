"""Workers that run tensors are forked from a fork server that imported torch once: each is its own process, with
the environment of the moment it was asked for, its own exit status, and nothing outlives the parent."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from types import SimpleNamespace

import psutil
import pytest

from core import jobs, workerlaunch
from core.forkserver import FORK_SERVER_ENV, Forked, ForkServer, SpawnCancelled, server_command
from core.hardware.memory import MEMORY_LIMIT_ENV
from core.jobs import _crash_outcome
from core.limits import LIMITS_ENV
from core.workerprocess import WorkerDied, WorkerProcess
from tests.conftest import ROOT, gone


def ready_worker(**kwargs) -> WorkerProcess:
    worker = WorkerProcess(preload_torch=True, **kwargs)
    worker.wait_ready(120)
    return worker


def test_a_torch_worker_is_a_child_of_the_fork_server_with_the_environment_of_its_request(monkeypatch):
    first = ready_worker()
    try:
        assert isinstance(first.proc, Forked)
        server = psutil.Process(first.pid).parent()
        assert server is not None and "core.forkserver" in server.cmdline() and server.ppid() == os.getpid()
        # set after the server started: the next child reads it (the ready event reports the child's own)
        monkeypatch.setenv(MEMORY_LIMIT_ENV, "0")
        second = ready_worker(env={"NVIDIA_TF32_OVERRIDE": "0"})
        try:
            assert second.pid != first.pid and psutil.Process(second.pid).ppid() == server.pid
            assert second.ready is not None
            assert second.ready.env == {MEMORY_LIMIT_ENV: "0", "NVIDIA_TF32_OVERRIDE": "0"}
            assert first.ready is not None and first.ready.env == {}
        finally:
            second.stop()
    finally:
        first.stop()


def test_the_lab_s_modules_read_the_child_s_environment_not_the_server_s(monkeypatch):
    """GPULAB_LIMITS is read when core.intake is imported: in the child, after it took its environment."""
    ready_worker().stop()  # the server is up, started without the setting
    monkeypatch.setenv(LIMITS_ENV, "no_such_limit=3")
    worker = WorkerProcess(preload_torch=True)
    with pytest.raises(WorkerDied):
        worker.wait_ready(120)
    assert worker.proc.wait(timeout=30) == 2
    assert "no limit is called 'no_such_limit'" in worker.stderr_tail()
    worker.close()


def test_each_forked_worker_reports_its_own_exit_status():
    polite, killed = ready_worker(), ready_worker()
    assert polite.proc.stdin is not None
    polite.proc.stdin.close()
    assert polite.proc.wait(timeout=30) == 0
    os.kill(killed.pid, signal.SIGKILL)
    assert killed.proc.wait(timeout=30) == -signal.SIGKILL
    assert all(isinstance(w.proc, Forked) and w.proc.status_known for w in (polite, killed))  # reaped by the server
    with pytest.raises(subprocess.TimeoutExpired):
        live = ready_worker()
        try:
            live.proc.wait(timeout=0.2)
        finally:
            live.kill()
    for worker in (polite, killed):
        worker.close()


def test_the_server_and_its_workers_end_with_their_parent(tmp_path):
    """A parent that dies without a word (os._exit, no atexit): its fork server and its worker follow it."""
    script = (
        "import json, os, sys; sys.path.insert(0, sys.argv[1])\n"
        "from core.workerprocess import WorkerProcess\n"
        "w = WorkerProcess(preload_torch=True); w.wait_ready(120)\n"
        "import psutil; print(json.dumps([w.pid, psutil.Process(w.pid).ppid()]), flush=True)\n"
        "os._exit(0)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, str(ROOT)], capture_output=True, text=True, timeout=180, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr[-2000:]
    worker_pid, server_pid = json.loads(out.stdout.strip().splitlines()[-1])
    assert worker_pid != server_pid
    assert gone(server_pid, 30) and gone(worker_pid, 30)


def test_a_dead_fork_server_ends_its_worker_and_the_next_worker_starts(monkeypatch):
    worker = ready_worker()
    server_pid = psutil.Process(worker.pid).ppid()
    os.kill(server_pid, signal.SIGKILL)
    assert worker.proc.wait(timeout=30) == 1  # no one reaped it here: its status is unknown, reported as 1
    assert isinstance(worker.proc, Forked) and not worker.proc.status_known
    # a job on it says so, not "exited with code 1"
    crash = _crash_outcome(SimpleNamespace(id="j"), worker, None)  # type: ignore[arg-type]
    assert crash.error.startswith("worker ended with the fork server it came from (its exit status is unknown)")
    worker.close()
    fresh = ready_worker()
    try:
        assert psutil.Process(fresh.pid).ppid() not in (server_pid, os.getpid())  # a new server's child
        assert isinstance(fresh.proc, Forked)
    finally:
        fresh.stop()


def test_without_the_fork_server_a_worker_is_a_fresh_interpreter(monkeypatch):
    monkeypatch.setenv(FORK_SERVER_ENV, "0")
    worker = ready_worker()
    try:
        assert isinstance(worker.proc, subprocess.Popen)
        assert psutil.Process(worker.pid).ppid() == os.getpid()
        assert "core.worker" in psutil.Process(worker.pid).cmdline()
    finally:
        worker.stop()


def test_a_worker_with_its_own_allocator_setting_is_a_fresh_interpreter():
    """torch reads the allocator's backend when it is imported: a worker forked from a server that imported it
    without the setting fails CUDA's initialisation (seen on an H200 with ``backend:cudaMallocAsync``)."""
    ready_worker().stop()  # the server is up
    worker = ready_worker(env={"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync"})
    try:
        assert isinstance(worker.proc, subprocess.Popen)
        assert psutil.Process(worker.pid).ppid() == os.getpid()
        assert worker.ready is not None and worker.ready.env == {"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync"}
    finally:
        worker.stop()


@pytest.fixture(autouse=True)
def _own_server():
    """Each test starts from no fork server, and leaves none."""
    workerlaunch.stop_fork_server()
    yield
    workerlaunch.stop_fork_server()


def _pipes() -> tuple[tuple[int, int, int], int, int]:
    """A child's stdin and stdout (stderr: ours) and our ends of them."""
    child_in, our_in = os.pipe()
    our_out, child_out = os.pipe()
    return (child_in, child_out, 2), our_in, our_out


def test_a_request_given_up_on_takes_no_child_and_the_next_gets_its_own():
    """Each request carries an id its answer repeats: one given up on (a Ctrl-C while the server still imports
    torch) gets no child — the server's late child for it is killed — and the next request gets its own child."""
    env = workerlaunch.worker_env({})
    server = ForkServer(server_command("tests.core.fork_child"), env, str(ROOT))
    try:
        first, first_in, first_out = _pipes()
        with pytest.raises(SpawnCancelled):
            server.spawn(["first"], env, str(ROOT), first, 120, cancelled=lambda: True)
        second, second_in, second_out = _pipes()
        pid = server.spawn(["second"], env, str(ROOT), second, 120)
        for fd in (*first[:2], *second[:2]):
            os.close(fd)
        os.close(second_in)  # the child reads to the end of its stdin, then says who it is
        assert json.loads(os.read(second_out, 1000)) == {"pid": pid, "args": ["second"]}
        assert server.exit_code(pid, 60) == 0
        os.close(first_in)  # the first child, had it lived, would now answer on its stdout
        assert os.read(first_out, 1000) == b""  # the end of its output: it was killed before it wrote
        for fd in (second_out, first_out):
            os.close(fd)
    finally:
        server.stop()


def test_a_job_cancelled_while_its_worker_is_forked_is_stored_as_cancelled(manager, monkeypatch):
    """The job's cancel reaches the wait for the fork server's answer, and the run is stored as cancelled."""

    forking = threading.Event()

    def worker(*args, cancelled, **kwargs):
        forking.set()
        while not cancelled():  # the fork server importing torch: until the job is cancelled
            time.sleep(0.01)
        raise SpawnCancelled("cancelled before the fork server answered")

    monkeypatch.setattr(jobs, "WorkerProcess", worker)
    job = manager.submit("matmul", {"sizes": [64], "dtypes": ["fp32"], "roofline": False}, "cpu")
    assert forking.wait(60)
    job.cancel()
    run = job.wait(60)
    assert run is not None and (run.status, run.error) == ("cancelled", "cancelled by user before it started")

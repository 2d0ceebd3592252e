"""The worker frame survives every way a child can fail, and jobs on one device never overlap."""

import json
import subprocess
import sys
import time
from datetime import datetime

import pytest

from core.jobs import JobManager
from core.workerprocess import WorkerProcess
from tests.conftest import ROOT


def run_probe(manager, timeout_s=None, **config):
    job = manager.submit("probe", config, "cpu", timeout_s=timeout_s)
    run = job.wait(120)
    assert run is not None, "job did not finish"
    return run


@pytest.mark.parametrize(
    "mode, status, kind, needle",
    [
        ("ok", "ok", None, None),
        ("raise", "error", "crash", "RuntimeError: probe raised on purpose"),
        ("exit", "error", "crash", "exited with code 1"),
        ("segfault", "error", "crash", "SIGSEGV"),
        ("oom", "error", "oom", "out of memory"),
        ("unsupported", "unsupported", "unsupported", "unsupported on "),
    ],
)
def test_each_failure_becomes_a_stored_run_and_the_next_job_runs(manager, store, mode, status, kind, needle):
    run = run_probe(manager, mode=mode, steps=2)
    assert run.status == status and run.error_kind == kind
    if needle:
        assert needle in run.error
    stored = store.get(run.id)
    assert stored.status == status and stored.error == run.error and stored.error_kind == kind
    assert len(stored.rows) == 2  # finished points survive the failure
    assert run_probe(manager, mode="ok", steps=1).status == "ok"  # the caller survives


def test_timeout_kills_the_worker_and_keeps_progress(manager, store):
    t0 = time.monotonic()
    run = run_probe(manager, timeout_s=1.5, mode="sleep", steps=1)
    assert run.status == "error" and run.error_kind == "timeout" and "timed out after 1.5 s" in run.error
    assert time.monotonic() - t0 < 60
    assert store.get(run.id).rows == run.rows and len(run.rows) == 1
    pid = run.meta["worker"]["pid"]
    time.sleep(0.2)
    with pytest.raises(ProcessLookupError):
        import os

        os.kill(pid, 0)


def test_cancel_mid_run_keeps_finished_points(manager, store):
    job = manager.submit("probe", {"mode": "ok", "steps": 200, "seconds": 0.05}, "cpu")
    deadline = time.monotonic() + 60
    while len(job.rows) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    job.cancel()
    run = job.wait(60)
    assert run.status == "cancelled" and run.error_kind == "cancelled" and run.error == "cancelled by user"
    assert 3 <= len(run.rows) < 200
    assert store.get(run.id).status == "cancelled"


def test_two_jobs_on_one_device_run_one_after_the_other(manager):
    a = manager.submit("probe", {"steps": 4, "seconds": 0.25}, "cpu")
    b = manager.submit("probe", {"steps": 4, "seconds": 0.25}, "cpu")
    time.sleep(0.1)
    assert b.state == "queued" and manager.queue_position(b) == 1
    ra, rb = a.wait(120), b.wait(120)
    assert ra.status == rb.status == "ok"
    assert datetime.fromisoformat(rb.started_at) >= datetime.fromisoformat(ra.finished_at)


def test_two_managers_share_the_device_lock(store):
    """Like two servers (or the CLI beside the dashboard): the worker's flock serialises them."""
    m1, m2 = JobManager(store=store), JobManager(store=store)
    try:
        a = m1.submit("probe", {"steps": 4, "seconds": 0.3}, "cpu")
        time.sleep(0.05)
        b = m2.submit("probe", {"steps": 4, "seconds": 0.3}, "cpu")
        ra, rb = a.wait(120), b.wait(120)
    finally:
        m1.shutdown(), m2.shutdown()
    first, second = sorted([ra, rb], key=lambda r: r.started_at)
    assert datetime.fromisoformat(second.started_at) >= datetime.fromisoformat(first.finished_at)


def test_warm_worker_is_reused_and_fresh_process_is_not(manager):
    r1 = run_probe(manager, steps=1)
    r2 = run_probe(manager, steps=1)
    assert r1.meta["pid"] == r2.meta["pid"]  # warm worker
    r3 = run_probe(manager, mode="raise", steps=0)
    assert r3.status == "error"
    r4 = run_probe(manager, steps=1)
    assert r4.meta["pid"] == r1.meta["pid"]  # a Python exception does not cost the worker


def test_stdout_noise_from_the_experiment_does_not_break_the_protocol(manager):
    run = run_probe(manager, mode="print", steps=1)
    assert run.status == "ok"


def test_invalid_config_is_refused_before_queueing(manager):
    from core.errors import ConfigError

    with pytest.raises(ConfigError, match="steps must be between 0 and 10000"):
        manager.submit("probe", {"steps": -1}, "cpu")
    with pytest.raises(ConfigError, match="unknown experiment"):
        manager.submit("nope", {}, "cpu")
    with pytest.raises(ConfigError, match="device 'gpu7'"):
        manager.submit("probe", {}, "gpu7")


def test_missing_gpu_is_a_clear_error(manager):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    run = manager.submit("probe", {}, "cuda:0").wait(120)
    assert run.status == "error" and run.error_kind == "config" and "CUDA is unavailable" in run.error


def test_worker_protocol_by_hand():
    """The worker is a plain module one can drive from a shell: requests in, JSON lines out."""
    proc = subprocess.run(
        [sys.executable, "-m", "core.worker"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        input=json.dumps({"op": "run", "job_id": "j1", "experiment": "probe", "config": {"steps": 2}, "device": "cpu"})
        + "\n"
        + json.dumps({"op": "launch", "job_id": "j2"})
        + "\n",
    )
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [e["type"] for e in events] == ["ready", "started", "progress", "progress", "result", "result"]
    result = events[-2]
    assert result["status"] == "ok" and result["job_id"] == "j1" and result["error_kind"] is None
    sent = [row for e in events if e["type"] == "progress" for row in e["rows"]]
    assert len(sent) == 2  # each progress event carries only its new row
    assert sent[: result["rows_from"]] + result["rows"] == [{"step": 1}, {"step": 2}]  # probe's final rows
    refused = events[-1]
    assert refused["job_id"] == "j2" and refused["error_kind"] == "config" and "unknown op 'launch'" in refused["error"]


def test_the_result_sends_only_the_rows_progress_did_not():
    from core.worker import _result_rows

    assert _result_rows([{"a": 1}], [{"a": 1}, {"a": 2}]) == ([{"a": 2}], 1)  # a continuation: the rest
    assert _result_rows([{"a": 1}], [{"a": 1}]) == ([], 1)
    assert _result_rows([{"a": 1, "t": 0}], [{"a": 1}]) == ([{"a": 1}], 0)  # revised rows replace what was sent


def test_worker_process_exits_when_stdin_closes():
    worker = WorkerProcess()
    worker.wait_ready(120)
    worker.proc.stdin.close()
    assert worker.proc.wait(timeout=30) == 0
    worker.close()


def test_an_in_process_job_is_stored_like_any_run_and_never_waits_for_the_device(manager, store):
    """The planner runs in a thread of this process (no worker), through the same queue code and store."""
    import os
    from datetime import datetime

    busy = manager.submit("probe", {"steps": 1, "seconds": 8.0}, "cpu")
    run = manager.submit("estimate", {"model": "tiny", "memory_gib": 16}, "cpu").wait(60)
    assert run.status == "ok" and run.meta["worker"] == {
        "pid": os.getpid(),
        "fresh": False,
        "env": {},
        "in_process": True,
        "memory_cap_bytes": None,
    }
    assert store.get(run.id).meta["peak_estimated_bytes"] == run.meta["peak_estimated_bytes"]
    assert run.meta["max_batch_estimated"] > 0 and run.versions["torch"]
    probe = busy.wait(60)
    assert probe.status == "ok"
    # it did not queue behind the 8-second probe on the CPU: it ended while the probe still ran
    assert datetime.fromisoformat(run.finished_at) < datetime.fromisoformat(probe.finished_at)


@pytest.mark.parametrize(
    "argv, served",
    [
        ([], (False, ())),
        (["--preload=core.a", "--preload=core.b"], (False, ("core.a", "core.b"))),
        (["--preload-torch", "--preload=core.a"], (True, ("core.a",))),
        (["--preload", "core.a", "--preload-torch"], (True, ("core.a",))),  # argparse's spelling: its parser reads it
    ],
)
def test_the_worker_reads_its_arguments_as_its_parser_would(monkeypatch, argv, served):
    import core.worker

    calls = []
    monkeypatch.setattr(core.worker, "serve", lambda torch, preload: calls.append((torch, preload)) or 0)
    assert core.worker.main(argv) == 0
    assert calls == [served]


def test_an_argument_the_worker_does_not_know_is_refused_by_its_parser():
    out = subprocess.run([sys.executable, "-m", "core.worker", "--bogus"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 2 and "unrecognized arguments: --bogus" in out.stderr

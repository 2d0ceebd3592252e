"""The parent side of the worker protocol: a queue per device, warm workers, timeouts, crashes.

:class:`JobManager` is what the dashboard (one per server, shared by every browser tab) and the
CLI submit to. Jobs for one device run one after the other on a single thread; a second
submission is visibly ``queued``. The parent trusts nothing the child did not write: a worker that
dies, hangs or is cancelled still becomes a stored :class:`~core.result.RunResult` with the rows it
had reported, and the next job gets a fresh worker.
"""

from __future__ import annotations

import json
import math
import os
import queue
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, overload

from core import registry
from core.experiment import ConfigError, config_to_dict, json_ready
from core.hardware.device import check_device_string
from core.result import RunResult, new_run_id, now_iso
from core.text import label_problem

REPO_ROOT = Path(__file__).resolve().parent.parent
STARTUP_TIMEOUT_S = 120.0  # importing torch on a cold disk can take a while
DEFAULT_TIMEOUT_S = 3600.0
RUNNING_SAVE_INTERVAL_S = 2.0  # how often a running job's finished rows are written to the store


class WorkerDied(Exception):
    pass


def _worker_env(extra: dict[str, str]) -> dict[str, str]:
    env = dict(os.environ)
    env.update(extra)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _signal_text(returncode: int) -> str:
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        detail = {
            "SIGSEGV": " (segmentation fault)",
            "SIGKILL": " (killed, e.g. by the OS out-of-memory killer)",
            "SIGABRT": " (aborted)",
            "SIGBUS": " (bus error)",
        }.get(name, "")
        return f"killed by {name}{detail}"
    return f"exited with code {returncode}"


class WorkerProcess:
    """One ``python -m core.worker`` child; stderr goes to a temp file so a crash can be explained."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        self.env = dict(env or {})
        self._stderr = tempfile.TemporaryFile(prefix="gpulab-worker-", suffix=".log")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "core.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=_worker_env(self.env),
            cwd=str(REPO_ROOT),
            start_new_session=True,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None  # both are pipes
        self._stdin, self._stdout = self.proc.stdin, self.proc.stdout
        self._buffer = b""
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._stdout, selectors.EVENT_READ)
        self.ready: dict | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def send(self, request: dict) -> None:
        try:
            self._stdin.write((json.dumps(json_ready(request)) + "\n").encode())
            self._stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise WorkerDied(str(exc)) from None

    def read_event(self, timeout: float) -> dict | None:
        """Next protocol event, None if nothing arrived within ``timeout``; WorkerDied on EOF."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self._selector.select(remaining):
                return None
            chunk = os.read(self._stdout.fileno(), 65536)
            if not chunk:
                raise WorkerDied("end of output")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            return {"type": "noise", "text": line.decode(errors="replace")}
        return event if isinstance(event, dict) else {"type": "noise", "text": str(event)}

    def wait_ready(self, timeout: float, cancelled: Callable[[], bool] = lambda: False) -> dict | None:
        """The ``ready`` event; None as soon as ``cancelled()`` (a Ctrl-C need not wait for torch to import)."""
        deadline = time.monotonic() + timeout
        while self.ready is None:
            if cancelled():
                return None
            if time.monotonic() > deadline:
                raise WorkerDied(f"worker did not start within {timeout:.0f} s")
            event = self.read_event(0.1)
            if event and event.get("type") == "ready":
                self.ready = event
        return self.ready

    def kill(self) -> None:
        if self.alive():
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.proc.kill()
        self.proc.wait()
        self.close()

    def stop(self) -> None:
        """Polite exit for an idle worker (close stdin), then kill if it lingers."""
        if self.alive():
            try:
                self._stdin.close()
                self.proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()

    def close(self) -> None:
        for stream in (self._stdin, self._stdout):
            try:
                stream.close()
            except OSError:
                pass
        try:
            self._selector.close()
        except (OSError, ValueError):
            pass

    def stderr_tail(self, lines: int = 8) -> str:
        try:
            self._stderr.seek(0)
            text = self._stderr.read().decode(errors="replace")
        except (OSError, ValueError):
            return ""
        return "\n".join(text.strip().splitlines()[-lines:])


class LocalWorker:
    """A torch-free experiment (``Experiment.in_process``) run in a thread of this process: the worker's
    own ``run_job`` with its events on a queue, read by the same :class:`DeviceQueue` code as a child's.
    Nothing is spawned, so the planner answers in milliseconds and is stored like any run."""

    def __init__(self) -> None:
        self._events: queue.Queue = queue.Queue()
        self._killed = False
        self.ready = {"type": "ready", "pid": os.getpid(), "env": {}}

    @property
    def pid(self) -> int:
        return os.getpid()

    def alive(self) -> bool:
        return not self._killed

    def wait_ready(self, timeout: float, cancelled: Callable[[], bool] = lambda: False) -> dict | None:
        return None if cancelled() else self.ready

    def send(self, request: dict) -> None:
        from core.worker import run_job

        threading.Thread(
            target=run_job,
            args=(request, self._events.put),
            daemon=True,
            name=f"gpulab-local-{request.get('job_id', '')[:8]}",
        ).start()

    def read_event(self, timeout: float) -> dict | None:
        try:
            return self._events.get(timeout=timeout)
        except queue.Empty:
            return None

    def kill(self) -> None:  # a thread cannot be killed; its events are simply no longer read
        self._killed = True

    stop = kill

    def stderr_tail(self, lines: int = 8) -> str:
        return ""


@dataclass
class Job:
    """A submitted experiment run; its fields are read by UI threads, written by the queue thread."""

    experiment: str
    config: Any  # the validated config dataclass
    device: str
    timeout_s: float
    env: dict[str, str]
    fresh_process: bool
    name: str = ""
    store_failures: bool = True  # False: only an "ok" result reaches the store (no "running" row either)
    in_process: bool = False  # run by a LocalWorker (torch-free), not a child process
    on_event: Callable[[Job, dict], None] | None = None
    save: bool = True  # False: a part of a larger run (core.fanout), which stores the whole
    id: str = field(default_factory=new_run_id)
    submitted_at: str = field(default_factory=now_iso)
    state: str = "queued"  # queued → running → done
    message: str = "queued"
    done_steps: int = 0
    total_steps: int = 0
    rows: list[dict] = field(default_factory=list)
    result: RunResult | None = None
    store_error: str | None = None
    _cancel: threading.Event = field(default_factory=threading.Event, repr=False)
    _finished: threading.Event = field(default_factory=threading.Event, repr=False)

    def cancel(self) -> None:
        self._cancel.set()

    def complete(self, result: RunResult) -> None:
        """Publish the final result and wake every waiter (called once, by whoever ran the job)."""
        self.result = result
        self.state = "done"
        self.message = result.status
        self._finished.set()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    @overload
    def wait(self, timeout: None = None) -> RunResult: ...
    @overload
    def wait(self, timeout: float) -> RunResult | None: ...
    def wait(self, timeout: float | None = None) -> RunResult | None:
        """The result; None only when ``timeout`` passes first."""
        self._finished.wait(timeout)
        return self.result

    @property
    def fraction(self) -> float:
        return min(1.0, self.done_steps / self.total_steps) if self.total_steps else 0.0


class DeviceQueue:
    """One thread per requested device: runs its jobs in order and keeps one worker warm."""

    def __init__(self, device: str, manager: JobManager) -> None:
        self.device = device
        self._manager = weakref.proxy(manager)
        self._pending: list[Job] = []
        self._cond = threading.Condition()
        self._warm: WorkerProcess | None = None
        self._closed = False
        self.current: Job | None = None
        self._thread = threading.Thread(target=self._loop, daemon=True, name=f"gpulab-queue-{device}")
        self._thread.start()

    def put(self, job: Job) -> None:
        with self._cond:
            self._pending.append(job)
            self._cond.notify()

    def position(self, job: Job) -> int | None:
        with self._cond:
            return self._pending.index(job) + 1 if job in self._pending else None

    def close(self) -> None:
        with self._cond:
            self._closed = True
            for job in self._pending:
                job.cancel()
            self._cond.notify()
        if self.current:
            self.current.cancel()
        self._thread.join(timeout=10)
        if self._warm:
            self._warm.stop()
            self._warm = None

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._closed:
                    self._cond.wait()
                if not self._pending:
                    return
                job = self._pending.pop(0)
                self.current = job
            try:
                self._run(job)
            except Exception as exc:  # noqa: BLE001 - a bug here must not leave the job (and its waiter) hanging
                if not job._finished.is_set():
                    self._finish(
                        job,
                        {},
                        {"status": "error", "error": f"the job queue failed: {type(exc).__name__}: {exc}"},
                        None,
                    )
            finally:
                self.current = None

    def _worker_for(self, job: Job) -> WorkerProcess | LocalWorker:
        if job.in_process:
            return LocalWorker()
        if job.fresh_process:
            if self._warm:  # a fresh allocator must not share the GPU with a warm worker's cache
                self._warm.stop()
                self._warm = None
            return WorkerProcess(job.env)
        if self._warm is None or not self._warm.alive():
            self._warm = WorkerProcess()
        return self._warm

    def _run(self, job: Job) -> None:
        started: dict = {}
        outcome: dict | None = None
        worker: WorkerProcess | LocalWorker | None = None
        if job.cancelled:
            outcome = {"status": "cancelled", "error": "cancelled before it started"}
        else:
            job.message = "starting worker"
            self._notify(job, {"type": "state", "state": "starting"})
            try:
                worker = self._worker_for(job)
                ready = worker.wait_ready(STARTUP_TIMEOUT_S, lambda: job.cancelled)
                if ready is None:
                    worker.kill()
                    outcome = {"status": "cancelled", "error": "cancelled by user before it started"}
                else:
                    worker.send(
                        {
                            "op": "run",
                            "job_id": job.id,
                            "experiment": job.experiment,
                            "config": config_to_dict(job.config),
                            "device": job.device,
                        }
                    )
                    outcome = self._follow(job, worker, started, ready)
            except WorkerDied as exc:
                outcome = self._crash_outcome(worker, str(exc))
        recycle = worker is not None and (
            job.fresh_process or outcome.pop("recycle", False) or outcome["status"] != "ok" and not worker.alive()
        )
        if worker is not None and (recycle or not worker.alive()):
            worker.kill()
            if worker is self._warm:
                self._warm = None
        self._finish(job, started, outcome, worker)

    def _follow(self, job: Job, worker: WorkerProcess | LocalWorker, started: dict, ready: dict) -> dict:
        # The time limit counts from the request: a wait for the device lock is part of the job.
        deadline = time.monotonic() + job.timeout_s
        saved_at = time.monotonic()
        while True:
            if job.cancelled:
                worker.kill()
                return {"status": "cancelled", "error": "cancelled by user"}
            if time.monotonic() > deadline:
                worker.kill()
                where = "" if started else " while waiting for the device lock"
                return {
                    "status": "error",
                    "error": f"timed out after {job.timeout_s:g} s (the job's time limit){where}",
                }
            try:
                event = worker.read_event(0.1)
            except WorkerDied:
                return self._crash_outcome(worker, None)
            if event is None or event.get("job_id", job.id) != job.id:
                continue
            kind = event.get("type")
            if kind == "waiting":
                job.message = str(event.get("message", "waiting for the device"))
            elif kind == "started":
                started.update(event, worker_env=ready.get("env", {}))
                job.state, job.message = "running", "running"
                self._save_running(job, started)
            elif kind == "progress":
                job.done_steps = int(event.get("done", 0))
                job.total_steps = int(event.get("total", 0))
                job.message = str(event.get("message", ""))
                new_rows = [r for r in event.get("rows", []) if isinstance(r, dict)]
                job.rows.extend(new_rows)
                if new_rows and time.monotonic() - saved_at > RUNNING_SAVE_INTERVAL_S:
                    self._save_running(job, started)  # a server restart then keeps these points
                    saved_at = time.monotonic()
            elif kind == "result":
                return event
            self._notify(job, event)

    @staticmethod
    def _crash_outcome(worker: WorkerProcess | LocalWorker | None, reason: str | None) -> dict:
        if worker is None or isinstance(worker, LocalWorker):  # a LocalWorker never dies: not reached
            return {"status": "error", "error": f"worker could not start: {reason}"}
        try:
            code = worker.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            worker.kill()
            code = worker.proc.returncode
        tail = worker.stderr_tail()
        text = f"worker {_signal_text(code)} before finishing" if reason is None else f"worker failed: {reason}"
        if tail:
            text += f"; last output: {tail[-600:]}"
        return {"status": "error", "error": text}

    def _result(self, job: Job, started: dict, outcome: dict, worker: WorkerProcess | LocalWorker | None) -> RunResult:
        ok = outcome.get("status") == "ok"
        rows = outcome.get("rows") if ok else job.rows
        meta = dict(outcome.get("meta") or {}) if isinstance(outcome.get("meta"), dict) else {}
        meta["worker"] = {
            "pid": worker.pid if worker else None,
            "fresh": job.fresh_process,
            "env": started.get("worker_env", {}),
            "in_process": job.in_process,
            "memory_cap_bytes": started.get("memory_cap_bytes"),
        }
        meta["requested_device"] = job.device
        if job.store_error:
            meta["store_error"] = job.store_error
        return RunResult(
            id=job.id,
            experiment=job.experiment,
            config=config_to_dict(job.config),
            device=started.get("device")
            or {"kind": "unknown", "torch_device": job.device, "name": f"{job.device} (worker never reported)"},
            versions=started.get("versions") or {},
            started_at=started.get("started_at") or job.submitted_at,
            finished_at=(outcome.get("finished_at") if ok else None) or now_iso(),
            status=outcome.get("status", "error"),
            error=outcome.get("error"),
            rows=json_ready(list(rows or [])),
            meta=json_ready(meta),
            name=job.name,
        )

    def _save_running(self, job: Job, started: dict) -> None:
        store = self._manager.store
        if store is None or not job.save or not job.store_failures:
            return
        running = self._result(job, started, {"status": "running"}, None)
        running.finished_at = None
        try:
            store.save(running, owner_pid=os.getpid())
        except Exception as exc:  # noqa: BLE001 - a broken store must not kill the queue
            job.store_error = f"could not save the run: {exc}"

    def _finish(self, job: Job, started: dict, outcome: dict, worker: WorkerProcess | LocalWorker | None) -> None:
        result = self._result(job, started, outcome, worker)
        store = self._manager.store
        if store is not None and job.save and (job.store_failures or result.status == "ok"):
            try:
                store.save(result)
            except Exception as exc:  # noqa: BLE001
                job.store_error = f"could not save the run: {exc}"
                result.meta["store_error"] = job.store_error
        job.complete(result)
        self._notify(job, {"type": "done", "status": result.status})

    @staticmethod
    def _notify(job: Job, event: dict) -> None:
        if job.on_event:
            try:
                job.on_event(job, event)
            except Exception:  # noqa: BLE001 - a UI callback must not break the queue
                pass


class JobManager:
    """Submit experiments; one :class:`DeviceQueue` per device string. Thread-safe."""

    def __init__(self, store=None, default_timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.store = store
        self.default_timeout_s = default_timeout_s
        self._queues: dict[str, DeviceQueue] = {}
        self._jobs: dict[str, Job] = {}
        self._lock = threading.Lock()
        if store is not None:
            store.mark_interrupted()

    def submit(
        self,
        experiment: str,
        config: dict | Any,
        device: str = "auto",
        *,
        timeout_s: float | None = None,
        name: str = "",
        on_event: Callable[[Job, dict], None] | None = None,
        save: bool = True,
    ) -> Job:
        """Validate and queue a run (raises ConfigError at once on bad input).

        ``device="all"`` runs it on every GPU of the box at once and stores one merged run (core.fanout).
        """
        exp = registry.get(experiment)
        cfg = config if isinstance(config, exp.config_type) else exp.make_config(config)
        device = check_device_string(device)
        problem = label_problem(name, "name")
        if problem:
            raise ConfigError(problem)
        timeout_s = self.default_timeout_s if timeout_s is None else timeout_s
        if not (isinstance(timeout_s, (int, float)) and 0 < timeout_s < math.inf):
            raise ConfigError(f"timeout must be a positive number of seconds, got {timeout_s!r}")
        if device == "all":
            from core.fanout import submit_all

            return submit_all(self, exp, cfg, timeout_s=timeout_s, name=name, on_event=on_event)
        if device == "cuda":
            device = "cuda:0"
        env = exp.env_for(cfg)
        job = Job(
            experiment=experiment,
            config=cfg,
            device=device,
            timeout_s=float(timeout_s),
            env=env,
            fresh_process=exp.fresh_process or bool(env),
            name=name,
            on_event=on_event,
            save=save,
            store_failures=exp.store_failures,
            in_process=exp.in_process,
        )
        # An in-process job uses no device: it never waits behind a GPU job.
        key = "in-process" if exp.in_process else device
        with self._lock:
            self._jobs[job.id] = job
            device_queue = self._queues.get(key)
            if device_queue is None:
                device_queue = self._queues[key] = DeviceQueue(key, self)
        device_queue.put(job)
        return job

    def track(self, job: Job) -> None:
        """Make a job that runs elsewhere (a fan-out over several queues) findable by its id."""
        with self._lock:
            self._jobs[job.id] = job

    def get(self, job_id: str) -> Job | None:
        return self._jobs.get(job_id)

    def jobs(self) -> list[Job]:
        with self._lock:
            return list(self._jobs.values())

    def active(self) -> list[Job]:
        return [j for j in self.jobs() if j.state != "done"]

    def queue_position(self, job: Job) -> int | None:
        device_queue = self._queues.get("in-process" if job.in_process else job.device)
        return device_queue.position(job) if device_queue else None

    def shutdown(self) -> None:
        with self._lock:
            queues = list(self._queues.values())
            self._queues.clear()
        for device_queue in queues:
            device_queue.close()


def query_devices(timeout_s: float = STARTUP_TIMEOUT_S) -> dict:
    """The device description from a short-lived worker, so the caller never touches CUDA."""
    try:
        out = subprocess.run(
            [sys.executable, "-m", "core.worker", "--info"],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=_worker_env({}),
            cwd=str(REPO_ROOT),
        )
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"device query did not answer within {timeout_s:.0f} s") from None
    if out.returncode != 0:
        tail = "\n".join(out.stderr.strip().splitlines()[-5:])
        raise RuntimeError(f"device query failed ({_signal_text(out.returncode)}): {tail}")
    return json.loads(out.stdout.strip().splitlines()[-1])

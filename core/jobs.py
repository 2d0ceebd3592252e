"""The job queues: what the dashboard (one per server, shared by every browser tab) and the CLI submit to.

:class:`JobManager` validates a run once and queues it; jobs for one device run one after the other on
a single thread (:class:`DeviceQueue`), and a second submission is visibly ``queued``. The queue follows
the worker's events (:mod:`core.protocol`) and turns them into a run; the process plumbing is
:mod:`core.workerprocess`, the way into the store :mod:`core.lifecycle`. The parent trusts nothing the
child did not write: a worker that dies, hangs or is cancelled still becomes a stored
:class:`~core.result.RunResult` with the rows it had reported, and the next job gets a fresh worker.
"""

from __future__ import annotations

import math
import subprocess
import threading
import time
import weakref
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from core import registry
from core.errors import ConfigError, SpawnCancelled
from core.experiment import config_to_dict
from core.hardware.device import check_device_string
from core.lifecycle import Job, Listener, Recorder, notify
from core.protocol import ProgressEvent, ResultEvent, RunRequest, StartedEvent, WaitingEvent
from core.result import RunResult, now_iso
from core.text import label_problem, signal_text
from core.workerprocess import (
    STARTUP_TIMEOUT_S,
    LocalWorker,
    WorkerDied,
    WorkerLineTooLong,
    WorkerProcess,
    take_prestarted,
)

DEFAULT_TIMEOUT_S = 3600.0


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
            recorder = Recorder(job, self._manager.store)
            try:
                self._run(job, recorder)
            except Exception as exc:  # noqa: BLE001 - a bug here must not leave the job (and its waiter) hanging
                if not job.finished:
                    failed = ResultEvent.failed(job.id, "crash", f"the job queue failed: {type(exc).__name__}: {exc}")
                    recorder.finish(_run_of(job, None, failed, None))
            finally:
                self.current = None

    def _worker_for(self, job: Job) -> WorkerProcess | LocalWorker:
        preload = job.exp.uses_torch  # its worker imports torch before it is ready
        if job.exp.in_process:
            return LocalWorker()
        # a Ctrl-C while the fork server imports torch for its first worker ends the wait (SpawnCancelled)
        start = partial(WorkerProcess, preload_torch=preload, cancelled=lambda: job.cancelled)
        if job.fresh_process:
            if self._warm:  # a fresh allocator must not share the GPU with a warm worker's cache
                self._warm.stop()
                self._warm = None
            return take_prestarted(job.env, preload) or start(job.env)
        if self._warm is None or not self._warm.alive():
            self._warm = take_prestarted({}, preload) or start()
        return self._warm

    def _run(self, job: Job, recorder: Recorder) -> None:
        started = _Started()
        worker: WorkerProcess | LocalWorker | None = None
        if job.cancelled:
            outcome = _cancelled_before_start(job)
        else:
            job.message = "starting worker"
            notify(job, {"type": "state", "state": "starting"})
            try:
                worker = self._worker_for(job)
                ready = worker.wait_ready(STARTUP_TIMEOUT_S, lambda: job.cancelled)
                if ready is None:
                    worker.kill()
                    outcome = _cancelled_before_start(job)
                else:
                    started.worker_env = ready.env
                    worker.send(RunRequest(job.experiment, job.config, job.device, job.id))
                    outcome = self._follow(job, worker, started, recorder)
            except SpawnCancelled:
                outcome = _cancelled_before_start(job)
            except WorkerDied as exc:
                outcome = _crash_outcome(job, worker, str(exc))
        recycle = worker is not None and (
            job.fresh_process or outcome.recycle or outcome.status != "ok" and not worker.alive()
        )
        if worker is not None and (recycle or not worker.alive()):
            worker.kill()
            if worker is self._warm:
                self._warm = None
        recorder.finish(_run_of(job, started, outcome, worker))

    def _follow(
        self, job: Job, worker: WorkerProcess | LocalWorker, started: _Started, recorder: Recorder
    ) -> ResultEvent:
        # The time limit counts from the request: a wait for the device lock is part of the job.
        deadline = time.monotonic() + job.timeout_s
        while True:
            if job.cancelled:
                worker.kill()
                return ResultEvent.failed(job.id, "cancelled", "cancelled by user")
            if time.monotonic() > deadline:
                worker.kill()
                where = "" if started.event else " while waiting for the device lock"
                return ResultEvent.failed(
                    job.id, "timeout", f"timed out after {job.timeout_s:g} s (the job's time limit){where}"
                )
            try:
                event = worker.read_event(0.1)
            except WorkerLineTooLong as exc:
                return ResultEvent.failed(job.id, "crash", str(exc))
            except WorkerDied:
                return _crash_outcome(job, worker, None)
            if event is None or getattr(event, "job_id", job.id) != job.id:
                continue
            if isinstance(event, WaitingEvent):
                job.message = event.message
            elif isinstance(event, StartedEvent):
                started.event = event
                job.state, job.message = "running", "running"
                recorder.running(lambda: _run_of(job, started, None, None), force=True)
            elif isinstance(event, ProgressEvent):
                job.done_steps, job.total_steps, job.message = event.done, event.total, event.message
                job.rows.extend(event.rows)
                if event.rows:  # a server restart then keeps these points
                    recorder.running(lambda: _run_of(job, started, None, None))
            elif isinstance(event, ResultEvent):
                return event
            notify(job, event.to_dict())


@dataclass
class _Started:
    """What a job's worker said before its result: its environment (ready), then its "started" event."""

    worker_env: dict[str, str] = field(default_factory=dict)
    event: StartedEvent | None = None


def _cancelled_before_start(job: Job) -> ResultEvent:
    """Nothing of the job ran: cancelled while queued, while its worker was forked, or before it was ready."""
    return ResultEvent.failed(job.id, "cancelled", "cancelled by user before it started")


def _crash_outcome(job: Job, worker: WorkerProcess | LocalWorker | None, reason: str | None) -> ResultEvent:
    if worker is None:
        return ResultEvent.failed(job.id, "crash", f"worker could not start: {reason}")
    if not isinstance(worker, WorkerProcess):  # an in-process worker has no process to die
        return ResultEvent.failed(job.id, "crash", f"in-process run failed: {reason or 'no result'}")
    try:
        code = worker.proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        worker.kill()
        code = worker.proc.wait()  # reaped by the kill: at once
    tail = worker.stderr_tail()
    how = signal_text(code)
    if not isinstance(worker.proc, subprocess.Popen) and not worker.proc.status_known:  # a forked worker
        how = "ended with the fork server it came from (its exit status is unknown)"
    text = f"worker {how} before finishing" if reason is None else f"worker failed: {reason}"
    if tail:
        text += f"; last output: {tail[-600:]}"
    return ResultEvent.failed(job.id, "crash", text)


def _run_of(
    job: Job, started: _Started | None, outcome: ResultEvent | None, worker: WorkerProcess | LocalWorker | None
) -> RunResult:
    """The job as a run: final with the worker's ``outcome``, "running" without one. Its rows are those the
    progress events brought, continued by the result's own (:class:`~core.protocol.ResultEvent`)."""
    event = started.event if started else None
    rows = list(job.rows)
    if outcome is not None and outcome.status == "ok":
        rows = rows[: outcome.rows_from] + outcome.rows
    meta = dict(outcome.meta) if outcome is not None else {}
    meta["worker"] = {
        "pid": worker.pid if worker else None,
        "fresh": job.fresh_process,
        "env": started.worker_env if started is not None and event else {},
        "in_process": job.exp.in_process,
        "memory_cap_bytes": event.memory_cap_bytes if event else None,
    }
    meta["requested_device"] = job.device
    ok = outcome is not None and outcome.status == "ok"
    return RunResult(
        id=job.id,
        experiment=job.experiment,
        config=job.exp.stored_config(job.config),
        device=event.device
        if event
        else {"kind": "unknown", "torch_device": job.device, "name": f"{job.device} (worker never reported)"},
        versions=event.versions if event else {},
        started_at=event.started_at if event else job.submitted_at,
        finished_at=None if outcome is None else outcome.finished_at if ok else now_iso(),
        status="running" if outcome is None else outcome.status,
        error=outcome.error if outcome else None,
        error_kind=outcome.error_kind if outcome else None,
        rows=rows,
        meta=meta,
        name=job.name,
    )


class JobManager:
    """Submit experiments; one :class:`DeviceQueue` per device string. Thread-safe."""

    def __init__(
        self, store=None, default_timeout_s: float = DEFAULT_TIMEOUT_S, import_env: dict[str, str] | None = None
    ) -> None:
        self.store = store
        self.default_timeout_s = default_timeout_s
        self.import_env = dict(import_env or {})  # for the workers of imports (the dashboard's confinement)
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
        on_event: Listener | None = None,
        save: bool = True,
    ) -> Job:
        """Validate and queue a run (raises ConfigError at once on bad input).

        ``config`` is a dict of values, validated here, once (or an already validated config dataclass);
        the job carries it as the validated dict. ``device="all"`` runs it on every GPU of the box at once
        and stores one merged run (core.fanout).
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
            from core.fanout import submit_all  # here: only a run on every GPU needs it

            return submit_all(self, exp, cfg, timeout_s=timeout_s, name=name, on_event=on_event)
        if device == "cuda":
            device = "cuda:0"
        job = Job(
            exp=exp,
            config=config_to_dict(cfg),
            device=device,
            timeout_s=float(timeout_s),
            env=exp.env_for(cfg) | (self.import_env if exp.reads else {}),
            name=name,
            on_event=on_event,
            save=save,
        )
        # An in-process job or an import uses no device: it never waits behind a device's jobs.
        key = exp.queue or device
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
        device_queue = self._queues.get(job.exp.queue or job.device)
        return device_queue.position(job) if device_queue else None

    def shutdown(self) -> None:
        with self._lock:
            queues = list(self._queues.values())
            self._queues.clear()
        for device_queue in queues:
            device_queue.close()

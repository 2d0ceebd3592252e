"""A run's lifecycle, the same for a single job (:mod:`core.jobs`) and an all-GPU fan-out (:mod:`core.fanout`).

A :class:`Job` is what a caller holds while a run is queued and running; a :class:`Recorder` takes it
into the store — the "running" row (so a server restart keeps its points), again at most every
:data:`RUNNING_SAVE_INTERVAL_S` while rows arrive, then the final result — and publishes that result
to the job's waiters and listener. Who runs the job (a worker process, several GPU queues) is not its
business, so both paths share it without importing each other.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from core.experiment import Experiment
from core.result import RunResult, new_run_id, now_iso

RUNNING_SAVE_INTERVAL_S = 2.0  # how often a running job's finished rows are written to the store

# A job's listener (the CLI's progress lines, a benchmark's clock): the job and each event's JSON form.
Listener = Callable[["Job", dict], None]


@dataclass
class Job:
    """A submitted experiment run; its fields are read by UI threads, written by the thread that runs it."""

    exp: Experiment  # what runs: its flags (fresh process, in-process, stored failures, …) are read from it
    config: dict  # the validated config, JSON-ready (what the worker receives; the run keeps exp.stored_config)
    device: str
    timeout_s: float
    env: dict[str, str] = field(default_factory=dict)  # exp.env_for(config): a fresh worker's environment
    name: str = ""
    on_event: Listener | None = None
    save: bool = True  # False: a part of a larger run (core.fanout), which stores the whole
    id: str = field(default_factory=new_run_id)
    submitted_at: str = field(default_factory=now_iso)
    state: str = "queued"  # queued → running → done
    message: str = "queued"
    done_steps: int = 0
    total_steps: int = 0
    rows: list[dict] = field(default_factory=list)  # the rows reported so far, JSON-ready
    result: RunResult | None = None
    store_error: str | None = None
    _cancel: threading.Event = field(default_factory=threading.Event, repr=False)
    _finished: threading.Event = field(default_factory=threading.Event, repr=False)

    @property
    def experiment(self) -> str:
        return self.exp.name

    @property
    def fresh_process(self) -> bool:
        """A worker of its own: the experiment asks for one, its environment differs from a warm worker's, or it
        is an import (its heap and its CPU limit leave with the process)."""
        return self.exp.fresh_process or bool(self.env) or self.exp.reads is not None

    def cancel(self) -> None:
        self._cancel.set()

    def complete(self, result: RunResult) -> None:
        """Publish the final result and wake every waiter (called once, by whoever ran the job)."""
        self.result = result
        self.state = "done"
        self.message = result.status
        self._finished.set()

    @property
    def finished(self) -> bool:
        return self._finished.is_set()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def wait(self, timeout: float | None = None) -> RunResult | None:
        self._finished.wait(timeout)
        return self.result

    @property
    def fraction(self) -> float:
        return min(1.0, self.done_steps / self.total_steps) if self.total_steps else 0.0


def notify(job: Job, event: dict) -> None:
    """Tell the job's listener; a listener that fails must not break the run."""
    if job.on_event:
        try:
            job.on_event(job, event)
        except Exception:  # noqa: BLE001
            pass


class Submitter(Protocol):
    """What a fan-out needs of the job manager: its store, its default limit, a way to queue and to list jobs."""

    store: Any
    default_timeout_s: float

    def submit(
        self,
        experiment: str,
        config: Any,
        device: str = "auto",
        *,
        timeout_s: float | None = None,
        name: str = "",
        on_event: Listener | None = None,
        save: bool = True,
    ) -> Job: ...

    def track(self, job: Job) -> None: ...


class Recorder:
    """One job's way into the store and to its waiters; a store that fails is reported, never raised."""

    def __init__(self, job: Job, store) -> None:
        self.job, self.store = job, store
        self._saved_at = time.monotonic()

    def running(self, build: Callable[[], RunResult], force: bool = False) -> None:
        """Save the running row (``build()``, status "running") when ``force``d or the interval has passed."""
        job = self.job
        if self.store is None or not job.save or not job.exp.store_failures:
            return
        if not force and time.monotonic() - self._saved_at <= RUNNING_SAVE_INTERVAL_S:
            return
        self._saved_at = time.monotonic()
        self._save(build(), owner_pid=os.getpid())

    def finish(self, result: RunResult) -> None:
        """Store the final result (a failure only where the job stores failures), then publish it."""
        job = self.job
        if job.store_error:
            result.meta["store_error"] = job.store_error
        if self.store is not None and job.save and (job.exp.store_failures or result.status == "ok"):
            self._save(result)
            if job.store_error:
                result.meta["store_error"] = job.store_error
        job.complete(result)
        notify(job, {"type": "done", "status": result.status})

    def _save(self, run: RunResult, owner_pid: int | None = None) -> None:
        try:
            self.store.save(run, owner_pid=owner_pid)
        except Exception as exc:  # noqa: BLE001 - a broken store must not lose the result in memory
            self.job.store_error = f"could not save the run: {exc}"

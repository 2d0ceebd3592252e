"""Start the ranks of a one-box job through torch's elastic launcher (the engine of ``torchrun``), and follow them.

:func:`run_ranks` is a generator for an experiment running in a worker: it starts
``torch.distributed.launcher.api.elastic_launch`` in a thread (a c10d rendezvous on 127.0.0.1, a free
port, no restarts; its stores listen on 127.0.0.1 only: :mod:`core.distributed.bound_store`), yields the events the ranks write (rank 0's rows as each point finishes), and
returns rank 0's metadata. When a rank fails it raises :class:`RankFailure`, whose message names the
rank and what happened to it:

* a rank that died (a signal nobody in the lab sent) — from the launcher's failure record;
* a rank that stopped responding — the ranks waiting for it time out (the process group's timeout),
  read from the rendezvous store that it never finished the step, and say so;
* anything else a rank raised, in its own words.

Waiting ranks report within the collective timeout; the lab then kills every rank at once (the
launcher's own shutdown waits 30 s per stuck rank), and a watchdog kills them if rank 0 has not even
sent its heartbeat for the timeout plus a margin. Ranks also die with this process from their first
instruction (:mod:`core.distributed.rank_entry`, before torch is imported), so a cancelled or killed job
leaves none behind.

The ranks' work folder (their event file and logs), ``<tmp>/gpulab-ranks-<pid>-…``, names the process
that launched them (:mod:`core.distributed.work_folders`): it is removed when the launch ends, however it ends; the
parent of a killed worker removes its worker's folders, and every launch sweeps the folders whose owner is no
longer alive.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil

from core.distributed.bound_store import bind_launcher_stores
from core.distributed.events import RANK_EVENTS, RankDone, RankError, RankStep
from core.distributed.rank_entry import PARENT_ENV
from core.distributed.work_folders import WORK_PREFIX, work_folders
from core.protocol import Message, decode
from core.text import signal_text

RANK_MODULE = "core.distributed.rank_entry"  # torch-free first lines, then core.distributed.rank
ERROR_GRACE_S = 4.0  # after a rank's error, how long the others get to report theirs before the lab stops them
WATCHDOG_MARGIN_S = 60.0
POLL_S = 0.05


class RankFailure(RuntimeError):
    """A rank died, hung or raised; ``meta`` says which (the worker stores it with the run)."""

    def __init__(self, message: str, meta: dict) -> None:
        super().__init__(message)
        self.meta = meta


def rank_processes() -> list[psutil.Process]:
    """This process's rank children (they run in sessions of their own, as the elastic launcher starts them)."""
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if RANK_MODULE in child.cmdline():
                found.append(child)
        except psutil.Error:
            continue
    return found


def kill_ranks() -> set[int]:
    """SIGKILL every rank process (and its process group); the pids killed."""
    killed = set()
    for proc in rank_processes():
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            try:
                proc.kill()
            except psutil.Error:
                continue
        killed.add(proc.pid)
    return killed


def sweep_work_folders() -> None:
    """Remove the work folders whose launcher is no longer alive (a worker killed with no parent to clean)."""
    for path, pid in work_folders():
        if pid is not None and pid != os.getpid() and not psutil.pid_exists(pid):
            shutil.rmtree(path, ignore_errors=True)


@contextmanager
def _environment(values: dict[str, str]):
    """The elastic launcher hands its own environment to the ranks; set ours for the launch only."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


class _Events:
    """Complete JSON lines appended to a file by the ranks (:data:`core.protocol.RANK_EVENTS`), read as they
    arrive; a line that is not one of them stops the job with the reason (:class:`core.protocol.ProtocolError`)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self.last_at = time.monotonic()

    def read(self) -> list[Message]:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self._offset)
                data = fh.read()
        except FileNotFoundError:
            return []
        complete = data[: data.rfind(b"\n") + 1]
        self._offset += len(complete)
        events = [decode(line, RANK_EVENTS) for line in complete.splitlines() if line.strip()]
        if events:
            self.last_at = time.monotonic()
        return events


def _launch_config(world: int, log_dir: str):
    from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs
    from torch.distributed.launcher.api import LaunchConfig

    return LaunchConfig(
        min_nodes=1,
        max_nodes=1,
        nproc_per_node=world,
        run_id=f"gpulab-{uuid.uuid4().hex[:12]}",
        rdzv_backend="c10d",
        rdzv_endpoint="127.0.0.1:0",
        local_addr="127.0.0.1",
        max_restarts=0,
        monitor_interval=0.1,
        logs_specs=DefaultLogsSpecs(log_dir=log_dir),
    )


def explain(
    errors: list[RankError], failures: dict, killed: set[int], step: str | None, reason: str | None
) -> tuple[str, dict]:
    """The one sentence a user needs: which rank, and what happened to it.

    ``failures``: global rank → ProcessFailure from the launcher; ``killed``: pids the lab killed itself.
    """
    from core.distributed.rank import failure_text

    where = f" during {step}" if step else ""
    died = {
        r: f for r, f in failures.items() if f.exitcode < 0 and f.pid not in killed and f.exitcode != -signal.SIGTERM
    }  # SIGTERM is the launcher stopping the others
    stalled = sorted({q for e in errors for q in e.stalled})
    meta = {
        "rank_errors": [e.to_dict() for e in errors],
        "stalled_ranks": stalled,
        "rank_exits": {
            str(r): {"pid": f.pid, "exitcode": f.exitcode, "local_rank": f.local_rank} for r, f in failures.items()
        },
    }
    if died:
        rank = min(died, key=lambda r: died[r].timestamp)
        f = died[rank]
        meta["failed_rank"] = rank
        return f"rank {rank} (pid {f.pid}) died{where}: {signal_text(f.exitcode)}", meta
    if stalled:
        meta["failed_rank"] = stalled[0]
        waiting = next(e for e in errors if e.stalled)
        return failure_text(waiting), meta
    if errors:
        meta["failed_rank"] = errors[0].rank
        return failure_text(errors[0]), meta
    if failures:
        rank = min(failures, key=lambda r: failures[r].timestamp)
        meta["failed_rank"] = rank
        return f"rank {rank} {signal_text(failures[rank].exitcode)}{where}", meta
    return f"the ranks stopped{where}: {reason or 'no rank reported why'}", meta


def run_ranks(config: dict, world: int, timeout_s: float) -> Generator[Message, None, dict]:
    """Run ``world`` ranks of :mod:`core.distributed.rank` on this box; yield rank 0's events; return its meta.

    ``timeout_s`` is the collective timeout the ranks use; the watchdog adds a margin to it.
    """
    bind_launcher_stores()
    sweep_work_folders()
    workdir = Path(tempfile.mkdtemp(prefix=f"{WORK_PREFIX}{os.getpid()}-"))
    events = _Events(workdir / "events.jsonl")
    outcome: dict = {}
    errors: list[RankError] = []
    killed: set[int] = set()
    stopped = False
    step, done, stop_reason, first_error_at = None, None, None, None
    thread = _launcher(config, world, workdir, events, outcome)

    def new_events() -> Iterator[Message]:
        """The events written since the last read, keeping the errors and rank 0's final meta."""
        nonlocal done
        for event in events.read():
            if isinstance(event, RankError):
                errors.append(event)
            elif isinstance(event, RankDone):
                done = event.meta
            yield event

    try:
        with _environment({"OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"), PARENT_ENV: str(os.getpid())}):
            thread.start()
            while thread.is_alive():
                for event in new_events():
                    if isinstance(event, RankStep):
                        step = event.label
                    elif isinstance(event, RankError):
                        first_error_at = first_error_at or time.monotonic()
                    yield event
                now = time.monotonic()
                if not stopped and first_error_at and now - first_error_at > ERROR_GRACE_S:
                    killed, stopped = kill_ranks(), True
                elif not stopped and now - events.last_at > timeout_s + WATCHDOG_MARGIN_S:
                    stop_reason = f"rank 0 sent nothing, not even its heartbeat, for {now - events.last_at:.0f} s"
                    killed, stopped = kill_ranks(), True
                thread.join(POLL_S)
        yield from new_events()
        if done is not None and not outcome:
            return done
        raise _failure(errors, outcome, killed, step, stop_reason)
    finally:
        _clean_up(thread, workdir)


def _launcher(config: dict, world: int, workdir: Path, events: _Events, outcome: dict) -> threading.Thread:
    """The thread that runs torch's elastic launch of the ranks; how the launch ended goes into ``outcome``:
    the ranks' failures, or why the rendezvous itself failed."""
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import elastic_launch

    def launch() -> None:
        try:
            elastic_launch(_launch_config(world, str(workdir / "logs")), sys.executable)(
                "-m", RANK_MODULE, "--events", str(events.path), "--config", json.dumps(config)
            )
        except ChildFailedError as exc:
            outcome["failures"] = exc.failures
        except BaseException as exc:  # noqa: BLE001 - the rendezvous itself failed; reported below
            outcome["exception"] = f"{type(exc).__name__}: {exc}"

    return threading.Thread(target=launch, daemon=True, name="gpulab-elastic-launch")


def _failure(
    errors: list[RankError], outcome: dict, killed: set[int], step: str | None, stop_reason: str | None
) -> RankFailure:
    """The job's failure as :func:`explain` words it, marked unsupported where a rank said so."""
    message, meta = explain(
        errors, outcome.get("failures") or {}, killed, step, stop_reason or outcome.get("exception")
    )
    if any(e.unsupported for e in errors):
        meta["unsupported"] = True
    return RankFailure(message, meta)


def _clean_up(thread: threading.Thread, workdir: Path) -> None:
    """However the job ended: no rank process left, the launch's thread ended (or given 30 s), the work folder gone."""
    if thread.is_alive():
        kill_ranks()
        thread.join(30)
    leftover = kill_ranks()  # nothing should be left; make sure
    if leftover:
        print(f"killed {len(leftover)} leftover rank process(es)", file=sys.stderr)
    shutil.rmtree(workdir, ignore_errors=True)

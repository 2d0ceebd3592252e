"""The worker's process plumbing: start ``python -m core.worker``, talk to it, end it, explain its death.

Nothing here knows what a job or a run is (that is :mod:`core.lifecycle` and :mod:`core.jobs`): a
:class:`WorkerProcess` sends requests and reads :mod:`core.protocol` events, and a :class:`LocalWorker`
does the same for a torch-free experiment in a thread of this process.
"""

from __future__ import annotations

import json
import os
import queue
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO

from core.limits import LIMITS
from core.protocol import WORKER_EVENTS, ProtocolError, ReadyEvent, RunRequest, WorkerEvent, decode
from core.text import signal_text
from core.workerlaunch import REPO_ROOT, STARTUP_TIMEOUT_S, Launched, take, worker_env


class WorkerDied(Exception):
    """The worker's output ended, or it could not be started or written to."""


class WorkerLineTooLong(WorkerDied):
    """The worker wrote a line longer than the limit; it has been killed (a fresh one takes the next job)."""


@dataclass(frozen=True)
class Noise:
    """A stdout line that is not a protocol event (a library that wrote to fd 1 before it was redirected)."""

    text: str
    problem: str

    def to_dict(self) -> dict:
        return {"type": "noise", "text": self.text}


class WorkerProcess:
    """One ``python -m core.worker`` child; stderr goes to a temp file so a crash can be explained."""

    def __init__(
        self,
        env: dict[str, str] | None = None,
        preload_torch: bool = False,
        preload: tuple[str, ...] = (),
        launched: Launched | None = None,
        cancelled: Callable[[], bool] = lambda: False,
    ) -> None:
        """Start a worker, or take over one ``launched`` already (:func:`core.workerlaunch.prestart`); a start
        that ``cancelled`` calls off raises :class:`core.errors.SpawnCancelled`."""
        self.env = dict(env or {})
        launched = launched or Launched(self.env, preload_torch, preload, cancelled)
        self._stderr = launched.stderr
        self.proc = launched.proc
        assert self.proc.stdin is not None and self.proc.stdout is not None  # both are pipes
        self._stdin: IO[bytes] = self.proc.stdin
        self._stdout: IO[bytes] = self.proc.stdout
        self._buffer = bytearray()
        self._searched = 0  # bytes of the buffer already known to hold no newline
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._stdout, selectors.EVENT_READ)
        self.ready: ReadyEvent | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def send(self, request: RunRequest) -> None:
        try:
            self._stdin.write((request.to_json() + "\n").encode())
            self._stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise WorkerDied(str(exc)) from None

    def read_event(self, timeout: float) -> WorkerEvent | Noise | None:
        """Next protocol event, None if nothing arrived within ``timeout``; WorkerDied on EOF."""
        deadline = time.monotonic() + timeout
        limit = LIMITS.worker_line_bytes
        while (end := self._buffer.find(b"\n", self._searched)) < 0:
            self._searched = len(self._buffer)  # each byte is searched once: a long line costs linear time
            if self._searched > limit:
                self.kill()
                raise WorkerLineTooLong(
                    f"the worker wrote a line of more than {limit >> 20} MiB (the limit on one line of its "
                    "output); the job was ended and the worker replaced"
                )
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self._selector.select(remaining):
                return None
            chunk = os.read(self._stdout.fileno(), 1 << 20)
            if not chunk:
                raise WorkerDied("end of output")
            self._buffer += chunk
        line = bytes(self._buffer[:end])
        del self._buffer[: end + 1]
        self._searched = 0
        try:
            event = decode(line, WORKER_EVENTS)
        except ProtocolError as exc:
            return Noise(line.decode(errors="replace"), str(exc))
        if not isinstance(event, WorkerEvent):  # a record of the channel that is no worker event
            return Noise(line.decode(errors="replace"), f"not a worker event: {type(event).__name__}")
        return event

    def wait_ready(self, timeout: float, cancelled: Callable[[], bool] = lambda: False) -> ReadyEvent | None:
        """The ``ready`` event; None as soon as ``cancelled()`` (a Ctrl-C need not wait for torch to import)."""
        deadline = time.monotonic() + timeout
        while self.ready is None:
            if cancelled():
                return None
            if time.monotonic() > deadline:
                raise WorkerDied(f"worker did not start within {timeout:.0f} s")
            event = self.read_event(0.1)
            if isinstance(event, ReadyEvent):
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
        # A killed worker could not remove the work folders of the ranks it launched (they die with it).
        from core.distributed.work_folders import remove_work_folders

        remove_work_folders(self.proc.pid)

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
        self.ready = ReadyEvent(os.getpid(), {})

    @property
    def pid(self) -> int:
        return os.getpid()

    def alive(self) -> bool:
        return not self._killed

    def wait_ready(self, timeout: float, cancelled: Callable[[], bool] = lambda: False) -> ReadyEvent | None:
        return None if cancelled() else self.ready

    def send(self, request: RunRequest) -> None:
        from core.worker import run_job

        threading.Thread(
            target=run_job,
            args=(request, self._events.put),
            daemon=True,
            name=f"gpulab-local-{request.job_id[:8]}",
        ).start()

    def read_event(self, timeout: float) -> WorkerEvent | None:
        try:
            return self._events.get(timeout=timeout)
        except queue.Empty:
            return None

    def kill(self) -> None:  # a thread cannot be killed; its events are simply no longer read
        self._killed = True

    stop = kill

    def stderr_tail(self, lines: int = 8) -> str:
        return ""


def take_prestarted(env: dict[str, str], preload_torch: bool) -> WorkerProcess | None:
    """The worker :func:`core.workerlaunch.prestart` started, if it suits a job (no extra environment, no torch)
    and is alive."""
    if env or preload_torch:
        return None
    launched = take()
    if launched is None:
        return None
    worker = WorkerProcess(launched=launched)
    if worker.alive():
        return worker
    worker.kill()
    return None


def query_devices(timeout_s: float = STARTUP_TIMEOUT_S) -> dict:
    """The device description from a short-lived worker, so the caller never touches CUDA."""
    try:
        out = subprocess.run(
            [sys.executable, "-m", "core.worker", "--info"],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=worker_env({}),
            cwd=REPO_ROOT,
        )
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"device query did not answer within {timeout_s:.0f} s") from None
    if out.returncode != 0:
        tail = "\n".join(out.stderr.strip().splitlines()[-5:])
        raise RuntimeError(f"device query failed ({signal_text(out.returncode)}): {tail}")
    return json.loads(out.stdout.strip().splitlines()[-1])

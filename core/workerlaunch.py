"""Starting ``python -m core.worker`` with nothing but the standard library's process plumbing, so that a
command can start its worker before it imports anything else of the engine (:func:`prestart`): the worker's
start and the command's own then run on two cores at once. :mod:`core.workerprocess` talks to it."""

from __future__ import annotations

import atexit
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from typing import IO, TYPE_CHECKING

from core.errors import SpawnCancelled

if TYPE_CHECKING:
    from core.forkserver import Forked, ForkServer

STARTUP_TIMEOUT_S = 120.0  # importing torch on a cold disk can take a while

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def worker_env(extra: dict[str, str]) -> dict[str, str]:
    env = dict(os.environ)
    env.update(extra)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [REPO_ROOT, env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    return env


class Launched:
    """A worker process just started, and the file its stderr goes to (a crash is explained from it).

    A worker that will run tensors is forked from this process's fork server (:mod:`core.forkserver`: torch is
    imported once, not per worker); where that is off or fails, and for every other worker, a fresh interpreter."""

    def __init__(
        self,
        env: dict[str, str],
        preload_torch: bool,
        preload: tuple[str, ...],
        cancelled: Callable[[], bool] = lambda: False,
    ) -> None:
        """``cancelled`` is asked while the fork server is awaited (its first child waits for torch's import):
        once true, :class:`core.errors.SpawnCancelled` is raised and no worker is left."""
        self.stderr: IO[bytes] = tempfile.TemporaryFile(prefix="gpulab-worker-", suffix=".log")
        args = [*(["--preload-torch"] if preload_torch else []), *(f"--preload={module}" for module in preload)]
        forked = None
        if preload_torch and _forkable(env):  # the fork server's module only then: a plain worker starts sooner
            try:
                forked = _forked(args, env, self.stderr, cancelled)
            except SpawnCancelled:
                self.stderr.close()
                raise
        self.proc: subprocess.Popen[bytes] | Forked = forked or self._fresh(args, env)

    def _fresh(self, args: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, "-m", "core.worker", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            env=worker_env(env),
            cwd=REPO_ROOT,
            start_new_session=True,
        )


def _forkable(env: dict[str, str]) -> bool:
    """Whether a worker with this environment may be forked from a server that imported torch without it. Not
    with an allocator setting of its own: torch reads the setting's ``backend`` when it is imported (a forked
    ``backend:cudaMallocAsync`` worker fails CUDA's initialisation, "backend parsed at runtime != … at load
    time"), so such a worker is a fresh interpreter."""
    from core.memory.alloc_conf import ENV_KEYS

    return not any(key in env for key in ENV_KEYS)


_server: list[ForkServer] = []
_server_lock = threading.Lock()


def _forked(args: list[str], env: dict[str, str], stderr: IO[bytes], cancelled: Callable[[], bool]) -> Forked | None:
    """A worker forked from this process's fork server (started at the first call), or None where it is off or
    cannot start one: the caller then starts a fresh interpreter."""
    from core.forkserver import Forked, ForkServer, ForkServerDown, enabled, server_command

    if not enabled():
        return None
    child_in, our_in = os.pipe()
    our_out, child_out = os.pipe()
    pid = None
    try:
        with _server_lock:
            if not _server or _server[0].down:
                for dead in _server:
                    dead.stop()  # its socket, and its process reaped
                _server[:] = [ForkServer(server_command("core.worker"), worker_env({}), REPO_ROOT)]
            server = _server[0]
        fds = (child_in, child_out, stderr.fileno())
        pid = server.spawn(args, worker_env(env), REPO_ROOT, fds, STARTUP_TIMEOUT_S, cancelled)
        return Forked(server, pid, os.fdopen(our_in, "wb"), os.fdopen(our_out, "rb"))
    except (OSError, ForkServerDown):
        return None  # SpawnCancelled goes on up: the job is not run at all
    finally:
        os.close(child_in)
        os.close(child_out)
        if pid is None:  # no child took the pipes
            os.close(our_in)
            os.close(our_out)


@atexit.register
def stop_fork_server() -> None:
    """End this process's fork server (its children follow it)."""
    with _server_lock:
        while _server:
            _server.pop().stop()


_prestarted: list[Launched] = []

# Commands whose job runs in a torch-free worker, with the engine modules that job imports there: the worker is
# started (and imports them) before the command loads the rest of the engine, so the two start on two cores at once.
WORKER_FIRST = {
    "trace": ("core.workload.trace.timeline",),
    "trace-diff": ("core.workload.trace.timeline",),
    "snapshot": ("core.workload.snapshot.analysis",),
    "hang": ("core.workload.hang.analysis",),
}


def prestart_for(argv: list[str]) -> bool:
    """:func:`prestart` the worker of the command line ``argv`` (``python -m core``'s arguments) where its command
    is one of :data:`WORKER_FIRST` and no help is asked for; whether it did (or had)."""
    command = argv[0] if argv and not argv[0].startswith("-") else None
    if command not in WORKER_FIRST or {"-h", "--help"} & set(argv):
        return False
    prestart(WORKER_FIRST[command])
    return True


def prestart(preload: tuple[str, ...] = ()) -> None:
    """Start a torch-free worker now, for the next job of this process to take: a command that will need one
    (an import) starts it before loading its own modules, with the ``preload`` modules its job will import.
    Unused, it is stopped at exit."""
    if not _prestarted:
        _prestarted.append(Launched({}, False, preload))


def take() -> Launched | None:
    """The worker :func:`prestart` started, if any (the caller checks that it is still alive)."""
    return _prestarted.pop() if _prestarted else None


@atexit.register
def stop_prestarted() -> None:
    """End a prestarted worker nobody took: closing its input ends its request loop; a kill if it lingers."""
    while _prestarted:
        launched = _prestarted.pop()
        proc = launched.proc
        try:
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()
        launched.stderr.close()

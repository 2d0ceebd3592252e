"""Starting ``python -m core.worker`` with nothing but the standard library's process plumbing, so that a
command can start its worker before it imports anything else of the engine (:func:`prestart`): the worker's
start and the command's own then run on two cores at once. :mod:`core.workerprocess` talks to it."""

from __future__ import annotations

import atexit
import os
import subprocess
import sys
import tempfile
from typing import IO

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def worker_env(extra: dict[str, str]) -> dict[str, str]:
    env = dict(os.environ)
    env.update(extra)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [REPO_ROOT, env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    return env


class Launched:
    """A worker process just started, and the file its stderr goes to (a crash is explained from it)."""

    def __init__(self, env: dict[str, str], preload_torch: bool, preload: tuple[str, ...]) -> None:
        self.stderr: IO[bytes] = tempfile.TemporaryFile(prefix="gpulab-worker-", suffix=".log")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "core.worker",
                *(["--preload-torch"] if preload_torch else []),
                *(f"--preload={module}" for module in preload),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            env=worker_env(env),
            cwd=REPO_ROOT,
            start_new_session=True,
        )


_prestarted: list[Launched] = []


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

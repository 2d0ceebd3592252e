"""A fork server for torch workers: one process per parent imports torch once and forks a worker per request, so
a torch job's worker is ready in milliseconds instead of paying torch's import (~3 s of CPU) each time.

Why not :mod:`multiprocessing`'s forkserver: the lab's worker is a process with its own stdin/stdout protocol, its
own session (a kill takes the ranks it launched) and a stderr file; the parent hands those three descriptors over
a Unix socket and gets back the pid, then the exit status when the server reaps it.

What keeps a fork sound: the server imports torch and nothing of the lab but its error classes, and never touches CUDA (a process forked
after CUDA's initialisation cannot use it). Each child first takes the environment its parent sent — the job's
``CUDA_VISIBLE_DEVICES``, ``NVIDIA_TF32_OVERRIDE`` and memory cap are read when CUDA and the job start, after
the fork — then imports the worker (an allocator setting is read partly at torch's import: such a worker is not
forked, :mod:`core.workerlaunch`). The server ends when its parent's end of the socket
closes; its children watch their parent and end after it. ``GPULAB_FORK_SERVER=0`` turns it off: each worker is
then a fresh interpreter, as it is where the server cannot start.
"""

from __future__ import annotations

import atexit
import importlib
import itertools
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import IO

from core.errors import SpawnCancelled

FORK_SERVER_ENV = "GPULAB_FORK_SERVER"
_MESSAGE_BYTES = 1 << 20  # one request: the child's environment and arguments
_REAP_EVERY_S = 0.05
_STOP_WAIT_S = 0.5  # an idle server exits within one look (_REAP_EVERY_S); a busy one is killed after this


class ForkServerDown(Exception):
    """The fork server is gone or did not answer; the caller starts a plain worker instead."""


def enabled() -> bool:
    return os.environ.get(FORK_SERVER_ENV, "1") != "0"


# -- the server ---------------------------------------------------------------------------------------------


def serve(sock_fd: int, module: str) -> int:
    """Import torch, then fork ``module.main(args)`` for each request until the parent closes its end. The module
    is imported in each child, after it has taken its environment (the lab's modules read theirs at import)."""
    import torch  # noqa: F401 - what every child shares, imported before the first fork

    def run_child(args: list[str]) -> int:
        return importlib.import_module(module).main(args)

    sock = socket.socket(fileno=sock_fd)
    children: set[int] = set()
    while True:
        readable, _, _ = select.select([sock], [], [], _REAP_EVERY_S)
        _reap(sock, children)
        if not readable:
            continue
        try:
            message, fds, _, _ = socket.recv_fds(sock, _MESSAGE_BYTES, 3)
        except OSError:
            message, fds = b"", []
        if not message:  # the parent closed its end or died: its children watch us and follow
            return 0
        request = json.loads(message)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child(sock, fds, request, run_child)
        for fd in fds:
            os.close(fd)
        children.add(pid)
        _send(sock, {"pid": pid, "id": request.get("id")})


def _reap(sock: socket.socket, children: set[int]) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            children.clear()
            return
        if pid == 0:
            return
        children.discard(pid)
        _send(sock, {"exit": pid, "code": os.waitstatus_to_exitcode(status)})


def _send(sock: socket.socket, message: dict) -> None:
    try:
        sock.send(json.dumps(message).encode())
    except OSError:
        pass  # the parent is gone; the next receive ends the server


def _child(sock: socket.socket, fds: list[int], request: dict, run_child: Callable[[list[str]], int]) -> None:
    """In the forked child: its own session, the three descriptors as 0/1/2, the sent environment; never returns."""
    code = 1
    try:
        sock.close()
        os.setsid()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        code = run_child(list(request["args"]))
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
    except BaseException:  # noqa: BLE001 - whatever the child raised ends it with its traceback on stderr
        traceback.print_exc()
    finally:
        try:
            atexit._run_exitfuncs()  # a child ends through os._exit: its own atexit work still runs
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


# -- the parent's side --------------------------------------------------------------------------------------


class ForkServer:
    """The parent's handle on its fork server: start it, ask it for children, hear how they ended."""

    def __init__(self, command: list[str], env: dict[str, str], cwd: str) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.proc = subprocess.Popen(
            [*command, str(theirs.fileno())],
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
        theirs.close()
        self._sock = ours
        self._sending = threading.Lock()
        self._ids = itertools.count()
        self._pids: dict[int, int] = {}  # request id → the pid the server answered
        self._abandoned: set[int] = set()  # requests given up on: their children are killed as they come
        self._codes: dict[int, int] = {}
        self.orphaned: set[int] = set()  # children gone after the server: how they ended is unknown
        self._ended = threading.Condition()
        self.down = False
        threading.Thread(target=self._listen, daemon=True, name="gpulab-fork-server").start()

    def _listen(self) -> None:
        while True:
            try:
                message = self._sock.recv(_MESSAGE_BYTES)
            except OSError:
                message = b""
            if not message:
                with self._ended:
                    self.down = True
                    self._ended.notify_all()
                return
            answer = json.loads(message)
            with self._ended:
                if "exit" in answer:
                    self._codes[answer["exit"]] = answer["code"]
                elif answer["id"] in self._abandoned:
                    self._abandoned.discard(answer["id"])
                    _kill(answer["pid"])
                else:
                    self._pids[answer["id"]] = answer["pid"]
                self._ended.notify_all()

    def spawn(
        self,
        args: list[str],
        env: dict[str, str],
        cwd: str,
        fds: tuple[int, int, int],
        timeout_s: float,
        cancelled: Callable[[], bool] = lambda: False,
    ) -> int:
        """A child running with ``fds`` as its stdin, stdout and stderr; its pid. Each request carries an id the
        answer repeats, so a request given up on (``cancelled()``, checked every few tens of ms, or past
        ``timeout_s``) cannot hand its late child to the next one: that child is killed when it comes."""
        deadline = time.monotonic() + timeout_s
        key = next(self._ids)
        request = json.dumps({"args": args, "env": env, "cwd": cwd, "id": key}).encode()
        with self._sending:
            if self.down:
                raise ForkServerDown("the fork server has ended")
            try:
                socket.send_fds(self._sock, [request], list(fds))
            except OSError as exc:
                raise ForkServerDown(f"the fork server did not take the request: {exc}") from None
        with self._ended:
            while True:
                stop = cancelled()
                if stop or self.down or time.monotonic() >= deadline:
                    if (pid := self._pids.pop(key, None)) is not None:
                        _kill(pid)
                    elif not self.down:  # a server that ended answers nothing more
                        self._abandoned.add(key)
                    if stop:
                        raise SpawnCancelled("cancelled before the fork server answered")
                    raise ForkServerDown("the fork server has ended" if self.down else "the fork server did not answer")
                if key in self._pids:
                    return self._pids.pop(key)
                self._ended.wait(_REAP_EVERY_S)

    def exit_code(self, pid: int, timeout_s: float | None) -> int | None:
        """How ``pid`` ended, once the server has reaped it (None if not within ``timeout_s``). A child whose
        server has ended is reaped by no one here: once it is gone its code is unknown, reported as 1 and the pid
        kept in :attr:`orphaned`."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._ended:
            while pid not in self._codes:
                if self.down and not _exists(pid):
                    self._codes[pid] = 1
                    self.orphaned.add(pid)
                    break
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return None
                self._ended.wait(_REAP_EVERY_S * 4 if self.down else left)
            return self._codes[pid]

    def stop(self) -> None:
        """End the server: it sees the end of its input at its next look (every few tens of ms) and exits; one
        still importing torch (a command stopped in its first seconds) is killed rather than waited for — it holds
        nothing, and its children watch it and follow."""
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
        try:
            self.proc.wait(timeout=_STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _exists(pid: int) -> bool:
    """Still running (an orphan's zombie, left to a reaper that may never come, is not)."""
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


class Forked:
    """A forked child, with the parts of :class:`subprocess.Popen` the worker's plumbing uses."""

    def __init__(self, server: ForkServer, pid: int, stdin: IO[bytes], stdout: IO[bytes]) -> None:
        self._server = server
        self.pid = pid
        self.stdin: IO[bytes] | None = stdin
        self.stdout: IO[bytes] | None = stdout
        self.returncode: int | None = None
        self.args = ["forked", str(pid)]

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self._server.exit_code(self.pid, 0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self.returncode = self._server.exit_code(self.pid, timeout)
            if self.returncode is None:
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return self.returncode

    @property
    def status_known(self) -> bool:
        """False once it has ended after its server: its :attr:`returncode` (1) then says nothing."""
        return self.pid not in self._server.orphaned

    def kill(self) -> None:
        _kill(self.pid)


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def server_command(module: str) -> list[str]:
    """The command of a fork server whose children run ``module.main``; the socket's descriptor is appended. The
    module's name is in it, so the children (which keep it) are found as that module's processes."""
    return [sys.executable, "-m", "core.forkserver", module]


if __name__ == "__main__":
    sys.exit(serve(int(sys.argv[2]), sys.argv[1]))

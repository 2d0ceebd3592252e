"""A fork server for torch workers: one process per parent imports torch once and forks a worker per request, so
a torch job's worker is ready in milliseconds instead of paying torch's import (~3 s of CPU) each time.

Why not :mod:`multiprocessing`'s forkserver: the lab's worker is a process with its own stdin/stdout protocol, its
own session (a kill takes the ranks it launched) and a stderr file; the parent hands those three descriptors over
a Unix socket and gets back the pid, then the exit status when the server reaps it.

What keeps a fork sound: the server imports torch and nothing of the lab, and never touches CUDA (a process forked
after CUDA's initialisation cannot use it). Each child first takes the environment its parent sent — the job's
``CUDA_VISIBLE_DEVICES``, ``PYTORCH_CUDA_ALLOC_CONF``, ``NVIDIA_TF32_OVERRIDE`` and memory cap are read when CUDA and
the job start, after the fork — then imports the worker. The server ends when its parent's end of the socket
closes; its children watch their parent and end after it. ``GPULAB_FORK_SERVER=0`` turns it off: each worker is
then a fresh interpreter, as it is where the server cannot start.
"""

from __future__ import annotations

import atexit
import importlib
import json
import os
import queue
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

FORK_SERVER_ENV = "GPULAB_FORK_SERVER"
_MESSAGE_BYTES = 1 << 20  # one request: the child's environment and arguments
_REAP_EVERY_S = 0.05


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
        _send(sock, {"pid": pid})


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
        self._spawning = threading.Lock()
        self._pids: queue.Queue[int | None] = queue.Queue()
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
                self._pids.put(None)
                return
            answer = json.loads(message)
            if "exit" in answer:
                with self._ended:
                    self._codes[answer["exit"]] = answer["code"]
                    self._ended.notify_all()
            else:
                self._pids.put(answer["pid"])

    def spawn(self, args: list[str], env: dict[str, str], cwd: str, fds: tuple[int, int, int], timeout_s: float) -> int:
        """A child running with ``fds`` as its stdin, stdout and stderr; its pid."""
        with self._spawning:
            if self.down:
                raise ForkServerDown("the fork server has ended")
            request = json.dumps({"args": args, "env": env, "cwd": cwd}).encode()
            try:
                socket.send_fds(self._sock, [request], list(fds))
                pid = self._pids.get(timeout=timeout_s)
            except (OSError, queue.Empty) as exc:
                raise ForkServerDown(f"the fork server did not answer: {exc}") from None
            if pid is None:
                raise ForkServerDown("the fork server has ended")
            return pid

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
        try:
            self._sock.shutdown(socket.SHUT_RDWR)  # the server sees the end of its input and exits
        except OSError:
            pass
        self._sock.close()
        try:
            self.proc.wait(timeout=5)
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
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def server_command(module: str) -> list[str]:
    """The command of a fork server whose children run ``module.main``; the socket's descriptor is appended. The
    module's name is in it, so the children (which keep it) are found as that module's processes."""
    return [sys.executable, "-m", "core.forkserver", module]


if __name__ == "__main__":
    sys.exit(serve(int(sys.argv[2]), sys.argv[1]))

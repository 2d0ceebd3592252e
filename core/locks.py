"""The device lock: an exclusive ``flock`` on ``<lock_dir>/<device>.lock`` means "a GPU Lab job is running
on this device", across processes and stores. The worker holds it for every job; the interconnect
experiment also takes the lock of every other GPU it uses."""

from __future__ import annotations

import fcntl
import os
from contextlib import contextmanager
from pathlib import Path

from core.paths import lock_dir


def lock_path(torch_device: str) -> Path:
    """The file whose exclusive flock means "a GPU Lab job is running on this device"."""
    return lock_dir() / f"{torch_device.replace(':', '')}.lock"


def _open_lock(torch_device: str) -> int:
    return os.open(lock_path(torch_device), os.O_RDWR | os.O_CREAT, 0o644)


def try_lock(torch_device: str) -> int | None:
    """The device's lock if no other process holds it: the open file descriptor (closing it releases the
    lock), or None while another GPU Lab job runs there."""
    fd = _open_lock(torch_device)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BaseException as exc:
        os.close(fd)
        if isinstance(exc, BlockingIOError):
            return None
        raise
    return fd


@contextmanager
def device_lock(torch_device: str, on_wait):
    fd = try_lock(torch_device)
    if fd is None:
        on_wait(f"waiting for {torch_device}: another GPU Lab process is running a job on it")
        fd = _open_lock(torch_device)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(fd)
            raise
    try:
        yield
    finally:
        os.close(fd)  # closing releases the lock


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (one of another user's counts: it exists, it is just not ours to signal)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True

"""The CPU time one import of outside files may take: proportional to the bytes its reader consumes, enforced by
the kernel on the import's own worker process.

Every limit on a file's contents bounds what it makes the lab hold; this bounds what reading it may cost, for
the readers' costs no limit foresaw (a 178-byte trace once took 77 s of CPU, a 332-byte pickle 2^40 hashing
steps). The budget is ``import_cpu_s`` + ``import_cpu_s_per_100mb`` per 100 MB read (both in
:class:`core.limits.Limits`, changed through ``GPULAB_LIMITS``), counted as the reader reads: a watcher reads,
several times a second, how far each of the import's files has been read (its descriptors' offsets) or mapped, a gzip
file counted at what the compressed bytes read may inflate to, and raises the limit with it. So a pickle that ends
at 1.5 MB of a file with a 1 TiB sparse tail, or a gzip member never reached, buys nothing (they bought 219,962 and
6,353 s when the budget came from the files' sizes). The files' sizes still bound it from above.
``RLIMIT_CPU`` sends SIGXCPU at the budget (turned into a refusal naming the limit) and SIGKILL 10 s past the
most the files could buy, should the reader be stuck in C code: an import runs in a worker of its own, discarded
after it (Linux only; elsewhere nothing is enforced). Processes the reader starts (the pickle guard) get the same
budget as it grows.
"""

from __future__ import annotations

import os
import re
import signal
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from core.errors import ConfigError
from core.intake import GZIP_MAGIC, inflated_limit
from core.limits import LIMITS, LIMITS_ENV

GRACE_S = 10  # from SIGXCPU to SIGKILL: time for the refusal to be reported
WATCH_S = 0.1  # how often the bytes read are counted
_MAPPING = re.compile(r"^([0-9a-f]+)-([0-9a-f]+) \S+ ([0-9a-f]+) \S+ (\d+)")  # a line of /proc/self/maps


class OverBudget(ConfigError):
    """An import that used its CPU time: a bad-input refusal (exit 2), its worker replaced."""


def read_bytes(path: Path) -> int:
    """The bytes reading ``path`` may take: its size, or for a gzip file what it may inflate to."""
    try:
        size = path.stat().st_size
        with path.open("rb") as fh:
            gzip = fh.read(2) == GZIP_MAGIC
    except OSError:
        return 0  # the reader names the problem
    return inflated_limit(size) if gzip else size


def budget_s(paths: Sequence[str]) -> int:
    """Whole seconds of CPU time (what ``RLIMIT_CPU`` counts) for reading ``paths`` to their ends: the most the
    import may take."""
    return seconds_for(sum(read_bytes(Path(p)) for p in paths))


def seconds_for(read: int) -> int:
    """Whole seconds of CPU time an import that has read ``read`` bytes may take."""
    return max(1, round(LIMITS.import_cpu_s + LIMITS.import_cpu_s_per_100mb * read / 100e6))


@dataclass
class _File:
    """One file of the import, known by its inode: how far it has been read (its furthest offset or mapping)."""

    ino: int
    size: int
    gzip: bool
    reached: int = 0

    def credit(self) -> int:
        """The bytes its reader consumed: the offset reached, for gzip what those bytes may inflate to."""
        return min(inflated_limit(self.size), LIMITS.inflate_ratio * self.reached) if self.gzip else self.reached


@dataclass
class Consumed:
    """The bytes an import's reader has consumed, counted from /proc as it reads (:func:`cpu_limited`)."""

    files: list[_File]

    @classmethod
    def of(cls, paths: Sequence[str]) -> Consumed:
        files = []
        for p in paths:
            try:
                info = os.stat(p)
                with open(p, "rb") as fh:
                    gzip = fh.read(2) == GZIP_MAGIC
            except OSError:
                continue  # the reader names the problem
            files.append(_File(info.st_ino, info.st_size, gzip))
        return cls(files)

    def bytes(self) -> int:
        """The bytes consumed so far (each file at the furthest it was seen read)."""
        # by inode alone: an overlay file system (a container's) may name another device in /proc/self/maps than
        # stat() does; another file with the same inode elsewhere could only raise the budget, never past the most
        by_inode = {f.ino: f for f in self.files}
        for reached, key in (*self._offsets(), *self._mapped()):
            f = by_inode.get(key)
            if f is not None:
                f.reached = min(f.size, max(f.reached, reached))
        return sum(f.credit() for f in self.files)

    @staticmethod
    def _offsets() -> Iterator[tuple[int, int]]:
        """(offset, inode) of each descriptor this process holds open."""
        for name in os.listdir("/proc/self/fd"):
            try:
                info = os.stat(f"/proc/self/fd/{name}")
                with open(f"/proc/self/fdinfo/{name}") as fh:
                    pos = int(fh.readline().split()[1])
            except (OSError, ValueError, IndexError):
                continue  # closed meanwhile
            yield pos, info.st_ino

    @staticmethod
    def _mapped() -> Iterator[tuple[int, int]]:
        """(end of the mapping in the file, inode) of each file mapping of this process."""
        with open("/proc/self/maps") as fh:
            for line in fh:
                m = _MAPPING.match(line)
                if m and m.group(4) != "0":
                    start, end, offset = int(m.group(1), 16), int(m.group(2), 16), int(m.group(3), 16)
                    yield offset + end - start, int(m.group(4))


@contextmanager
def cpu_limited(paths: Sequence[str]) -> Iterator[int | None]:
    """Run an import under its CPU budget, raised as its reader consumes its files (yields the most it may reach, in
    seconds, or None where it cannot be enforced)."""
    try:
        import resource
    except ImportError:
        yield None
        return
    most = budget_s(paths)
    used = resource.getrusage(resource.RUSAGE_SELF)
    start = int(used.ru_utime + used.ru_stime)
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if hard != resource.RLIM_INFINITY and start + most + GRACE_S > hard:
        yield None  # the operator's own, stricter limit rules
        return
    consumed = Consumed.of(paths)
    granted = [seconds_for(0)]

    def over(signum, frame) -> None:
        signal.signal(signal.SIGXCPU, signal.SIG_IGN)  # one refusal; SIGKILL follows if it is not heard
        names = ", ".join(Path(p).name for p in paths)
        raise OverBudget(
            f"reading {names} took more than {granted[0]:,} s of CPU time, the import_cpu_s limit "
            f"({LIMITS.import_cpu_s:g} s + {LIMITS.import_cpu_s_per_100mb:g} s per 100 MB it read; "
            f"{LIMITS_ENV} changes it)"
        )

    def grant(seconds: int) -> None:
        granted[0] = seconds
        resource.setrlimit(resource.RLIMIT_CPU, (start + seconds, start + most + GRACE_S))
        for child in _children():  # the pickle guard and the like: a fresh process, the same budget
            try:
                resource.prlimit(child, resource.RLIMIT_CPU, (seconds, start + most + GRACE_S))
            except (OSError, ValueError):
                continue  # ended meanwhile

    previous = signal.signal(signal.SIGXCPU, over)
    grant(granted[0])  # the worker is discarded after the import
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(WATCH_S):
            seconds = min(most, seconds_for(consumed.bytes()))
            if seconds > granted[0]:
                grant(seconds)

    watcher = threading.Thread(target=watch, daemon=True, name="import-budget")
    watcher.start()
    try:
        yield most
    finally:
        stop.set()
        watcher.join()
        signal.signal(signal.SIGXCPU, previous)


def _children() -> list[int]:
    """The processes this one started that still run."""
    found = []
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/children") as fh:
                found += [int(pid) for pid in fh.read().split()]
        except OSError:
            continue
    return found

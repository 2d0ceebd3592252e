"""The CPU time one import of outside files may take: proportional to the bytes it may read, enforced by the
kernel on the import's own worker process.

Every limit on a file's contents bounds what it makes the lab hold; this bounds what reading it may cost, for
the readers' costs no limit foresaw (a 178-byte trace once took 77 s of CPU, a 332-byte pickle 2^40 hashing
steps). The budget is ``import_cpu_s`` + ``import_cpu_s_per_100mb`` per 100 MB, a gzip file counted at what it
may inflate to (both in :class:`core.intake.Limits`, changed through ``GPULAB_LIMITS``).
``RLIMIT_CPU`` sends SIGXCPU at the budget (turned into a refusal naming the limit) and SIGKILL 10 s later,
should the reader be stuck in C code: an import runs in a worker of its own, discarded after it (Linux only;
elsewhere nothing is enforced).
"""

from __future__ import annotations

import signal
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from core.errors import ConfigError
from core.intake import GZIP_MAGIC, LIMITS, LIMITS_ENV, inflated_limit

GRACE_S = 10  # from SIGXCPU to SIGKILL: time for the refusal to be reported


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
    """Whole seconds of CPU time (what ``RLIMIT_CPU`` counts) for reading ``paths``."""
    base, per = LIMITS.import_cpu_s, LIMITS.import_cpu_s_per_100mb
    total = sum(read_bytes(Path(p)) for p in paths)
    return max(1, round(base + per * total / 100e6))


@contextmanager
def cpu_limited(paths: Sequence[str]) -> Iterator[int | None]:
    """Run an import under its CPU budget (yields it in seconds, or None where it cannot be enforced)."""
    try:
        import resource
    except ImportError:
        yield None
        return
    seconds = budget_s(paths)
    used = resource.getrusage(resource.RUSAGE_SELF)
    soft = int(used.ru_utime + used.ru_stime) + seconds
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if hard != resource.RLIM_INFINITY and soft + GRACE_S > hard:
        yield None  # the operator's own, stricter limit rules
        return

    def over(signum, frame) -> None:
        signal.signal(signal.SIGXCPU, signal.SIG_IGN)  # one refusal; SIGKILL follows if it is not heard
        names = ", ".join(Path(p).name for p in paths)
        raise OverBudget(
            f"reading {names} took more than {seconds:,} s of CPU time, the import_cpu_s limit "
            f"({LIMITS.import_cpu_s:g} s + {LIMITS.import_cpu_s_per_100mb:g} s per 100 MB it may read; "
            f"{LIMITS_ENV} changes it)"
        )

    previous = signal.signal(signal.SIGXCPU, over)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, soft + GRACE_S))  # the worker is discarded after the import
    try:
        yield seconds
    finally:
        signal.signal(signal.SIGXCPU, previous)

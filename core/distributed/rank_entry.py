"""The first instructions of every rank the lab launches: ``python -m core.distributed.rank_entry``.

A rank must die with the launcher that started it from its first instruction, not after it has imported
torch (seconds, hundreds of MiB): a job cancelled while its ranks were still importing left them
running with parent 1 for minutes. So this module imports nothing heavy: it asks the kernel for
``PR_SET_PDEATHSIG`` (SIGKILL when the parent dies, even a SIGKILLed one), checks that the parent it
has is still the launcher that started it (``GPULAB_RANK_PARENT``, the pid the launcher set), and only
then imports the rank program (:mod:`core.distributed.rank`) and runs it.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1
PARENT_ENV = "GPULAB_RANK_PARENT"


def die_with_parent(sig: int, expected_parent: int | None = None) -> None:
    """Linux: the kernel sends ``sig`` to this process when the launcher that started it dies.

    ``expected_parent``: the launcher's pid; a process whose parent is already another one (the launcher
    died before the request took effect, and the process was handed to init) exits at once."""
    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    except (OSError, AttributeError):
        return
    now = os.getppid()
    if now != parent or (expected_parent is not None and now != expected_parent):
        os._exit(1)


def expected_parent(environ=os.environ) -> int | None:
    try:
        return int(environ[PARENT_ENV])
    except (KeyError, ValueError):
        return None


def main() -> None:
    die_with_parent(signal.SIGKILL, expected_parent())
    from torch.distributed.elastic.multiprocessing.errors import record

    from core.distributed.rank import main as rank_main

    sys.exit(record(rank_main)())


if __name__ == "__main__":
    main()

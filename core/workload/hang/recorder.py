"""Run a job with torch's flight recorder on, so that every rank's dump lands in one folder when it hangs.

``python -m core record --flight-recorder DIR -- torchrun --nproc-per-node 8 train.py`` runs the command with
the recorder's variables set for it and every process it starts (torchrun hands its environment to the ranks):

- ``TORCH_FR_BUFFER_SIZE`` (and ``TORCH_NCCL_TRACE_BUFFER_SIZE``, its name before torch 2.6): the last N
  collectives kept per process (a ring buffer; off when unset);
- ``TORCH_FR_DUMP_TEMP_FILE`` (and ``TORCH_NCCL_DEBUG_INFO_TEMP_FILE``): where a rank writes its dump, the rank
  appended: ``DIR/rank_0``, ``DIR/rank_1``, … — the folder ``python -m core hang DIR`` reads;
- ``TORCH_NCCL_DUMP_ON_TIMEOUT=1``: NCCL's watchdog dumps every rank when a collective times out.

Variables the user set already are kept. Exit code: the command's.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

DEFAULT_BUFFER = 2000  # collectives kept per process: a few MB with stacks, hundreds of steps of a typical job
PREFIX = "rank_"


def recorder_env(folder: Path, buffer: int) -> dict[str, str]:
    """The variables that turn the recorder on and send each rank's dump to ``folder``."""
    prefix = str(folder / PREFIX)
    return {
        "TORCH_FR_BUFFER_SIZE": str(buffer),
        "TORCH_NCCL_TRACE_BUFFER_SIZE": str(buffer),
        "TORCH_FR_DUMP_TEMP_FILE": prefix,
        "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": prefix,
        "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
    }


def run_with_recorder(command: list[str], folder: str, buffer: int = DEFAULT_BUFFER) -> int:
    """Run ``command`` with the recorder on; 2 when the folder cannot be used (nothing is run)."""
    where = Path(folder).expanduser().resolve()
    if where.exists() and not where.is_dir():
        print(f"error: --flight-recorder {folder}: not a folder", file=sys.stderr)
        return 2
    if buffer < 1:
        print("error: --buffer: at least 1 collective", file=sys.stderr)
        return 2
    try:
        where.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        print(f"error: --flight-recorder {folder}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    env = {**recorder_env(where, buffer), **os.environ}  # the user's own settings win
    print(f"flight recorder on: last {buffer:,} collectives per rank; dumps in {where}", file=sys.stderr)
    try:
        code = subprocess.call(command, env=env)
    except OSError as exc:
        print(f"error: cannot run {command[0]}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    dumps = sorted(p.name for p in where.glob(f"{PREFIX}*"))
    if dumps:
        print(f"{len(dumps)} dump(s) in {where}: python -m core hang {where}", file=sys.stderr)
    return code

"""The ranks' work folders, ``<tmp>/gpulab-ranks-<pid>-…``: each names the process that launched its ranks, so that
the parent of a killed worker can remove that worker's folders (:func:`remove_work_folders`) and a launch can sweep
the folders of launchers no longer alive (:func:`core.distributed.launch.sweep_work_folders`). Kept apart from the
launcher: every job's end in the parent asks for this, and the launcher's imports (psutil, torch's elastic agent
when it runs) are no part of that."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

WORK_PREFIX = "gpulab-ranks-"


def work_folders(owner: int | None = None) -> list[tuple[Path, int | None]]:
    """The rank work folders in the temporary directory, with the pid of the process that made each (only
    ``owner``'s where given)."""
    found = []
    try:
        entries = list(Path(tempfile.gettempdir()).glob(WORK_PREFIX + "*"))
    except OSError:
        return []
    for path in entries:
        pid_text = path.name[len(WORK_PREFIX) :].split("-", 1)[0]
        pid = int(pid_text) if pid_text.isdigit() else None
        if owner is None or pid == owner:
            found.append((path, pid))
    return found


def remove_work_folders(owner: int) -> None:
    """Remove the work folders of the launcher ``owner`` (a worker that was killed, so it could not)."""
    for path, _ in work_folders(owner):
        shutil.rmtree(path, ignore_errors=True)

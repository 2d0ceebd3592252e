"""Which of the server's files the dashboard may read by path: only those under the directories the operator
lists in ``GPULAB_IMPORT_DIRS`` (``os.pathsep``-separated; none by default, so the path field is off).

Whoever reaches the dashboard types the path, so a path is resolved (every link followed) before it is
checked, and a path outside is refused with the same words whether it exists or not: the refusal names
the allowed directories, never a byte, key, size or the existence of the file. The CLI does not ask: its
user names files they can read anyway.
"""

from __future__ import annotations

import os
from pathlib import Path

from core.errors import ConfigError

ENV = "GPULAB_IMPORT_DIRS"


def listed() -> tuple[Path, ...]:
    """The directories the operator allows, resolved; empty when ``GPULAB_IMPORT_DIRS`` is unset or blank."""
    entries = [e for e in os.environ.get(ENV, "").split(os.pathsep) if e.strip()]
    return tuple(Path(e.strip()).expanduser().resolve() for e in entries)


def off_text() -> str:
    """What the page says instead of the field while no directory is listed."""
    return f"Reading a file on this box by its path is off: list the directories it may read in {ENV}."


def allowed(given: str, dirs: tuple[Path, ...] | None = None) -> Path:
    """``given`` resolved (links followed), if it lies under one of ``dirs`` (default: :func:`listed`); else a
    :class:`ConfigError` naming only the allowed directories."""
    dirs = listed() if dirs is None else dirs
    try:
        resolved = Path(given).expanduser().resolve()
    except (OSError, RuntimeError, ValueError):  # a link loop, a NUL byte: refused like any path outside
        resolved = None
    if resolved is None or not any(resolved.is_relative_to(d) for d in dirs):
        where = ", ".join(str(d) for d in dirs) or f"none (set {ENV})"
        raise ConfigError(f"path: not under the import directories this dashboard allows: {where}")
    return resolved

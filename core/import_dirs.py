"""Which of the server's files the dashboard may read by path: only those under the directories the operator
lists in ``GPULAB_IMPORT_DIRS`` (``os.pathsep``-separated; none by default, so the path field is off).

Whoever reaches the dashboard types the path, so a path is resolved (every link followed) before it is
checked, and a path outside is refused with the same words whether it exists or not: the refusal names
the allowed directories, never a byte, key, size or the existence of the file. The CLI does not ask: its
user names files they can read anyway.

The list is resolved once per value of the variable, and an entry is refused (said on the page) when it does not
exist then or when another user could swap what it names: a folder on its way writable by others (group or world,
without the sticky bit of ``/tmp``), or a folder or link on its way owned by another user than root or this one. A
path checked on the page is opened later, by a worker: the dashboard hands its workers the allowed directories
as resolved (:data:`CONFINE_ENV`), and the worker opens each file without following a link anywhere on its path,
checks the real path of what it opened against them, and gives the reader that very file (:func:`held`), so a
folder swapped for a link while the import waited in the queue opens nothing.
"""

from __future__ import annotations

import functools
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from core.errors import ConfigError

ENV = "GPULAB_IMPORT_DIRS"
# The directories a dashboard's import workers may open files under, resolved by the dashboard: the listed ones,
# its uploads folder and the examples. Unset (the CLI's workers): a worker opens what its user names.
CONFINE_ENV = "GPULAB_IMPORT_CONFINE"


def listed() -> tuple[Path, ...]:
    """The directories the operator allows, resolved; empty when ``GPULAB_IMPORT_DIRS`` is unset or blank."""
    return _resolved(os.environ.get(ENV, ""))[0]


def refused_entries() -> tuple[str, ...]:
    """The entries of ``GPULAB_IMPORT_DIRS`` left out, each with why (for the page to say)."""
    return _resolved(os.environ.get(ENV, ""))[1]


@functools.lru_cache(maxsize=16)
def _resolved(text: str) -> tuple[tuple[Path, ...], tuple[str, ...]]:
    """Each entry resolved once (per value of the variable: a folder created or swapped later changes nothing)."""
    dirs, refused = [], []
    for entry in (e.strip() for e in text.split(os.pathsep)):
        if not entry:
            continue
        given = Path(os.path.abspath(os.path.expanduser(entry)))
        try:
            resolved = given.resolve(strict=True)
        except (OSError, RuntimeError, ValueError):
            refused.append(f"{entry}: does not exist")
            continue
        try:
            problem = _swappable(given) or _swappable(resolved) or (None if resolved.is_dir() else "not a folder")
        except OSError as exc:  # changed while it was checked
            problem = f"cannot be checked ({exc.strerror or exc})"
        if problem:
            refused.append(f"{entry}: {problem}")
        else:
            dirs.append(resolved)
    return tuple(dirs), tuple(refused)


def _swappable(path: Path) -> str | None:
    """Why another user could change what ``path`` names (every folder and link on its way, itself included), or
    None."""
    me = os.getuid()
    for part in (*reversed(path.parents), path):
        info = os.lstat(part)
        if info.st_uid not in (0, me):
            return f"{part} belongs to another user"
        if stat.S_ISDIR(info.st_mode) and info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            if not info.st_mode & stat.S_ISVTX:
                return f"{part} is writable by other users"
    return None


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
        raise _outside(dirs)
    return resolved


def _outside(dirs: Sequence[Path]) -> ConfigError:
    where = ", ".join(str(d) for d in dirs) or f"none (set {ENV})"
    return ConfigError(f"path: not under the import directories this dashboard allows: {where}")


def confinement(*own: Path) -> dict[str, str]:
    """The environment a dashboard hands its import workers: the listed directories and its ``own`` (uploads,
    examples: the lab's own, which may not exist yet), resolved now, once."""
    dirs = [*listed(), *(folder.resolve() for folder in own)]
    return {CONFINE_ENV: os.pathsep.join(str(d) for d in dirs)}


def confined() -> tuple[Path, ...] | None:
    """The directories this worker may open files under, as its dashboard resolved them; None when unconfined."""
    text = os.environ.get(CONFINE_ENV)
    return None if text is None else tuple(Path(d) for d in text.split(os.pathsep) if d)


MOVED = (
    "path: the file is not under the import directories this dashboard allows, or not as it was checked (a link on "
    "its way, a folder swapped since): nothing was read"
)


def open_confined(given: str, dirs: Sequence[Path]) -> int:
    """A descriptor of the regular file ``given``, opened without following a link at any step of its path, whose
    real path lies under one of ``dirs``; else :class:`ConfigError` saying so (and naming no folder of the server's:
    ``dirs`` holds its uploads folder too)."""
    parts = Path(os.path.normpath(os.path.abspath(given))).parts
    if len(parts) < 2:
        raise ConfigError(MOVED)
    try:
        folder = os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            for name in parts[1:-1]:
                inner = os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder)
                os.close(folder)
                folder = inner
            fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder)
        finally:
            os.close(folder)
    except (OSError, ValueError):  # a link on its way (ELOOP, ENOTDIR), no such file: the same words
        raise ConfigError(MOVED) from None
    try:
        real: Path | None = Path(os.readlink(f"/proc/self/fd/{fd}"))
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
    except OSError:
        real, regular = None, False
    if real is None or not regular or not any(real.is_relative_to(d) for d in dirs):
        os.close(fd)
        raise ConfigError(MOVED)
    return fd


@contextmanager
def held(paths: Sequence[str], dirs: Sequence[Path]) -> Iterator[dict[str, str]]:
    """Each of ``paths`` opened by :func:`open_confined` and held open while the import reads: yields, for each, a
    path to read it by, a link (in a folder of this process's own) to the descriptor itself under the file's own
    name and folder name, so the reader reads the file that was checked and names it as the user did."""
    own = Path(tempfile.mkdtemp(prefix="gpulab-import-"))
    fds: list[int] = []
    try:
        moved, folders = {}, {}
        for given in paths:
            fds.append(open_confined(given, dirs))
            parent = os.path.dirname(os.path.abspath(given))
            where = own / str(folders.setdefault(parent, len(folders))) / Path(parent).name
            where.mkdir(parents=True, exist_ok=True)
            link = where / Path(given).name
            link.symlink_to(f"/proc/{os.getpid()}/fd/{fds[-1]}")
            moved[given] = str(link)
        yield moved
    finally:
        for fd in fds:
            os.close(fd)
        shutil.rmtree(own, ignore_errors=True)

"""The file an import names: checked to exist when its config is built (the dashboard, the CLI), read in
the worker with the reason a refused file gives turned into the run's bad-input error, and named in the run by
its name and digest, never by where it lay (an upload's copy is deleted once it is imported)."""

from __future__ import annotations

import contextlib
import importlib
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from core.errors import ConfigError, InputRefused
from core.experiment import Progress
from core.limits import LIMITS
from core.units import bytes_text

T = TypeVar("T")
PROGRESS_EVERY_S = 0.5


def check_file(path: str, what: str) -> None:
    """The file an import names must exist here (its content is judged in the worker)."""
    if not path:
        raise ConfigError(f"path: name the {what} file to import")
    try:
        exists = os.path.isfile(path)
    except (ValueError, OSError):
        exists = False
    if not exists:
        raise ConfigError(f"path: {path!r} is not a file on this machine")


class _Latest:
    """What a reading thread last said of its progress (one attribute: written there, read here, atomically)."""

    text = ""


OWN_SHA256_BYTES = 64 << 20  # files up to this size are digested without OpenSSL (see _hasher)


def sha256(path: Path) -> str:
    """The digest of the file as it lies (compressed or not), as examples/ lists its files'."""
    try:
        with open(path, "rb") as fh:
            digest = _hasher(os.fstat(fh.fileno()).st_size)
            while chunk := fh.read(1 << 20):
                digest.update(chunk)
            return digest.hexdigest()
    except OSError as exc:
        raise ConfigError(f"{path.name}: {exc.strerror or exc}") from None


def _hasher(size: int):
    """A SHA-256 for a file of ``size`` bytes: CPython's own up to :data:`OWN_SHA256_BYTES`, since hashlib loads
    OpenSSL's libcrypto, 3.4 MiB resident in the worker for good (a third of what a small trace's import holds
    above the interpreter's), while CPython's is 9× slower (0.07 s on 10 MB here, against 0.008); OpenSSL's past it."""
    if size <= OWN_SHA256_BYTES:
        for name in ("_sha2", "_sha256"):  # its module's name from Python 3.12 on, and before
            with contextlib.suppress(ImportError):
                return importlib.import_module(name).sha256()
    import hashlib

    return hashlib.sha256()


def identity(path: Path, size: int, digest: str) -> dict:
    """What a run keeps of the file it imported, in its meta: its name, size and digest (stored once)."""
    return {"file": path.name, "file_bytes": size, "file_sha256": digest}


def read_imported(path: Path, read: Callable[[Path, Callable[[str], None]], T], total: int):
    """Yield progress while ``read(path, progress)`` parses the file in a thread of its own: the first step,
    then what ``read`` last told ``progress`` (events so far), every :data:`PROGRESS_EVERY_S`, so a file of a
    gigabyte does not sit at "reading" for twenty seconds. Returns (what it read, the file's :func:`identity`),
    the file digested once it was read; a refusal becomes the run's bad-input error."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise ConfigError(f"{path.name}: {exc.strerror or exc}") from None
    yield Progress(0, total, f"reading {path.name} ({bytes_text(size)})")
    latest, outcome = _Latest(), {}

    def work() -> None:
        try:
            outcome["value"] = read(path, lambda text: setattr(latest, "text", text))
            outcome["digest"] = sha256(path)  # only a file the reader took: a refused one may be any size
        except BaseException as exc:  # raised again below, in the experiment's own thread
            outcome["error"] = exc

    thread = threading.Thread(target=work, name=f"reading {path.name}", daemon=True)
    thread.start()
    shown = ""
    thread.join(PROGRESS_EVERY_S)
    while thread.is_alive():
        if latest.text != shown:
            shown = latest.text
            yield Progress(0, total, f"reading {path.name} ({bytes_text(size)}): {shown}")
        thread.join(PROGRESS_EVERY_S)
    error = outcome.get("error")
    if isinstance(error, InputRefused):
        raise ConfigError(f"{path.name}: {error}") from None
    if error is not None:
        raise error
    return outcome["value"], identity(path, size, outcome["digest"])


def job_files(paths: list[str] | tuple[str, ...], kind: str, hint: str) -> list[Path]:
    """The files of an import of one job's ranks (``kind``: "rank trace", "dump"): a folder's regular, visible
    files (sorted; its subfolders are not read), or the files named; refused, with ``hint`` on what to give, when
    there are none, more than the ``rank_files`` limit, one named twice, a path that is neither, or a folder that
    holds a link or a special file (named: a link is not followed, nor skipped without a word)."""
    files: list[Path] = []
    for given in paths:
        p = Path(given)
        try:
            if p.is_dir():
                files += _folder_files(p, kind)
            elif p.is_file():
                files.append(p)
            else:
                raise ConfigError(f"paths: {given!r} is neither a file nor a folder on this machine")
        except OSError as exc:
            raise ConfigError(f"paths: {given!r}: {exc.strerror or exc}") from None
        if len(files) > LIMITS.rank_files:
            raise ConfigError(
                f"paths: more than {LIMITS.rank_files:,} files (the rank_files limit): give {hint}, or a folder "
                "holding only them"
            )
    if not files:
        raise ConfigError(f"paths: no {kind} files found (a folder of one job's {kind} files, or the files)")
    if len({f.resolve() for f in files}) < len(files):
        raise ConfigError("paths: a file is named twice")
    return files


def _folder_files(folder: Path, kind: str) -> list[Path]:
    """A folder's regular, visible files, sorted; ConfigError naming a link or a special file among them."""
    files = []
    for f in sorted(folder.iterdir()):
        if f.name.startswith("."):
            continue
        if f.is_symlink():
            raise ConfigError(
                f"paths: {f.name} in {folder.name} is a link: the {kind} files of a folder are read where they lie, "
                "never through a link (name the file it points to, or copy it into the folder)"
            )
        if f.is_file():
            files.append(f)
        elif not f.is_dir():
            raise ConfigError(f"paths: {f.name} in {folder.name} is not a regular file (a pipe, socket or device)")
    return files


def names_of(paths: list[Path]) -> str:
    """The import's name: the folder when every file lies in one, else the first file and how many."""
    parents = {os.path.dirname(p) for p in paths}
    return Path(parents.pop()).name if len(parents) == 1 else f"{paths[0].name} +{len(paths) - 1}"

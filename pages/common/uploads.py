"""Uploaded files on their way to an import: written to disk in chunks, bounded, deleted once imported.

The dashboard only stores the bytes; a worker parses them (``memory-snapshot``, ``profiler-trace``), so a
hostile or huge file never runs in the server's process. The files of one import are one batch under
``<data dir>/uploads/<batch>``, each in a folder of its own keeping its name, so the run names the file the user
uploaded (and the ranks of one job, uploaded together, are named by their files, not by a shared folder). What is
kept there is bounded by count of batches and by bytes, the oldest going first, but never a batch whose import is
still queued or running: while those alone fill the bounds, a new batch is refused in words. The server drops its
own copy as soon as a file is on disk.
"""

from __future__ import annotations

import re
import shutil
import threading
import uuid
from pathlib import Path

import streamlit as st

from core.paths import data_dir
from core.units import GIB, MIB, exact_size_text

UPLOADS_KEPT = 5  # batches of uploads kept (each is deleted once its import ends)
UPLOADS_MAX_BYTES = 2 * GIB  # and at most this many bytes of them: the oldest go first
CHUNK_BYTES = 1 << 20
UPLOAD_LIMIT_MB = 1024  # .streamlit/config.toml server.maxUploadSize, in MiB (docs/OPERATIONS.md, "Uploads")
UPLOAD_LIMIT_TEXT = exact_size_text(UPLOAD_LIMIT_MB * MIB)  # "1 GiB": what the pages say of it


def folder() -> Path:
    return data_dir() / "uploads"


class UploadsBusy(OSError):
    """The batches still waiting for their import fill the bounds: a new one is refused, none of them dropped."""


_waiting: set[Path] = set()  # the batches whose import is queued or running: never pruned
_lock = threading.Lock()


def save_upload(uploaded) -> Path:
    """One upload as a batch of its own (:func:`save_batch`)."""
    return save_batch([uploaded])[0]


def save_batch(files: list) -> list[Path]:
    """Write the uploads of one import as ``<data dir>/uploads/<batch>/<n>/<its name>`` and return their paths.

    Each file is copied in 1 MiB chunks (``read(n)``, never ``getbuffer()``: no second whole copy in the
    server's memory). The batch is kept until :func:`delete_when_done` or :func:`remove` drops it; older batches
    past the bounds go first, and :class:`UploadsBusy` refuses this one where the batches still waiting fill them.
    """
    where = folder()
    batch = where / uuid.uuid4().hex[:12]
    paths = []
    try:
        for i, uploaded in enumerate(files):
            own = batch / str(i)
            own.mkdir(parents=True)
            name = re.sub(r"[^A-Za-z0-9._-]+", "_", uploaded.name)[-80:] or "upload"
            paths.append(own / name)
            uploaded.seek(0)
            with open(paths[-1], "wb") as out:
                while chunk := uploaded.read(CHUNK_BYTES):
                    out.write(chunk)
        with _lock:
            _prune(where, keep=batch)
            _waiting.add(batch)
    except BaseException:
        shutil.rmtree(batch, ignore_errors=True)  # a disk that filled, or no room: no half batch is kept
        raise
    return paths


def _batch(path: Path) -> Path:
    """The batch folder an upload's path lies in (a file left by an earlier version: the path itself)."""
    for parent in path.parents:
        if parent.parent == folder():
            return parent
    return path


def _delete(path: Path) -> None:
    """An upload's whole batch."""
    batch = _batch(path)
    with _lock:
        _waiting.discard(batch)
    if batch.is_dir():
        shutil.rmtree(batch, ignore_errors=True)
    else:
        batch.unlink(missing_ok=True)


def _prune(where: Path, keep: Path) -> None:
    """Drop the oldest batches past the count or the bytes; the batch just written and those still waiting for
    their import stay, and where they alone are past the bounds the new batch is refused."""
    held = []
    for batch in where.iterdir():
        try:
            files = [f.stat() for f in batch.rglob("*") if f.is_file()] if batch.is_dir() else [batch.stat()]
        except FileNotFoundError:  # deleted meanwhile (its import ended)
            continue
        held.append((max((f.st_mtime for f in files), default=0.0), sum(f.st_size for f in files), batch))
    kept, total = 0, 0
    waiting = [h for h in held if h[2] in _waiting]
    if waiting and (len(waiting) + 1 > UPLOADS_KEPT or sum(h[1] for h in waiting) > UPLOADS_MAX_BYTES):
        raise UploadsBusy(
            f"{len(waiting)} earlier imports of uploads are still waiting to be read; import again once one has been"
        )
    for _mtime, size, batch in sorted(held, key=lambda h: (h[2] != keep and h[2] not in _waiting, -h[0])):
        kept, total = kept + 1, total + size
        if batch != keep and batch not in _waiting and (kept > UPLOADS_KEPT or total > UPLOADS_MAX_BYTES):
            if batch.is_dir():
                shutil.rmtree(batch, ignore_errors=True)
            else:  # a file left by a version that kept uploads side by side
                batch.unlink(missing_ok=True)


def delete_when_done(*paths: Path):
    """A job listener that deletes the uploads once their import has ended: the run keeps what it needs (its
    summary and points in the store, a snapshot's whole trace in its detail folder), not the files."""

    def listener(_job, event: dict) -> None:
        if event.get("type") == "done":
            for path in paths:
                _delete(path)

    return listener


def forget(key: str, uploaded) -> None:
    """Drop the server's copy of an upload once it is on disk: Streamlit's own (kept per session until the
    widget is cleared) and the widget's, by giving the uploader a new key (:func:`uploader_key`)."""
    try:
        from streamlit.runtime.scriptrunner import get_script_run_ctx

        ctx = get_script_run_ctx()
        if ctx is not None:
            # the runtime's manager (MemoryUploadedFileManager) has it; the base class it is typed as does not
            ctx.uploaded_file_mgr.remove_file(ctx.session_id, uploaded.file_id)  # pyright: ignore[reportAttributeAccessIssue]
    except Exception:  # noqa: BLE001 - freeing memory early is a courtesy, never a reason to fail the import
        pass
    st.session_state[f"{key}.upload_round"] = st.session_state.get(f"{key}.upload_round", 0) + 1


def uploader_key(key: str) -> str:
    """The uploader's widget key, new after each :func:`forget`."""
    return f"{key}.upload.{st.session_state.get(f'{key}.upload_round', 0)}"


def remove(paths: list[Path]) -> None:
    """Delete saved uploads whose import was not queued."""
    for path in paths:
        _delete(path)

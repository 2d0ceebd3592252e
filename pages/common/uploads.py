"""Uploaded files on their way to an import: written to disk in chunks, bounded, deleted once imported.

The dashboard only stores the bytes; a worker parses them (``memory-snapshot``, ``profiler-trace``), so a
hostile or huge file never runs in the server's process. What waits under ``<data dir>/uploads`` is bounded
by count and by bytes, and the server drops its own copy as soon as the file is on disk. Each upload gets a
folder of its own and keeps its name in it, so the run names the file the user uploaded (and the ranks of
one job, uploaded together, are named by their files, not by a shared folder).
"""

from __future__ import annotations

import re
import shutil
import uuid
from pathlib import Path

import streamlit as st

from core.paths import data_dir
from core.units import GIB, MIB, exact_size_text

UPLOADS_KEPT = 5  # uploads waiting for their import (each is deleted once its import ends)
UPLOADS_MAX_BYTES = 2 * GIB  # and at most this many bytes of them: the oldest go first
CHUNK_BYTES = 1 << 20
UPLOAD_LIMIT_MB = 1024  # .streamlit/config.toml server.maxUploadSize, in MiB (docs/OPERATIONS.md, "Uploads")
UPLOAD_LIMIT_TEXT = exact_size_text(UPLOAD_LIMIT_MB * MIB)  # "1 GiB": what the pages say of it


def folder() -> Path:
    return data_dir() / "uploads"


def save_upload(uploaded) -> Path:
    """Write an uploaded file as ``<data dir>/uploads/<random>/<its name>`` and return its path.

    The file is copied in 1 MiB chunks (``read(n)``, never ``getbuffer()``: no second whole copy in the
    server's memory). The uploads kept are bounded by count and by bytes, the newest first; the one just
    written is always kept.
    """
    where = folder()
    own = where / uuid.uuid4().hex[:12]
    own.mkdir(parents=True)
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", uploaded.name)[-80:] or "upload"
    path = own / name
    uploaded.seek(0)
    try:
        with open(path, "wb") as out:
            while chunk := uploaded.read(CHUNK_BYTES):
                out.write(chunk)
    except BaseException:
        _delete(path)  # a disk that filled keeps no half upload
        raise
    _prune(where, keep=own)
    return path


def _delete(path: Path) -> None:
    """An upload and the folder it was written in."""
    shutil.rmtree(path.parent if path.parent.parent == folder() else path, ignore_errors=True)


def _prune(where: Path, keep: Path) -> None:
    """Drop the oldest uploads' folders past the count or the bytes (the folder just written stays)."""
    held = []
    for own in where.iterdir():
        try:
            files = [f.stat() for f in own.iterdir()] if own.is_dir() else [own.stat()]
        except FileNotFoundError:  # deleted meanwhile (its import ended)
            continue
        held.append((max((f.st_mtime for f in files), default=0.0), sum(f.st_size for f in files), own))
    kept, total = 0, 0
    for _mtime, size, own in sorted(held, key=lambda h: (h[2] != keep, -h[0])):
        kept, total = kept + 1, total + size
        if own != keep and (kept > UPLOADS_KEPT or total > UPLOADS_MAX_BYTES):
            if own.is_dir():
                shutil.rmtree(own, ignore_errors=True)
            else:  # a file left by a version that kept uploads side by side
                own.unlink(missing_ok=True)


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
            ctx.uploaded_file_mgr.remove_file(ctx.session_id, uploaded.file_id)
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

"""Uploaded files on their way to an import: written to disk in chunks, bounded, deleted once imported.

The dashboard only stores the bytes; a worker parses them (``memory-snapshot``, ``profiler-trace``), so a
hostile or huge file never runs in the server's process. What waits under ``<data dir>/uploads`` is bounded
by count and by bytes, and the server drops its own copy as soon as the file is on disk.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import streamlit as st

from core.paths import data_dir
from core.units import GIB

UPLOADS_KEPT = 5  # uploads waiting for their import (each is deleted once its import ends)
UPLOADS_MAX_BYTES = 2 * GIB  # and at most this many bytes of them: the oldest go first
CHUNK_BYTES = 1 << 20
UPLOAD_LIMIT_MB = 512  # .streamlit/config.toml server.maxUploadSize (docs/OPERATIONS.md, "Uploads")


def folder() -> Path:
    return data_dir() / "uploads"


def save_upload(uploaded) -> Path:
    """Write an uploaded file under ``<data dir>/uploads`` and return its path.

    The file is copied in 1 MiB chunks (``read(n)``, never ``getbuffer()``: no second whole copy in the
    server's memory). The uploads kept are bounded by count and by bytes, the newest first; the one just
    written is always kept.
    """
    where = folder()
    where.mkdir(parents=True, exist_ok=True)
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", uploaded.name)[-80:] or "upload"
    path = where / f"{uuid.uuid4().hex[:12]}-{name}"
    uploaded.seek(0)
    try:
        with open(path, "wb") as out:
            while chunk := uploaded.read(CHUNK_BYTES):
                out.write(chunk)
    except BaseException:
        path.unlink(missing_ok=True)  # a disk that filled keeps no half upload
        raise
    _prune(where, keep=path)
    return path


def _prune(where: Path, keep: Path) -> None:
    files = []
    for p in where.iterdir():
        try:
            files.append((p.stat().st_mtime, p.stat().st_size, p))
        except FileNotFoundError:  # deleted meanwhile (its import ended)
            continue
    kept, total = 0, 0
    for _mtime, size, p in sorted(files, key=lambda f: (f[2] != keep, -f[0])):
        kept, total = kept + 1, total + size
        if p != keep and (kept > UPLOADS_KEPT or total > UPLOADS_MAX_BYTES):
            p.unlink(missing_ok=True)


def delete_when_done(*paths: Path):
    """A job listener that deletes the uploads once their import has ended: the run keeps what it needs (its
    summary and points in the store, a snapshot's whole trace in its detail folder), not the files."""

    def listener(_job, event: dict) -> None:
        if event.get("type") == "done":
            for path in paths:
                path.unlink(missing_ok=True)

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
        path.unlink(missing_ok=True)

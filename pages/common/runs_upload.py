"""Compare's runs-file imports — an upload ("Import runs exported on another box") or the example runs shipped in
examples/ — each read by a worker (``runs-import``, under the worker's memory and CPU limits), never parsed in the
dashboard's process, where one hostile file could take every user's dashboard down. The page follows the jobs
and says what each added or why its file was refused; a job is no run of its own (``save=False``)."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from core.errors import ConfigError
from core.result import RunResult
from core.rows.notes import RunNotes
from core.store import RunStore
from pages.common import lab, uploads
from pages.common.markdown import markdown_text

KEY = "compare.runs_file"
JOBS, SAID = f"{KEY}.jobs", f"{KEY}.said"  # [(job id, file name)] followed; [(kind, text)] they came to


def section(store: RunStore, limit_mib: int) -> None:
    """The uploader and its Import button."""
    upload = st.file_uploader("Runs file", key=uploads.uploader_key(KEY), max_upload_size=limit_mib)
    if upload is not None and st.button("Import", key=f"{KEY}.import", disabled=busy()):
        _submit_upload(store, upload)


def load(store: RunStore, files: list[Path]) -> None:
    """Queue an import of each of ``files`` (kept where they are: the example runs)."""
    _start()
    for path in files:
        _submit(store, path, path.name)


def busy() -> bool:
    return bool(st.session_state.get(JOBS))


def outcome() -> None:
    """The imports' progress while they run, then what they came to."""
    if busy():
        _progress()
        return
    for kind, text in st.session_state.get(SAID, []):
        getattr(st, kind)(text)


def _start() -> None:
    st.session_state[JOBS], st.session_state[SAID] = [], []


def _submit_upload(store: RunStore, upload) -> None:
    """Save the upload, drop the server's copy and queue its import (the saved copy is deleted once read)."""
    try:
        path = uploads.save_upload(upload)
    except OSError as exc:  # a full disk, or earlier imports still waiting: said without the server's folders
        st.error(f"The upload could not be saved on the server: {markdown_text(exc.strerror or exc)}")
        return
    uploads.forget(KEY, upload)
    _start()
    _submit(store, path, upload.name, delete=True)


def _submit(store: RunStore, path: Path, name: str, delete: bool = False) -> None:
    try:
        job = lab.manager().submit(
            "runs-import",
            {"path": str(path), "db": str(store.path)},
            "cpu",
            name=name,
            on_event=uploads.delete_when_done(path) if delete else None,
            save=False,
        )
    except ConfigError as exc:
        if delete:
            uploads.remove([path])
        st.session_state[SAID].append(("error", _refused(name, str(exc))))
        return
    st.session_state[JOBS].append((job.id, name))


def _refused(name: str, why: str) -> str:
    return f"{markdown_text(name)} refused, nothing of it was added: {markdown_text(why)}"


def _said(run: RunResult | None, name: str) -> tuple[str, str]:
    if run is not None and run.status == "ok":
        said = RunNotes.from_run(run)
        return (
            "success",
            f"Imported {said.added} run(s) from {markdown_text(name)}; {said.already_present} were already here.",
        )
    return "error", _refused(name, run.error or run.status if run is not None else "the import was lost")


@st.fragment(run_every=0.5)
def _progress() -> None:
    """Poll the imports; once all have ended, keep what they came to and redraw the page (its runs list too)."""
    manager = lab.manager()
    followed = [(manager.get(job_id), name) for job_id, name in st.session_state.get(JOBS, [])]
    running = [(job, name) for job, name in followed if job is not None and job.state != "done"]
    if not running:
        st.session_state[SAID] += [_said(job.result if job else None, name) for job, name in followed]
        st.session_state[JOBS] = []
        st.rerun(scope="app")
        return
    for job, name in running:
        st.info(f"Reading {markdown_text(name)} in a worker: {markdown_text(job.message or job.state)}")

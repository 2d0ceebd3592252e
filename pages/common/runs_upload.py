"""Compare's "Import runs exported on another box": the upload is saved to disk and read by a worker
(``runs-import``, under the worker's memory cap), never parsed in the dashboard's process, where one hostile
file could take every user's dashboard down. The page follows the job and says what it added or why the file
was refused; the job is no run of its own (``save=False``)."""

from __future__ import annotations

import streamlit as st

from core.errors import ConfigError
from core.result import RunResult
from core.store import RunStore
from pages.common import lab, uploads
from pages.common.markdown import markdown_text

KEY = "compare.runs_file"
JOB, NAME, SAID = f"{KEY}.job", f"{KEY}.name", f"{KEY}.said"


def section(store: RunStore, limit_mib: int) -> None:
    """The uploader, its Import button, then the import's progress or what it came to."""
    upload = st.file_uploader("Runs file", key=uploads.uploader_key(KEY), max_upload_size=limit_mib)
    job = _job()
    busy = job is not None and job.state != "done"
    if upload is not None and st.button("Import", key=f"{KEY}.import", disabled=busy):
        _submit(store, upload)
    if _job() is not None:
        _progress()
        return
    if said := st.session_state.get(SAID):
        kind, text = said
        getattr(st, kind)(text)


def _job():
    job_id = st.session_state.get(JOB)
    return lab.manager().get(job_id) if job_id else None


def _submit(store: RunStore, upload) -> None:
    """Save the upload, drop the server's copy and queue its import on the ``cpu`` queue."""
    try:
        path = uploads.save_upload(upload)
    except OSError as exc:
        where = markdown_text(str(uploads.folder()))
        st.error(f"The upload could not be saved under {where}: {markdown_text(exc.strerror or exc)}")
        return
    name = upload.name
    uploads.forget(KEY, upload)
    try:
        job = lab.manager().submit(
            "runs-import",
            {"path": str(path), "db": str(store.path)},
            "cpu",
            name=name,
            on_event=uploads.delete_when_done(path),
            save=False,
        )
    except ConfigError as exc:
        uploads.remove([path])
        st.error(f"Import refused, nothing was changed: {markdown_text(exc)}")
        return
    st.session_state[JOB], st.session_state[NAME] = job.id, name
    st.session_state.pop(SAID, None)


def _said(run: RunResult, name: str) -> tuple[str, str]:
    if run.status == "ok":
        added, present = run.meta.get("added", 0), run.meta.get("already_present", 0)
        return "success", f"Imported {added} run(s) from {markdown_text(name)}; {present} were already here."
    return "error", f"Import refused, nothing was changed: {markdown_text(run.error or run.status)}"


@st.fragment(run_every=0.5)
def _progress() -> None:
    """Poll the import; once it has ended, keep what it came to and redraw the page (its runs list too)."""
    job = _job()
    if job is None or job.state == "done":
        if job is not None and job.result is not None:
            st.session_state[SAID] = _said(job.result, st.session_state.get(NAME, ""))
        st.session_state.pop(JOB, None)
        st.rerun(scope="app")
        return
    st.info(
        f"Reading {markdown_text(st.session_state.get(NAME, 'the runs file'))} in a worker: {markdown_text(job.message or job.state)}"
    )

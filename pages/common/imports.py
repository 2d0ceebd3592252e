"""The import row of a workload section: a file uploaded or named on the box, an example recorded elsewhere,
or an earlier import reopened. Each queues its worker experiment through :mod:`pages.common.run_panel`, on
the ``cpu`` queue, so a file is parsed in a worker, never in the dashboard's process."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from core import import_dirs
from core.errors import ConfigError
from core.result import RunSummary
from core.workload.trace.ranks import rank_files
from pages.common import lab, run_panel, uploads
from pages.common.markdown import markdown_text
from render.history import import_label


def importer(key: str, experiment: str, label: str, help_text: str, ranks: str = "") -> None:
    """An upload or a path on the box, imported by ``experiment``; with ``ranks`` (the experiment that reads a
    job's rank traces) several uploads, or a folder on the box, are the ranks of one job."""
    uploader_key = uploads.uploader_key(key)
    if ranks:
        files = st.file_uploader(label, key=uploader_key, help=help_text, accept_multiple_files=True) or []
    else:
        uploaded = st.file_uploader(label, key=uploader_key, help=help_text)
        files = [uploaded] if uploaded is not None else []
    on_box = _path_field(key, ranks)
    job_running = st.session_state.get(f"{key}.job") is not None
    if st.button("Import", key=f"{key}.import", type="primary", disabled=not (files or on_box) or job_running):
        if on_box:
            _import_path(key, experiment, ranks, on_box)
        elif files:
            _import_uploads(key, ranks if len(files) > 1 else experiment, files)


def _path_field(key: str, ranks: str) -> str:
    """The path typed on the page, or "" while the operator lists no import directory (the field is off)."""
    for entry in import_dirs.refused_entries():  # the operator's setting, said where it counts
        st.warning(markdown_text(f"{import_dirs.ENV} entry left out: {entry}"), icon=":material/folder_off:")
    if not import_dirs.listed():
        st.caption(markdown_text(import_dirs.off_text()))
        return ""
    return st.text_input(
        "…or a file on this box (no upload: a file of gigabytes is read where it lies)"
        + ("; a folder: every rank of a job" if ranks else ""),
        key=f"{key}.path",
        placeholder="/path/to/file",
    ).strip()


def _import_path(key: str, experiment: str, ranks: str, given: str) -> None:
    """A path under the import directories, every link resolved (a folder of ranks: each of its files), imported
    where it lies; anything else is refused with words that say nothing of the file."""
    try:
        path = import_dirs.allowed(given)
        folder = [import_dirs.allowed(str(f)) for f in rank_files([str(path)])] if ranks and path.is_dir() else []
    except ConfigError as exc:
        st.error(f"Invalid settings: {markdown_text(exc)}")
        return
    if folder:
        run_panel.submit(key, ranks, {"paths": [str(f) for f in folder]}, device="cpu", name=Path(given).name)
    else:
        run_panel.submit(key, experiment, {"path": str(path)}, device="cpu", name=Path(given).name)


def _import_uploads(key: str, experiment: str, files: list) -> None:
    """Uploads saved as one batch and imported together (several: the ranks of one job), deleted once imported;
    kept until then, however many there are."""
    try:
        paths = uploads.save_batch(files)
    except OSError as exc:  # a full disk, or earlier imports still waiting: said without the server's folders
        what = "upload" if len(files) == 1 else "uploads"
        st.error(f"The {what} could not be saved on the server: {markdown_text(exc.strerror or exc)}")
        return
    name = files[0].name if len(files) == 1 else f"{files[0].name} +{len(files) - 1}"
    for uploaded in files:
        uploads.forget(key, uploaded)
    config = {"path": str(paths[0])} if len(files) == 1 else {"paths": [str(p) for p in paths]}
    if not run_panel.submit(
        key, experiment, config, device="cpu", name=name, on_event=uploads.delete_when_done(*paths)
    ):
        uploads.remove(paths)


def example_buttons(key: str, kind: str) -> bool:
    """One click opens a file recorded elsewhere, on a real GPU, by others (shipped in examples/): its stored
    import where there is one, else a fresh import. Returns whether any example is here."""
    from core.workload import examples

    shipped = examples.of_kind(kind)
    here = [e for e in shipped if examples.present(e)]
    if not here:
        st.info(
            f"No example {kind} here to open: {markdown_text(examples.missing_text(shipped[0]))}",
            icon=":material/info:",
        )
        return False
    st.caption(
        f"No {kind} of your own? Open one recorded elsewhere, on a real GPU, by others (public files with their "
        "source and licence in examples/README.md):"
    )
    job_id = st.session_state.get(f"{key}.job")
    job = lab.manager().get(job_id) if job_id else None
    busy = job is not None and job.state != "done"  # an import that has ended no longer holds the buttons
    for e in here:
        if st.button(
            f"Open an example recorded on {markdown_text(e.gpu)}: {markdown_text(e.title)}",
            key=f"{key}.example.{e.name}",
            icon=":material/public:",
            disabled=busy,
            help=f"{e.repository}, {e.source_path} at {e.commit[:12]} ({e.licence}). "
            f"`{e.command}` opens it from a shell.",
        ):
            earlier = [r for r in stored(e.experiment) if r.config.get("example") == e.name]
            if earlier and (run := run_panel.opened(earlier[0].id)):
                run_panel.show_stored(key, run)
            else:
                run_panel.submit(key, e.experiment, {"example": e.name}, device="cpu", name=f"example {e.name}")
    return True


def stored(*experiments: str) -> list[RunSummary]:
    """The newest stored imports of these experiments that succeeded, the newest first: their summaries (an
    import of a 200 MB file is read whole only when it is opened, not on every rerun of the page)."""
    store = lab.store()
    runs = [r for e in experiments for r in (store.summaries(experiment=e, status="ok", limit=50) if store else [])]
    return sorted(runs, key=lambda r: r.started_at, reverse=True)


def reopen(key: str, *experiments: str) -> None:
    """Open an earlier import (the store keeps them like any run)."""
    runs = stored(*experiments)
    if not runs:
        return
    labels = {r.id: import_label(r) for r in runs}
    chosen = st.selectbox(
        "…or open an earlier import", [""] + list(labels), key=f"{key}.reopen", format_func=lambda i: labels.get(i, "—")
    )
    if chosen and st.session_state.get(f"{key}.reopened") != chosen:
        if run := run_panel.opened(chosen):
            run_panel.show_stored(key, run)
        st.session_state[f"{key}.reopened"] = chosen

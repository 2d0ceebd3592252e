"""Compare & export: every stored run — browse, reopen, rename/tag, delete, overlay, import, export, report."""

from __future__ import annotations

from functools import partial

import streamlit as st

from core.health.figures import figures_of
from core.health.history import parts, stored_runs
from core.paths import example_files
from core.result import FINAL_STATUSES, RunResult, RunSummary
from core.store import MAX_IMPORT_BYTES, DamagedRun, RunStore, StoreError
from core.text import MAX_LABEL_CHARS, MAX_TAGS
from core.units import MIB, bytes_text, count_text, exact_size_text
from pages.common import lab, runs_upload
from pages.common.charts import show_charts
from pages.common.markdown import markdown_text
from pages.common.methods import how_measured
from pages.common.run_panel import guarded, status_banner
from pages.common.tables import show_table
from render import comparison, history
from render.export import csv_bytes, slug
from render.plots import figures_for, overlay_for
from render.report import build_report
from render.trend import trend_charts

KEY = "compare"
SELECTED = f"{KEY}.selected"
LIMIT_MIB = MAX_IMPORT_BYTES // MIB


@st.cache_resource(show_spinner="Reading the run…", max_entries=8)
def _whole_run(_store: RunStore, run_id: str, stamp: tuple) -> RunResult:
    """A selected run with its rows, read once per change (``stamp``), not on every rerun: a filter
    keystroke must not re-read a 150 MB run."""
    return _store.get(run_id)


def whole(store: RunStore, summary: RunSummary) -> RunResult:
    stamp = (summary.status, summary.finished_at, summary.name, tuple(summary.tags), summary.payload_bytes)
    return _whole_run(store, summary.id, stamp)


def opened(store: RunStore, chosen: list[RunSummary]) -> list[RunResult]:
    """The runs picked, read whole; one the store cannot read is named in words and left out."""
    runs = []
    for summary in chosen:
        try:
            runs.append(whole(store, summary))
        except DamagedRun as exc:
            st.error(markdown_text(exc))
        except KeyError:
            st.warning(f"Run `{summary.id[:12]}` was deleted meanwhile.")
    return runs


def examples_section(store: RunStore) -> None:
    """Reference runs recorded on real GPUs and shipped in examples/, imported like any runs file (by a worker)."""
    files = example_files()
    if not files:
        st.caption(
            "No example runs come with this copy of the lab: compare your own runs, or import a runs file "
            "exported on another box (above)."
        )
        return
    if st.button(
        f"Load example runs ({len(files)} file(s) from examples/)",
        key=f"{KEY}.examples",
        icon=":material/library_add:",
        disabled=runs_upload.busy(),
        help="Runs recorded on real GPUs with scripts/record_reference_runs.py; imported through the same "
        "validation as an upload and marked imported.",
    ):
        runs_upload.load(store, files)


def import_section(store: RunStore) -> None:
    examples_section(store)
    with st.expander("Import runs exported on another box", icon=":material/upload:"):
        st.caption(
            "A runs file from `python -m core runs export -o runs.json` or this page's export. Imported runs "
            "keep their original device and versions and are marked *imported*; runs already here are "
            f"skipped. The whole file is checked before anything is added (limit {LIMIT_MIB} MiB, "
            f"gzip allowed; pickles are never loaded)."
        )
        runs_upload.section(store, LIMIT_MIB)
    runs_upload.outcome()  # every runs file is read in a worker, never in this process


def filtered(store: RunStore) -> tuple[list[RunSummary], list[RunSummary]]:
    """The newest ``history.LISTED`` runs of the experiments and statuses chosen (the store filters them), and those the
    other filters keep, in the order chosen: a store of 100,000 runs lists in the time of a few thousand."""
    cols = st.columns([2, 2, 2, 3, 2])
    keep = history.Filter(
        experiments=cols[0].multiselect("Experiment", store.experiments(), key=f"{KEY}.f.exp", placeholder="any"),
        statuses=cols[1].multiselect("Status", FINAL_STATUSES, key=f"{KEY}.f.status", placeholder="any"),
        device=cols[2].text_input("Device contains", key=f"{KEY}.f.device"),
        text=cols[3].text_input("Name, tag or setting contains", key=f"{KEY}.f.text"),
    )
    sort = cols[4].selectbox("Sort by", list(history.SORTS), key=f"{KEY}.f.sort")
    listed = store.summaries(experiment=keep.experiments, status=keep.statuses, limit=history.LISTED)
    return listed, history.shown(listed, keep, sort)


def _delete(store: RunStore, ids: list[str]) -> None:
    removed = store.delete(ids)
    st.session_state[SELECTED] = []
    st.session_state[f"{KEY}.deleted"] = removed


def actions(store: RunStore, selected: list[RunSummary]) -> None:
    ids = [r.id for r in selected]
    cols = st.columns(3)
    size = sum(r.payload_bytes for r in selected) + 1024 * (len(selected) + 1)  # a bound on the file's size
    too_large = size > MAX_IMPORT_BYTES
    cols[0].download_button(
        "Export runs file",
        lambda: store.export_json(ids).encode("utf-8"),
        f"gpulab-runs-{len(ids)}.json",
        "application/json",
        key=f"{KEY}.export",
        on_click="ignore",
        icon=":material/download:",
        disabled=too_large,
        help=f"about {bytes_text(size)}: more than an import takes ({exact_size_text(MAX_IMPORT_BYTES)}), so "
        f"it could not come back; select fewer runs"
        if too_large
        else "JSON runs file: import it on another box (page or `python -m core runs import`)",
    )
    cols[1].download_button(
        "Report (HTML)",
        lambda: build_report([whole(store, r) for r in selected]).encode("utf-8"),
        f"gpulab-report-{slug('-'.join(sorted({r.experiment for r in selected})))}.html",
        "text/html",
        key=f"{KEY}.report",
        on_click="ignore",
        icon=":material/description:",
        help="one self-contained HTML file: charts, device descriptions, settings (opens offline)",
    )
    with cols[2].popover(f"Delete {len(ids)} run(s)", icon=":material/delete:"):
        st.write("Deleted runs cannot be recovered (export them first to keep a copy).")
        st.button("Delete for good", key=f"{KEY}.delete", type="primary", on_click=_delete, args=(store, ids))


def relabel_form(store: RunStore, run: RunResult) -> None:
    with st.form(f"{KEY}.relabel.{run.id}", border=False):
        cols = st.columns([3, 3, 1], vertical_alignment="bottom")
        name = cols[0].text_input("Name", run.name, max_chars=MAX_LABEL_CHARS)
        tags = cols[1].text_input("Tags (comma-separated)", ", ".join(run.tags), max_chars=MAX_TAGS * MAX_LABEL_CHARS)
        if cols[2].form_submit_button("Save"):
            try:
                store.relabel(run.id, name=name.strip(), tags=tags.split(","))
            except ValueError as exc:
                st.error(f"Not saved: {markdown_text(exc)}")
            else:
                st.rerun()


def run_detail(store: RunStore, run: RunResult) -> None:
    st.subheader(markdown_text(f"{run.experiment}{' — ' + run.name if run.name else ''}"))
    status_banner(run)
    if run.imported:
        st.caption("Imported from another box: device and versions are the original ones.")
    relabel_form(store, run)
    if run.rows:
        try:
            charts = figures_for(run) or comparison.generic_figures(run)
        except Exception as exc:  # noqa: BLE001 - a stored run from another version may not fit today's plots
            st.warning(
                markdown_text(f"The {run.experiment} charts could not redraw this run ({exc}); showing its columns.")
            )
            charts = comparison.generic_figures(run)
        show_charts(charts, f"{KEY}.run.{run.id}")
    cols = st.columns(2)
    cols[0].write("**Settings**")
    show_table(history.settings_frame(run), cols[0], hide_index=True)
    cols[1].write("**Device**")
    show_table(history.device_frame(run), cols[1], hide_index=True)
    if run.rows:
        with st.expander(f"Data ({len(run.rows)} rows)"):
            show_table(run.frame(), hide_index=True)
    trend_section(store, run)


TREND_RUNS = 200


def trend_section(store: RunStore, run: RunResult) -> None:
    """Each figure of this run over every stored run of the same experiment and settings (the parts inside
    health checks included), one line per box; a health check's trend is its parts'."""
    if run.experiment == "health":
        for part in parts(run):
            trend_section(store, part)
        return
    if not figures_of(run):
        return
    same = [r for r in stored_runs(store, run.experiment, limit=TREND_RUNS) if r.config == run.config]
    st.write(
        f"**Trend: {count_text(len(same), 'run')} of {markdown_text(run.experiment)} with these settings, one line per box and device** "
        "(✕: below the box's earlier runs beyond their spread)"
    )
    show_charts(trend_charts(same), f"{KEY}.trend.{run.id}")


def compare_view(runs: list[RunResult]) -> None:
    st.subheader(f"Comparing {len(runs)} runs")
    problem = comparison.compare_problem(runs)
    if problem:
        st.error(f"Cannot compare these runs: {markdown_text(problem)}.")
        return
    differ = comparison.differences(runs)
    st.caption(
        "What differs: "
        + (markdown_text(", ".join(differ)) if differ else "nothing in device or settings (repeat runs)")
    )
    metrics = comparison.common_metrics(runs)
    metric = st.selectbox(
        "Metric",
        metrics,
        index=metrics.index(comparison.default_metric(runs)),
        key=f"{KEY}.metric",
        help="drawn by the generic overlay and used by the delta table",
    )
    try:
        charts = overlay_for(runs)
    except Exception as exc:  # noqa: BLE001
        st.warning(markdown_text(f"The {runs[0].experiment} overlay failed ({exc}); showing the generic overlay."))
        charts = None
    show_charts(charts or comparison.generic_charts(runs, metric), f"{KEY}.cmp")
    if any(figures_of(r) for r in runs):
        st.write("**Trend of each figure over these runs, one line per box and device**")
        show_charts(trend_charts(runs), f"{KEY}.cmp.trend")
    deltas = comparison.delta_table(runs, [metric])
    st.write(
        f"**{markdown_text(metric)}: each run against {markdown_text(comparison.labels(runs)[0])}** (difference = run − baseline, "
        f"ratio = run / baseline)"
    )
    st.caption(markdown_text(comparison.pairing_text(runs, deltas)))
    show_table(deltas, hide_index=True)
    st.download_button(
        "Delta table (CSV)",
        csv_bytes(comparison.delta_table(runs)),
        f"{slug(runs[0].experiment)}-deltas.csv",
        "text/csv",
        key=f"{KEY}.deltas",
        on_click="ignore",
        help="every shared metric, not only the one shown",
    )


st.title("Compare & export")
st.caption(
    "Every run made on this box (dashboard or `python -m core`) and every imported run. Pick one to see its "
    "charts again; pick two or more of one experiment to overlay them; export runs, charts or a report."
)
how_measured("compare")
store = lab.store()
if store is None:
    st.error(f"The run store is unavailable: {lab.store_problem()}")
    st.stop()

try:
    import_section(store)
    if st.session_state.get(f"{KEY}.deleted") is not None:
        st.success(f"Deleted {st.session_state.pop(f'{KEY}.deleted')} run(s).")
    stored = store.count()
    if not stored:
        st.info("No runs stored yet: run an experiment on another page, or import a runs file above.")
        st.stop()
    all_runs, shown = filtered(store)
    show_table(history.history_frame(shown), hide_index=True, key=f"{KEY}.history")
    newest = f" (the newest {len(all_runs):,} read: filter by experiment or status for older ones)"
    st.caption(
        f"{len(shown):,} of {count_text(stored, 'run')}{newest if len(all_runs) == history.LISTED else ''}. "
        "Click a column header to sort by it."
    )
    by_id = {r.id: r for r in all_runs}
    st.session_state[SELECTED] = [i for i in st.session_state.get(SELECTED, []) if i in by_id]
    options = [r.id for r in shown] + [i for i in st.session_state[SELECTED] if i not in {r.id for r in shown}]
    chosen = [
        by_id[i]
        for i in st.multiselect(
            "Selected runs",
            options,
            key=SELECTED,
            format_func=lambda i: history.run_label(by_id[i]),
            placeholder="pick one run to open it, two or more to compare",
        )
    ]
    if chosen:
        actions(store, chosen)
    runs = opened(store, chosen)
    if len(runs) == 1:
        guarded(runs, partial(run_detail, store, runs[0]))
    elif len(runs) > 1:
        guarded(runs, lambda: compare_view(runs))
except StoreError as exc:
    st.error(f"The run store failed: {markdown_text(exc)}")

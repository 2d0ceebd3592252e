"""The memory snapshot section of the Allocator and Training memory pages: import a snapshot of the user's own
job (parsed in a worker, ``memory-snapshot``), then explore it: zoom into any window, who holds memory at any
moment, the segment map, categories over time, and a second snapshot beside it. The numbers come from
:mod:`render.snapshot_view`, the figures from :mod:`render.plots.memory_snapshot`; this module places widgets.
"""

from __future__ import annotations

import streamlit as st

from core.result import RunResult
from core.rows.snapshot import SnapshotSummary
from core.units import bytes_text, count_text
from core.workload.snapshot import detail
from core.workload.snapshot.analysis import SnapshotAnalysis
from core.workload.snapshot.text import peak_stack
from pages.common import imports, run_panel
from pages.common.charts import show, show_charts
from pages.common.facts import fact
from pages.common.import_notes import findings, provenance, quirks
from pages.common.markdown import markdown_text
from pages.common.tables import show_table
from pages.common.uploads import UPLOAD_LIMIT_TEXT
from render import snapshot_view as view
from render.history import import_label
from render.plots import memory_snapshot as snap_plots


def section(key: str) -> None:
    st.write(
        "Record one in your own training script (`python -m core record -o snap.pickle -- python train.py`, or "
        "`torch.cuda.memory._record_memory_history()` + `_dump_snapshot()`) on any machine, then import it "
        "here. Pickles of any protocol, JSON and `.gz` are read; a pickle that names a class is refused. Uploads "
        f"take up to {UPLOAD_LIMIT_TEXT}; for larger files give their path on this box below, or run "
        "`python -m core snapshot FILE`: both import into the same store without an upload."
    )
    imports.importer(
        key, "memory-snapshot", "Memory snapshot", "torch.cuda.memory._dump_snapshot pickle, its JSON, or .gz"
    )
    shipped = imports.example_buttons(key, "snapshot")
    imports.reopen(key, "memory-snapshot")
    run_panel.results(
        key,
        lambda run: render(run, key),
        empty="No snapshot imported yet: upload one and press Import"
        + (", or open an example above." if shipped else "."),
    )


@st.cache_resource(max_entries=2, show_spinner="Reading the whole trace…")
def _analysis(detail_id: str) -> SnapshotAnalysis:
    return view.load(detail_id)


def render(run: RunResult, key: str) -> None:
    m = SnapshotSummary.from_run(run)
    provenance(run)
    _failure(m)
    findings(run.meta)
    _headline(m)
    st.caption(
        f"{markdown_text(m.file)} · {m.source_format} · {bytes_text(m.file_bytes)} · "
        f"x axis: {m.x_axis}. Allocated is replayed from the trace's own sizes (as memory_viz draws it)."
    )
    for note in m.notes:
        st.info(note)
    quirks(run.meta)
    if not detail.exists(m.detail_id):
        st.warning(
            "The full-resolution trace of this import is no longer on this machine (the newest "
            f"{detail.KEEP} are kept): showing its {len(run.rows):,} stored points."
        )
        show_charts(snap_plots.figures(run), f"{key}.stored")
        return
    try:
        a = _analysis(m.detail_id or "")
    except detail.Damaged as exc:  # cut or replaced files beside the store: the run's own points still draw
        st.warning(f"{markdown_text(exc)}: showing its {len(run.rows):,} stored points.")
        show_charts(snap_plots.figures(run), f"{key}.stored")
        return
    window, budget = _zoom(a, run, key)
    line = view.timeline(a, window, budget)
    figure = snap_plots.timeline_figure(line.t_ms, line.allocated, line.reserved, m, run, line.drawn)
    show(figure, line.frame(), "snapshot-timeline", f"{key}.timeline")
    python, cpp = peak_stack(m)
    with st.expander("Python stack at the peak", expanded=True):
        st.code("\n".join(python) or "(no Python stack recorded for this allocation)", language=None)
    if cpp:  # recorded with C++ frames: a score of the allocator's and dispatcher's, below the Python ones
        with st.expander(f"C++ frames at the peak ({count_text(len(cpp), 'frame')}, innermost first)"):
            st.code("\n".join(cpp), language=None)
    _moment(a, run, key, budget)
    _categories(a, run, m, key, window, budget)
    show(
        snap_plots.fragmentation_figure(line.t_ms, line.reserved, line.allocated, m, run),
        line.fragmentation_frame(),
        "snapshot-fragmentation",
        f"{key}.fragmentation",
    )
    _compare(run, key)


def _failure(m: SnapshotSummary) -> None:
    """An out-of-memory snapshot opens with what failed; what to try is its first finding, just below."""
    if m.oom and (shown := view.failure_figures(m)):
        when = view.time_text(m.oom.time_ms, m.has_times)
        st.error(f"Out of memory at {when}: this snapshot holds a failed allocation.")
        for col, (label, value) in zip(st.columns(len(shown)), shown):
            col.metric(label, value)


def _headline(m: SnapshotSummary) -> None:
    """Four figures that fit a 1280-px window; what the reserve held unallocated is written under its own."""
    cols = st.columns(4)
    traced = bool(m.trace_events)
    peak_at = f"at {view.time_text(m.peak_time_ms, m.has_times)}"
    fact(cols[0], "Peak allocated", bytes_text(m.peak_allocated_bytes), peak_at)
    fact(
        cols[1],
        "Peak reserved",
        bytes_text(m.peak_reserved_bytes),
        f"{bytes_text(m.fragmentation_at_peak_bytes)} of it unallocated "
        f"{'at the peak' if traced else 'at the snapshot'}",
        help="Reserved − allocated: memory the caching allocator holds that no tensor uses.",
    )
    fact(
        cols[2],
        "Before recording" if traced else "Allocated at the snapshot",
        bytes_text(m.baseline_allocated_bytes),
        f"{m.baseline_allocated_blocks:,} block(s)",
        help="Blocks the segments show active that the trace never allocated, and blocks it frees "
        "without having allocated: they were there before recording began."
        if traced
        else "No trace was recorded: only the state at the time of the snapshot is known.",
    )
    fact(cols[3], "Trace events", f"{m.trace_events:,}", view.devices_text(m.device, list(m.devices)))


def _zoom(a: SnapshotAnalysis, run: RunResult, key: str) -> tuple[view.Window, int]:
    """The time window the charts re-read and their budget of points."""
    end = view.duration_ms(a)
    cols = st.columns([3, 1])
    window = cols[0].slider(
        "Time window (ms since the first event)" if a.has_times else "Time window (event numbers)",
        0.0,
        end,
        (0.0, end),
        format="%.2f ms" if a.has_times else "%d",
        key=f"{key}.window.{run.id}",
        help="Zoom: the charts re-read this window from the whole "
        "trace, each equal span of time keeping its first, last, highest and lowest point.",
    )
    budget = cols[1].number_input(
        "Points per chart",
        500,
        view.MAX_CHART_POINTS,
        view.DEFAULT_CHART_POINTS,
        step=500,
        key=f"{key}.points.{run.id}",
        help="All series of a chart together.",
    )
    return window, int(budget)


def _moment(a: SnapshotAnalysis, run: RunResult, key: str, budget: int) -> None:
    st.subheader("Who holds memory at a moment")
    t_ms = st.slider(
        "Moment (ms since the first event)" if a.has_times else "Moment (event number)",
        0.0,
        view.duration_ms(a),
        float(SnapshotSummary.from_run(run).peak_time_ms),
        format="%.2f ms" if a.has_times else "%d",
        key=f"{key}.moment.{run.id}",
        help="Defaults to the peak.",
    )
    at = view.moment(a, t_ms, budget)
    if at.sites:
        show(
            snap_plots.sites_figure(at.sites, at.when, run),
            snap_plots.sites_frame(at.sites).drop(columns=["stack"]),
            "snapshot-sites",
            f"{key}.sites",
        )
        st.caption(f"Categories {at.when}: {at.held}")
    else:
        st.info(f"Nothing live at this moment ({at.when.removeprefix('at ')}): no block is allocated.")
    show(
        snap_plots.segment_map_figure(at.segments, at.when, at.numbers, run),
        None,
        "snapshot-segments",
        f"{key}.segments",
    )


def _categories(
    a: SnapshotAnalysis, run: RunResult, m: SnapshotSummary, key: str, window: view.Window, budget: int
) -> None:
    st.subheader("Categories over time")
    cats = view.categories(a, window, budget)
    show(
        snap_plots.categories_figure(cats.t_ms, cats.series, m, run),
        cats.frame(),
        "snapshot-categories",
        f"{key}.categories",
    )
    st.caption(
        "Inferred from each allocation's Python stack and lifetime; nothing is guessed: an allocation no rule "
        "matches is *unknown*. The rules, first match wins, and what each classified:"
    )
    show_table(snap_plots.rules_frame(m), hide_index=True)


def _compare(run: RunResult, key: str) -> None:
    others = [r for r in imports.stored("memory-snapshot") if r.id != run.id]
    st.subheader("Compare with another snapshot")
    if not others:
        st.caption(
            "Import a second snapshot (e.g. before and after a change) to put both on one time axis and see "
            "which allocation sites make the difference."
        )
        return
    labels = {r.id: import_label(r) for r in others}
    other_id = st.selectbox("Snapshot B", list(labels), format_func=labels.__getitem__, key=f"{key}.compare.{run.id}")
    other = run_panel.opened(other_id)  # the list reads summaries; the one picked is read whole
    if other is None:
        return
    show_charts(snap_plots.overlay([run, other]), f"{key}.overlay")
    diff = snap_plots.site_differences(run, other)
    if not diff.empty:
        show_table(view.differences_table(diff), hide_index=True)

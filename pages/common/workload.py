"""Bring your own workload on a page: upload a memory snapshot or a profiler trace, import it in a worker,
explore it. The file is only written to disk here; parsing happens in the ``memory-snapshot`` /
``profiler-trace`` worker experiment, so a hostile or huge file never runs in the dashboard's process.
The snapshot view re-reads the whole trace from beside the store (:mod:`core.workload.detail`) for its
zoom, its "who holds memory at this moment" and its segment map; a chart never gets more than
:data:`MAX_CHART_POINTS` points.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pandas as pd
import streamlit as st

from core.paths import data_dir
from core.units import GIB, bytes_text, timestamp_text
from pages.common import lab, run_panel
from pages.common.charts import show, show_charts
from pages.common.plain import md
from render.chart import kind_rows
from render.plots import memory_snapshot as snap_plots
from render.plots import profiler_trace as trace_plots
from render.plots import profiler_trace_ranks as trace_plots_ranks

MAX_CHART_POINTS = 20_000
DEFAULT_CHART_POINTS = 5_000
UPLOADS_KEPT = 5  # uploads waiting for their import (each is deleted once its import ends)
UPLOADS_MAX_BYTES = 2 * GIB  # and at most this many bytes of them: the oldest go first
CHUNK_BYTES = 1 << 20
UPLOAD_LIMIT_MB = 512  # .streamlit/config.toml server.maxUploadSize (docs/OPERATIONS.md, "Uploads")


def _uploads() -> Path:
    return data_dir() / "uploads"


def save_upload(uploaded) -> Path:
    """Write an uploaded file under ``<data dir>/uploads`` and return its path.

    The file is copied in 1 MiB chunks (``read(n)``, never ``getbuffer()``: no second whole copy in the
    server's memory). The uploads kept are bounded by count and by bytes, the newest first; the one just
    written is always kept.
    """
    folder = _uploads()
    folder.mkdir(parents=True, exist_ok=True)
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", uploaded.name)[-80:] or "upload"
    path = folder / f"{uuid.uuid4().hex[:12]}-{name}"
    uploaded.seek(0)
    try:
        with open(path, "wb") as out:
            while chunk := uploaded.read(CHUNK_BYTES):
                out.write(chunk)
    except BaseException:
        path.unlink(missing_ok=True)  # a disk that filled keeps no half upload
        raise
    _prune_uploads(folder, keep=path)
    return path


def _prune_uploads(folder: Path, keep: Path) -> None:
    files = []
    for p in folder.iterdir():
        try:
            files.append((p.stat().st_mtime, p.stat().st_size, p))
        except FileNotFoundError:  # deleted meanwhile (its import ended)
            continue
    kept, total = 0, 0
    for _mtime, size, p in sorted(files, key=lambda f: (f[2] != keep, -f[0])):
        kept, total = kept + 1, total + size
        if p != keep and (kept > UPLOADS_KEPT or total > UPLOADS_MAX_BYTES):
            p.unlink(missing_ok=True)


def _delete_when_done(path: Path):
    """A job listener that deletes the upload once its import has ended: the run keeps what it needs (its
    summary and points in the store, a snapshot's whole trace in its detail folder), not the file."""

    def listener(_job, event: dict) -> None:
        if event.get("type") == "done":
            path.unlink(missing_ok=True)

    return listener


def _forget_upload(key: str, uploaded) -> None:
    """Drop the server's copy of an upload once it is on disk: Streamlit's own (kept per session until the
    widget is cleared) and the widget's, by giving the uploader a new key."""
    try:
        from streamlit.runtime.scriptrunner import get_script_run_ctx

        ctx = get_script_run_ctx()
        if ctx is not None:
            ctx.uploaded_file_mgr.remove_file(ctx.session_id, uploaded.file_id)
    except Exception:  # noqa: BLE001 - freeing memory early is a courtesy, never a reason to fail the import
        pass
    st.session_state[f"{key}.upload_round"] = st.session_state.get(f"{key}.upload_round", 0) + 1


def _importer(key: str, experiment: str, label: str, help_text: str, ranks: str = "") -> None:
    """An upload or a path on the box, imported by ``experiment``; with ``ranks`` (the experiment that reads a
    job's rank traces) several uploads, or a folder on the box, are the ranks of one job."""
    uploader_key = f"{key}.upload.{st.session_state.get(f'{key}.upload_round', 0)}"
    if ranks:
        files = st.file_uploader(label, key=uploader_key, help=help_text, accept_multiple_files=True) or []
        uploaded = files[0] if len(files) == 1 else None
    else:
        uploaded = st.file_uploader(label, key=uploader_key, help=help_text)
        files = [uploaded] if uploaded is not None else []
    on_box = st.text_input(
        "…or a file on this box (no upload: a file of gigabytes is read where it lies)"
        + ("; a folder: every rank of a job" if ranks else ""),
        key=f"{key}.path",
        placeholder="/path/to/file",
    ).strip()
    job_running = st.session_state.get(f"{key}.job") is not None
    if st.button("Import", key=f"{key}.import", type="primary", disabled=not (files or on_box) or job_running):
        if on_box and ranks and Path(on_box).is_dir():
            run_panel.submit(key, ranks, {"paths": [on_box]}, device="cpu", name=Path(on_box).name)
        elif on_box:
            run_panel.submit(key, experiment, {"path": on_box}, device="cpu", name=Path(on_box).name)
        elif len(files) > 1:
            _import_ranks(key, ranks, files)
        elif uploaded is not None:
            try:
                path = save_upload(uploaded)
            except OSError as exc:
                st.error(f"The upload could not be saved under {md(str(_uploads()))}: {md(exc.strerror or exc)}")
                return
            name = uploaded.name
            _forget_upload(key, uploaded)
            del uploaded
            if not run_panel.submit(
                key, experiment, {"path": str(path)}, device="cpu", name=name, on_event=_delete_when_done(path)
            ):
                path.unlink(missing_ok=True)


def _import_ranks(key: str, experiment: str, files: list) -> None:
    """Several uploads: the ranks of one job, saved one by one and imported together, deleted once imported."""
    paths: list[Path] = []
    try:
        for uploaded in files:
            paths.append(save_upload(uploaded))
    except OSError as exc:
        for path in paths:
            path.unlink(missing_ok=True)
        st.error(f"The uploads could not be saved under {md(str(_uploads()))}: {md(exc.strerror or exc)}")
        return
    name = f"{files[0].name} +{len(files) - 1}"
    for uploaded in files:
        _forget_upload(key, uploaded)
    listeners = [_delete_when_done(path) for path in paths]

    def delete_all(job, event: dict) -> None:
        for listener in listeners:
            listener(job, event)

    if not run_panel.submit(
        key, experiment, {"paths": [str(p) for p in paths]}, device="cpu", name=name, on_event=delete_all
    ):
        for path in paths:
            path.unlink(missing_ok=True)


def _examples(key: str, kind: str) -> bool:
    """One click opens a file recorded elsewhere, on a real GPU, by others (shipped in examples/): its stored
    import where there is one, else a fresh import. Returns whether any example is here."""
    from core.workload import examples

    shipped = examples.of_kind(kind)
    here = [e for e in shipped if examples.present(e)]
    if not here:
        st.info(f"No example {kind} here to open: {md(examples.missing_text(shipped[0]))}", icon=":material/info:")
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
            f"Open an example recorded on {md(e.gpu)}: {md(e.title)}",
            key=f"{key}.example.{e.name}",
            icon=":material/public:",
            disabled=busy,
            help=f"{e.repository}, {e.source_path} at {e.commit[:12]} ({e.licence}). "
            f"`python -m core {e.kind} --example {e.name}` opens it from a shell.",
        ):
            stored = [r for r in _stored(e.experiment) if _example_name(r) == e.name]
            if stored:
                st.session_state[f"{key}.run"] = stored[0]
            else:
                run_panel.submit(key, e.experiment, {"example": e.name}, device="cpu", name=f"example {e.name}")
    return True


def _example_name(run) -> str | None:
    example = run.meta.get("example")
    return example.get("name") if isinstance(example, dict) else None


def _provenance(run) -> None:
    """Where a file recorded elsewhere comes from, above its figures (read defensively: an imported runs file
    may carry any meta)."""
    example = run.meta.get("example")
    if not isinstance(example, dict):
        return

    def said(name: str) -> str:
        return md(example.get(name) or "not recorded")

    ranks = example.get("ranks") or []
    one_rank = f" The set's {len(ranks)} rank files, side by side." if ranks else ""
    notes = f"; {said('notes')}." if example.get("notes") else "."
    st.info(
        f"**Recorded elsewhere**, on {said('gpu')}, by others: {said('title')}. Source: {said('repository')}, "
        f"{said('source_path')} at commit {md(str(example.get('commit', ''))[:12])} ({said('licence')}){notes}{one_rank}",
        icon=":material/public:",
    )


def _stored(*experiments: str) -> list:
    store = lab.store()
    runs = [r for e in experiments for r in (store.list(experiment=e, limit=50) if store else [])]
    return sorted((r for r in runs if r.status == "ok"), key=lambda r: r.started_at, reverse=True)


def _reopen(key: str, *experiments: str) -> None:
    """Open an earlier import (the store keeps them like any run)."""
    runs = _stored(*experiments)
    if not runs:
        return
    labels = {
        r.id: f"{r.name or r.meta.get('file', '')} · {timestamp_text(r.started_at, minutes=True)} · {r.id[:6]}"
        for r in runs
    }
    chosen = st.selectbox(
        "…or open an earlier import", [""] + list(labels), key=f"{key}.reopen", format_func=lambda i: labels.get(i, "—")
    )
    if chosen and st.session_state.get(f"{key}.reopened") != chosen:
        st.session_state[f"{key}.run"] = next(r for r in runs if r.id == chosen)
        st.session_state[f"{key}.reopened"] = chosen


# -- memory snapshots ----------------------------------------------------------------------------------


def snapshot_section(key: str) -> None:
    st.write(
        "Record one in your own training script (`python -m core record -o snap.pickle -- python train.py`, or "
        "`torch.cuda.memory._record_memory_history()` + `_dump_snapshot()`) on any machine, then import it "
        "here. Pickles of any protocol, JSON and `.gz` are read; a pickle that names a class is refused. Uploads "
        f"take up to {UPLOAD_LIMIT_MB} MB; for larger files give their path on this box below, or run "
        "`python -m core snapshot FILE`: both import into the same store without an upload."
    )
    _importer(key, "memory-snapshot", "Memory snapshot", "torch.cuda.memory._dump_snapshot pickle, its JSON, or .gz")
    shipped = _examples(key, "snapshot")
    _reopen(key, "memory-snapshot")
    run_panel.results(
        key,
        lambda run: render_snapshot(run, key),
        empty="No snapshot imported yet: upload one and press Import"
        + (", or open an example above." if shipped else "."),
    )


@st.cache_resource(max_entries=2, show_spinner="Reading the whole trace…")
def _analysis(detail_id: str):
    from core.workload import detail
    from core.workload.snapshot_analysis import analyse

    return analyse(detail.load(detail_id))


def render_snapshot(run, key: str) -> None:
    from core.workload import detail

    m = run.meta
    _provenance(run)
    _findings(m)
    cols = st.columns(5)
    cols[0].metric(
        "Peak allocated", bytes_text(m["peak_allocated_bytes"]), f"at {m['peak_time_ms']:,.2f}", delta_color="off"
    )
    cols[1].metric("Peak reserved", bytes_text(m["peak_reserved_bytes"]))
    cols[2].metric(
        "Before recording",
        bytes_text(m["baseline_allocated_bytes"]),
        f"{m['baseline_allocated_blocks']:,} block(s)",
        delta_color="off",
        help="Blocks the segments show active that the trace never allocated, and blocks it frees "
        "without having allocated: they were there before recording began.",
    )
    cols[3].metric(
        "Trace events", f"{m['trace_events']:,}", f"device {m['device']} of {m['devices']}", delta_color="off"
    )
    cols[4].metric("Reserved − allocated at the peak", bytes_text(m["fragmentation_at_peak_bytes"]))
    st.caption(
        f"{md(m['file'])} · {m['source']['format']} · {bytes_text(m['file_bytes'])} · "
        f"x axis: {m['x_axis']}. Allocated is replayed from the trace's own sizes (as memory_viz draws it)."
    )
    for note in m.get("notes", []):
        st.info(note)
    _quirks(m.get("quirks") or {})
    if not detail.exists(m.get("detail_id")):
        st.warning(
            "The full-resolution trace of this import is no longer on this machine (the newest "
            f"{detail.KEEP} are kept): showing its {len(run.rows):,} stored points."
        )
        show_charts(snap_plots.figures(run), f"{key}.stored")
        return
    a = _analysis(m["detail_id"])
    duration = float(a.point_time_ms([len(a.allocated) - 1])[0])
    cols = st.columns([3, 1])
    window = cols[0].slider(
        "Time window",
        0.0,
        max(duration, 1e-3),
        (0.0, max(duration, 1e-3)),
        key=f"{key}.window.{run.id}",
        help="Zoom: the charts re-read this window from the whole "
        "trace, each bin keeping its highest and lowest point.",
    )
    budget = int(
        cols[1].number_input(
            "Points per chart",
            500,
            MAX_CHART_POINTS,
            DEFAULT_CHART_POINTS,
            step=500,
            key=f"{key}.points.{run.id}",
            help="All series of a chart together.",
        )
    )
    points = a.points_between(window[0], window[1], budget // 2)  # allocated and reserved
    t_ms = a.point_time_ms(points)
    show(
        snap_plots.timeline_figure(
            t_ms,
            a.allocated[points],
            a.reserved[points],
            m,
            run,
            f"{len(points):,} of {len(a.allocated):,} points drawn",
        ),
        pd.DataFrame({"t_ms": t_ms, "allocated_bytes": a.allocated[points], "reserved_bytes": a.reserved[points]}),
        "snapshot-timeline",
        f"{key}.timeline",
    )
    with st.expander("Python stack at the peak", expanded=True):
        st.code("\n".join(m["peak_stack"]) or "(no Python stack recorded for this allocation)", language=None)

    st.subheader("Who holds memory at a moment")
    moment = st.slider(
        "Moment",
        0.0,
        max(duration, 1e-3),
        float(m["peak_time_ms"]),
        key=f"{key}.moment.{run.id}",
        help="Defaults to the peak.",
    )
    point = a.point_at_ms(moment)
    when = f"at {float(a.point_time_ms([point])[0]):,.2f} ({bytes_text(a.allocated[point])} allocated)"
    sites = a.top_sites(point, 25)
    if sites:
        show(
            snap_plots.sites_figure(sites, when, run),
            snap_plots.sites_frame(sites).drop(columns=["stack"]),
            "snapshot-sites",
            f"{key}.sites",
        )
        cats = a.categories_at(point)
        held = ", ".join(f"{k.replace('_', ' ')} {bytes_text(v)}" for k, v in cats.items() if v)
        st.caption(f"Categories {when}: {held}")
    else:
        st.info(f"Nothing live at this moment ({when.removeprefix('at ')}): no block is allocated.")
    segments, numbers = a.segment_map_at(point, max_segments=128, max_blocks=budget)
    show(snap_plots.segment_map_figure(segments, when, numbers, run), None, "snapshot-segments", f"{key}.segments")

    st.subheader("Categories over time")
    cat_points = a.points_between(window[0], window[1], budget // len(snap_plots.CATEGORIES))
    cat_t = a.point_time_ms(cat_points)
    series = a.category_series(cat_points)
    show(
        snap_plots.categories_figure(cat_t, series, m, run),
        pd.DataFrame({"t_ms": cat_t, **{f"{k}_bytes": v for k, v in series.items()}}),
        "snapshot-categories",
        f"{key}.categories",
    )
    st.caption(
        "Inferred from each allocation's Python stack and lifetime; nothing is guessed: an allocation no rule "
        "matches is *unknown*. The rules, first match wins, and what each classified:"
    )
    st.dataframe(snap_plots.rules_frame(m), hide_index=True)
    show(
        snap_plots.fragmentation_figure(t_ms, a.reserved[points], a.allocated[points], m, run),
        pd.DataFrame({"t_ms": t_ms, "fragmentation_bytes": a.reserved[points] - a.allocated[points]}),
        "snapshot-fragmentation",
        f"{key}.fragmentation",
    )
    _compare(run, key)


def _compare(run, key: str) -> None:
    others = [r for r in _stored("memory-snapshot") if r.id != run.id]
    st.subheader("Compare with another snapshot")
    if not others:
        st.caption(
            "Import a second snapshot (e.g. before and after a change) to put both on one time axis and see "
            "which allocation sites make the difference."
        )
        return
    labels = {
        r.id: f"{r.name or r.meta.get('file', '')} · {timestamp_text(r.started_at, minutes=True)} · {r.id[:6]}"
        for r in others
    }
    other_id = st.selectbox("Snapshot B", list(labels), format_func=labels.get, key=f"{key}.compare.{run.id}")
    other = next(r for r in others if r.id == other_id)
    show_charts(snap_plots.overlay([run, other]), f"{key}.overlay")
    diff = snap_plots.site_differences(run, other)
    if not diff.empty:
        st.dataframe(
            diff.assign(**{"Δ GiB": (diff["delta_bytes"] / GIB).round(4)}).drop(columns=["stack"]), hide_index=True
        )


# -- profiler traces -----------------------------------------------------------------------------------


def trace_section(key: str) -> None:
    st.write(
        "A Chrome/Kineto trace from `torch.profiler` (`prof.export_chrome_trace(...)` or "
        "`tensorboard_trace_handler`) recorded on any machine: kernel groups, top kernels, GPU busy vs idle, "
        "compute / copy / communication overlap, and a breakdown per `ProfilerStep`."
    )
    _importer(
        key,
        "profiler-trace",
        "Profiler trace",
        ".json or .json.gz; several files: the ranks of one job, side by side",
        ranks="profiler-trace-ranks",
    )
    shipped = _examples(key, "trace")
    _reopen(key, "profiler-trace", "profiler-trace-ranks")
    run_panel.results(
        key,
        render_trace,
        empty="No trace imported yet: upload one and press Import"
        + (", or open an example above." if shipped else "."),
    )


def _quirks(found: dict[str, int]) -> None:
    """What the reader found odd in the file, with counts: never silent, out of the way when there is none."""
    if found:
        with st.expander(f"What was odd in this file ({len(found)} kind{'s' if len(found) > 1 else ''})"):
            st.markdown("\n".join(f"- {count:,} × {md(why)}" for why, count in found.items()))


def _findings(m: dict) -> None:
    """The diagnosis first: the import's findings (derived once, in the engine), each with its number."""
    if found := m.get("findings"):
        st.markdown("**What stands out**\n\n" + "\n".join(f"{i}. {md(f['text'])}" for i, f in enumerate(found, 1)))


def render_trace(run) -> None:
    if run.experiment == "profiler-trace-ranks":
        render_ranks(run)
        return
    m = run.meta
    _provenance(run)
    _findings(m)
    _quirks(m.get("quirks") or {})
    if not m.get("gpu_activities"):
        st.warning(m.get("note", "no GPU activity in this trace"))
        return
    cols = st.columns(5)
    cols[0].metric(
        "Kernel time",
        f"{m['kernel_time_us'] / 1000:,.3f} ms",
        f"{m['kernel_count']:,} kernels",
        delta_color="off",
        help="Sum of kernel durations (overlapping kernels count twice).",
    )
    cols[1].metric(
        "GPU busy",
        f"{m['busy_us'] / 1000:,.3f} ms",
        f"of {m['span_us'] / 1000:,.3f} ms span",
        delta_color="off",
        help="Union of all kernels, copies and sets.",
    )
    cols[2].metric("GPU idle", f"{m['idle_us'] / 1000:,.3f} ms", f"{m['idle_share']:.1%}", delta_color="off")
    cols[3].metric(
        "Exposed communication",
        f"{m['exposed_communication_us'] / 1000:,.3f} ms",
        help="Communication kernels not hidden behind compute.",
    )
    cols[4].metric("Steps", m.get("steps", 0))
    st.caption(
        f"{md(m['file'])} · GPU {m['device']} ({md(m['device_name'])}) of {m['devices']} · streams {m['streams']} · "
        f"{m['events']:,} events · {m['step_basis']}"
    )
    causes, launch = m.get("idle_causes"), m.get("launch") or {}
    if causes:  # runs stored before the idle breakdown have none
        waits = st.columns(4)
        total = sum(causes.values())
        waits[0].metric(
            "Host wait",
            f"{causes['host_wait_us'] / 1000:,.3f} ms",
            f"{causes['host_wait_us'] / total:.1%} of the gaps" if total else None,
            delta_color="off",
            help="Gaps on a stream before a kernel whose launch call came after the previous kernel ended: "
            "the GPU waited for the CPU. Summed over streams (HolisticTraceAnalysis' idle breakdown).",
        )
        waits[1].metric(
            "Kernel wait",
            f"{causes['kernel_wait_us'] / 1000:,.3f} ms",
            help=f"Other gaps shorter than {m.get('kernel_wait_threshold_us', 30):g} µs: back-to-back launch overhead.",
        )
        waits[2].metric("Other wait", f"{causes['other_wait_us'] / 1000:,.3f} ms", help="Events, other streams.")
        if launch.get("launched"):
            waits[3].metric(
                "Launch-bound kernels",
                f"{launch['launch_bound_share']:.1%}",
                f"median launch delay {launch['launch_delay_p50_us']:,.1f} µs",
                delta_color="off",
                help="Kernels (and copies) that ran shorter than their launch call took on the CPU; the delay "
                "is kernel start − its launch call's start.",
            )
    show_charts(trace_plots.figures(run), f"trace.{run.id}")
    if m.get("rules"):
        with st.expander("Kernel group rules: what each matched"):
            st.dataframe(
                [
                    {"rule": r["rule"], "group": r["group"], "kernels": r["count"], "ms": r["us"] / 1000}
                    for r in m["rules"]
                ],
                hide_index=True,
            )
    kernels = kind_rows(run, "kernel")
    if not kernels.empty:
        st.dataframe(kernels.drop(columns=["kind"]), hide_index=True)
    steps = kind_rows(run, "step")
    if not steps.empty:
        st.dataframe(steps.drop(columns=["kind"]), hide_index=True)


def render_ranks(run) -> None:
    """Every rank of a job side by side: the straggler, each rank's time, each step on each rank."""
    m = run.meta
    _findings(m)
    _quirks(m.get("quirks") or {})
    s = m["straggler"]
    cols = st.columns(4)
    cols[0].metric("Ranks", len(m["ranks"]), f"of world size {m['world_size'] or '?'}", delta_color="off")
    cols[1].metric(
        "Straggler",
        f"rank {s['rank']}",
        f"{s['margin_pct']:+.1f}% compute over the median rank",
        delta_color="inverse",
        help="The rank with the most compute time (union of its compute kernels) against the median over the ranks.",
    )
    cols[2].metric("Straggler's extra compute", f"{s['margin_us'] / 1000:,.3f} ms")
    cols[3].metric("Backend", m.get("backend") or "unknown")
    st.caption(f"{md(m['file'])} · files {md(', '.join(m['files']))} · {md(m['measure'])}")
    show_charts(trace_plots_ranks.figures(run), f"ranks.{run.id}")
    ranks = kind_rows(run, "rank")
    st.dataframe(
        ranks[
            [
                "rank",
                "file",
                "device_name",
                "kernel_time_us",
                "compute_us",
                "communication_us",
                "exposed_communication_us",
                "idle_us",
                "span_us",
                "host_wait_us",
            ]
        ],  # fmt: skip
        hide_index=True,
    )
    steps = kind_rows(run, "step")
    if not steps.empty:
        st.write("Each step's wall time (ms), rank by rank:")
        steps = steps.astype({"step": int, "rank": int})
        table = steps.pivot_table(index="step", columns="rank", values="wall_us", aggfunc="first") / 1000
        st.dataframe(table.rename(columns=lambda r: f"rank {r}"))

"""The Home page's health panel: is this box as fast as it should be, and is it still? (``python -m core health``);
a stored check judged again by today's rules (``python -m core health --judge RUN_ID``)."""

from __future__ import annotations

import json
import threading

import pandas as pd
import streamlit as st

from core.hardware.identity import box_label, made_here
from core.health import check, words
from core.health.rejudge import rejudge
from core.jsonable import json_ready
from core.result import RunResult, RunSummary
from core.rows.health import HealthRow, HealthSummary, health_rows
from core.units import duration_text, timestamp_text
from pages.common import lab, run_panel
from pages.common.tables import show_table
from render.health import health_html

ICONS = {
    "pass": "✅ pass",
    "below expected": "⚠️ below expected",
    "far below": "❌ far below",
    "not comparable": "➖ not comparable",
    "no reference": "➖ no reference",
    "not measured": "➖ not measured",
    "fail": "❌ fail",
}


HEALTH_RUNS_READ = 50  # the newest checks looked at for this box's own


@st.cache_resource(show_spinner=False)
def _state() -> dict:
    """Server-wide: one health check at a time (it needs every GPU), visible from every tab."""
    return {"thread": None, "device": None, "progress": (0, 0, ""), "error": None}


def _thread(state: dict, cfg: check.HealthConfig) -> None:
    """A thread of the server: the check's orchestration imports no torch; its jobs queue with everyone else's."""
    try:
        store = lab.store()
        report = check.run_health(
            cfg, lab.manager(), store=store, on_progress=lambda d, t, m: state.update(progress=(d, t, m))
        )
        if store is not None:
            store.save(report.to_run())
    except Exception as exc:  # noqa: BLE001 - shown on the page, never raised into the server
        state["error"] = f"{type(exc).__name__}: {exc}"


def _running(state: dict) -> bool:
    return state["thread"] is not None and state["thread"].is_alive()


@st.fragment(run_every=1.0)
def _progress() -> None:
    state = _state()
    if not _running(state):
        st.rerun(scope="app")
        return
    done, total, message = state["progress"]
    st.progress(done / total if total else 0.0, text=f"health on {state['device']}: {done}/{total} · {message}")


def _device(selected: str) -> str:
    """The sidebar's device as the check's: every GPU for "all", else the one selected."""
    return "auto" if selected == "all" else selected


def section() -> None:
    st.header("Health: is this box as fast as it should be?")
    st.write(
        "The doctor's checks, a sustained matmul and a bounded shape search on every GPU, host↔device copies and "
        "all_reduce, each judged like for like: the search's best against the published maximum for this card, the "
        "soak's fixed shape per clock against the same shape on a healthy card, the rest against the datasheet × a "
        "stated fraction, with the clock, power and NVML's slowdown reasons read while measured, and against this "
        "box's earlier runs. Also `python -m core health` (exit 1 when a figure is below expected)."
    )
    state = _state()
    device = _device(lab.selected_device())
    cols = st.columns([2, 1])
    soak_s = cols[0].slider("Soak per GPU (s)", 10, 600, 60, step=10, key="home.health.soak")
    quick = cols[1].checkbox("Quick (10 s soak, small copies)", key="home.health.quick")
    running = _running(state)
    if st.button(f"Run the health check on {device}", key="home.health", icon=":material/favorite:", disabled=running):
        cfg = check.HealthConfig(device=device, soak_s=float(soak_s), quick=quick)
        state.update(device=device, progress=(0, len(cfg.parts), "starting"), error=None)
        state["thread"] = threading.Thread(target=_thread, args=(state, cfg), daemon=True, name="gpulab-health")
        state["thread"].start()
        running = True
    if running:
        _progress()
        return
    if state["error"]:
        st.error(f"The health check could not run: {state['error']}")
    store = lab.store()
    checks = store.summaries(experiment="health", limit=HEALTH_RUNS_READ) if store is not None else []
    here = [r for r in checks if not r.imported and made_here(r.device)]  # another box's check is never this one's
    if not here:
        st.info(
            "The health check has not run on this box yet."
            + (" Checks from other boxes can be judged again below, labelled with their origin." if checks else "")
        )
    elif run := run_panel.opened(here[0].id):  # the list reads summaries; the one shown is read whole
        run_panel.guarded(run, lambda: show(run, "home.health"))
    if checks:
        judge_again(store, [c for c in checks if "nodes" not in c.config])  # a cluster's check is judged by node


def show(run: RunResult, key: str) -> None:
    """A check's banner, its verdict table and its report and bundle to download."""
    kind, said = words.banner(run)
    took = duration_text(HealthSummary.from_run(run).wall_s or 0.0)
    getattr(st, kind)(f"{said} ({took}, {timestamp_text(run.started_at)} UTC)")
    show_table(pd.DataFrame([_row(r) for r in health_rows(run)]), hide_index=True)
    cols = st.columns(2)
    cols[0].download_button(
        "Health report (one HTML page, for a ticket)",
        health_html(run),
        "gpulab-health.html",
        "text/html",
        key=f"{key}.html",
        on_click="ignore",
    )
    cols[1].download_button(
        "Health bundle (JSON)",
        json.dumps(json_ready(run.to_dict()), indent=1, allow_nan=False),
        "gpulab-health.json",
        "application/json",
        key=f"{key}.json",
        on_click="ignore",
    )


def _row(r: HealthRow) -> dict:
    return {
        "figure": r.figure,
        "where": words.place(r),
        "measured": words.cell(r, r.measured),
        "per clock": r.per_clock.text if r.per_clock else "",
        "while measured": words.while_measured(r),
        "reference": words.reference_text(r),
        "verdict": ICONS.get(r.verdict, r.verdict) + words.marks(r),
        "why": words.why(r),
        "source": words.source(r),
    }


def judge_again(store, checks: list[RunSummary]) -> None:
    """Any stored check judged again by today's rules and references, as the box it was measured on."""
    with st.expander("Judge a stored check again by today's rules"):
        st.caption(
            "After a rule or a reference changes, or for a check imported from another box (judged as that box): "
            "nothing is measured or stored. Also `python -m core health --judge RUN_ID`."
        )
        labels = {c.id: _label(c) for c in checks}
        picked = st.selectbox(
            "Stored check", list(labels), format_func=labels.__getitem__, key="home.health.judge.pick"
        )
        if st.button("Judge again", key="home.health.judge", disabled=picked is None):
            st.session_state["home.health.judged"] = picked
        judged = st.session_state.get("home.health.judged")
        if judged in labels and (original := run_panel.opened(judged)):
            run_panel.guarded(original, lambda: _judged_again(original, store))


def _judged_again(original: RunResult, store) -> None:
    report = rejudge(original, store)
    if report.judged_again:  # set by every judgement again
        st.info(f"Judged again by today's rules: {report.judged_again.origin}")
    show(report.to_run(original), "home.health.judged")


def _label(run: RunSummary) -> str:
    where = box_label(run.device) if run.device else "?"
    imported = " · imported" if run.imported else ""
    return f"{timestamp_text(run.started_at)} UTC · {where} · {run.status}{imported}"

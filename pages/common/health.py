"""The Home page's health panel: is this box as fast as it should be, and is it still? (``python -m core health``)."""

from __future__ import annotations

import json
import threading

import pandas as pd
import streamlit as st

from core.health import check
from core.jsonable import json_ready
from core.units import duration_text, timestamp_text
from pages.common import lab
from render.health import health_html

ICONS = {
    "pass": "✅ pass",
    "below expected": "⚠️ below expected",
    "far below": "❌ far below",
    "no reference": "➖ no reference",
    "not measured": "➖ not measured",
    "fail": "❌ fail",
}


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
        "The doctor's checks, a sustained matmul on every GPU (burst against sustained), host↔device copies and "
        "all_reduce, each judged against the published figure for this exact card (else its datasheet × a stated "
        "fraction) and against this box's earlier runs. Also `python -m core health` (exit 1 when a figure is "
        "below expected)."
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
    latest = store.list(experiment="health", limit=1) if store is not None else []
    if not latest:
        st.info("The health check has not run on this box yet.")
        return
    run = latest[0]
    kind, words = check.banner(run)
    took = duration_text(run.meta.get("wall_s") or 0.0)
    getattr(st, kind)(f"{words} ({took}, {timestamp_text(run.started_at)} UTC)")
    st.dataframe(
        pd.DataFrame(
            [
                {
                    "figure": r["figure"],
                    "where": " ".join(filter(None, (r.get("node"), r["where"]))),
                    "measured": check.cell(r, "measured"),
                    "reference": r["reference_label"] or check.cell(r, "reference"),
                    "verdict": ICONS.get(r["verdict"], r["verdict"]) + (" · regressed" if r.get("regressed") else ""),
                    "why": "; ".join(filter(None, (r["reason"], (r.get("history") or {}).get("text")))),
                    "source": f"{r['source']} ({r['date']})" if r.get("source") else "",
                }
                for r in run.rows
            ]
        ),
        hide_index=True,
    )
    cols = st.columns(2)
    cols[0].download_button(
        "Health report (one HTML page, for a ticket)",
        health_html(run),
        "gpulab-health.html",
        "text/html",
        key="home.health.html",
        on_click="ignore",
    )
    cols[1].download_button(
        "Health bundle (JSON)",
        json.dumps(json_ready(run.to_dict()), indent=1, allow_nan=False),
        "gpulab-health.json",
        "application/json",
        key="home.health.json",
        on_click="ignore",
    )

"""The one way a page runs an experiment: Run button → queued/progress/cancel → stored result.

The job lives in the server-wide :class:`~core.jobs.JobManager`; the page only keeps its id in
session state, and a ``run_every`` fragment polls it (no ``st.*`` call from other threads). When
the job ends, its :class:`~core.result.RunResult` (already in the store) is drawn by the page's
``render`` function — the same function that redraws a stored run later.
"""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from core.errors import ConfigError
from core.lifecycle import Listener
from core.result import RunResult
from core.rows.notes import RunNotes
from core.store import StoreError
from core.units import duration_text, timestamp_text
from pages.common import lab
from pages.common.markdown import markdown_text
from render.style import device_label

Render = Callable[[RunResult], None]


def _job_key(key: str) -> str:
    return f"{key}.job"


def _run_key(key: str) -> str:
    return f"{key}.run"


def _scroll_key(key: str) -> str:
    return f"{key}.scroll"


# Brings the answer's top to the top of the window (below Streamlit's header bar), again while the charts below
# it are still arriving (the page may not yet be tall enough to scroll that far), and never once the person
# scrolls by hand. Written here, with no input from anyone, so the script carries nothing a user could inject.
_SCROLL_SCRIPT = """<div id="{anchor}" style="scroll-margin-top: 4rem"></div><script>
(() => {{
  const anchor = document.getElementById("{anchor}");
  let tries = 0;
  const stop = () => {{ tries = 99; }};
  window.addEventListener("wheel", stop, {{ once: true }});
  window.addEventListener("touchmove", stop, {{ once: true }});
  window.addEventListener("keydown", stop, {{ once: true }});
  const bring = () => {{
    if (tries++ > 8 || !anchor || !anchor.isConnected) return;
    anchor.scrollIntoView({{ block: "start" }});
    setTimeout(bring, 250);
  }};
  bring();
}})();
</script>"""


def _bring_into_view(key: str) -> None:
    """Scroll the window to the answer that has just come (a run the person asked for), not to one shown again."""
    anchor = "gl-answer-" + "".join(c if c.isalnum() else "-" for c in key)
    st.html(_SCROLL_SCRIPT.format(anchor=anchor), unsafe_allow_javascript=True)


def guarded(run: RunResult | list[RunResult], draw: Callable[[], None]) -> None:
    """Draw a section of a stored run; one its views cannot read (a run stored by an odd import, or by a version
    whose fields differ) is named with what went wrong instead of taking the page down for every visitor. It
    stays stored: ``python -m core runs show`` prints it, ``runs check`` names the runs the store cannot read."""
    try:
        draw()
    except Exception as exc:  # noqa: BLE001 - a stored run is outside input: its section says so, the page goes on
        what = markdown_text(f"{type(exc).__name__}: {exc}"[:300])
        runs = run if isinstance(run, list) else [run]
        named = ", ".join(
            f"`{r.id[:12]}` ({markdown_text(r.experiment)}, {timestamp_text(r.started_at)})" for r in runs[:4]
        )
        st.error(
            f"Cannot show {'runs' if len(runs) > 1 else 'run'} {named}: {what}. It stays stored: `python -m core runs show {runs[0].id}` prints it "
            "and `python -m core runs check` names damaged runs."
        )


def opened(run_id: str) -> RunResult | None:
    """A stored run read whole, as a page is about to show it (lists read summaries only); one the store cannot
    read is named in words instead, and None."""
    store = lab.store()
    if store is None:
        return None
    try:
        return store.get(run_id)
    except KeyError:  # deleted meanwhile
        return None
    except StoreError as exc:  # a damaged run (core.store.DamagedRun) or a store that fails
        st.error(markdown_text(exc))
        return None


def status_banner(run: RunResult) -> None:
    """What happened to a run, in words, above its charts."""
    when = timestamp_text(run.started_at)
    took = f", {duration_text(run.duration_s)}" if run.duration_s is not None else ""
    st.caption(f"Run `{run.id[:8]}` · {markdown_text(device_label(run))} · {markdown_text(when)} UTC{took}")
    failure = run.failure  # what kind of failure, from core.result.ERROR_KINDS: its banner and words
    if failure:
        banner = getattr(st, failure.banner)
        banner(
            failure.says.format(
                status=run.status,
                error=markdown_text(run.error or f"{run.status} on this device"),
                detail=markdown_text(run.error_detail),
                points=len(run.rows),
            )
        )
    said = RunNotes.from_run(run)
    for error in said.measurement_errors:
        st.error(error[:1].upper() + error[1:])
    if said.store_error:
        st.warning(f"The run could not be stored: {markdown_text(said.store_error)}")


def submit(
    key: str,
    experiment: str,
    values: dict,
    device: str | None = None,
    name: str = "",
    on_event: Listener | None = None,
    scroll: bool = True,
) -> bool:
    """Queue a run for this page; shows a clear message and returns False on bad settings. ``on_event``
    hears the job's events in the job's thread (e.g. its end: ``{"type": "done", …}``); ``scroll``: bring the
    answer into view when it comes (a run the person asked for, not one a page starts as it opens)."""
    try:
        job = lab.manager().submit(experiment, values, device or lab.selected_device(), name=name, on_event=on_event)
    except ConfigError as exc:
        st.error(f"Invalid settings: {markdown_text(exc)}")
        return False
    st.session_state[_job_key(key)] = job.id
    st.session_state[_scroll_key(key)] = scroll
    return True


def run_controls(
    key: str, experiment: str, values: Callable[[], dict], label: str = "Run", device: str | None = None
) -> None:
    """A Run button that validates the settings (built lazily by ``values``) and queues the job."""
    job = _current_job(key)
    running = job is not None and job.state != "done"
    if st.button(label, key=f"{key}.button", type="primary", disabled=running):
        try:
            submitted = values()
        except ConfigError as exc:
            st.error(f"Invalid settings: {markdown_text(exc)}")
            return
        submit(key, experiment, submitted, device)


def show_stored(key: str, run: RunResult, scroll: bool = True) -> None:
    """Make a stored run this page's result, with no job (a run reused, an earlier import reopened)."""
    st.session_state.pop(_job_key(key), None)
    st.session_state[_run_key(key)] = run
    st.session_state[_scroll_key(key)] = scroll


def _current_job(key: str):
    job_id = st.session_state.get(_job_key(key))
    return lab.manager().get(job_id) if job_id else None


def results(key: str, render: Render, empty: str = "No run yet: choose settings and press Run.") -> RunResult | None:
    """Progress while the page's job runs, then its result drawn by ``render``; returns the run shown."""
    job = _current_job(key)
    if job is not None and job.state == "done":
        st.session_state[_run_key(key)] = job.result
        del st.session_state[_job_key(key)]
        # Widgets above were drawn while the job still ran (disabled Run/Import/example buttons); with no
        # further rerun they would stay disabled until the user's next click.
        st.rerun(scope="app")
    if job is not None:
        _progress(key)
        return None
    run = st.session_state.get(_run_key(key))
    if run is None:
        st.info(empty)
        return None
    if st.session_state.pop(_scroll_key(key), False):
        _bring_into_view(key)
    guarded(run, lambda: _draw(run, render))
    return run


def _draw(run: RunResult, render: Render) -> None:
    status_banner(run)
    if run.rows or run.status == "ok":
        render(run)


@st.fragment(run_every=0.5)
def _progress(key: str) -> None:
    job = _current_job(key)
    if job is None or job.state == "done":
        st.rerun(scope="app")
        return
    if job.state == "queued":
        position = lab.manager().queue_position(job)
        st.info(
            f"Queued{f' (position {position})' if position else ''}: {job.message} — jobs on one device "
            f"run one at a time so timings are never polluted."
        )
    else:
        text = job.message or "running"
        if job.total_steps:
            text = f"{job.done_steps}/{job.total_steps} · {text}"
        st.progress(job.fraction, text=text)
    if st.button("Cancel", key=f"{key}.cancel"):
        job.cancel()

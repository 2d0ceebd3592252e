"""Waiting for a page's answer in AppTest: for the state, never for a fixed time, and without redrawing the page
while its jobs run.

Each ``at.run()`` runs the whole page script (widgets, Markdown, figures); polling by rerunning kept both cores
busy drawing progress bars nobody reads. Here the wait is on the server's job manager (the one the page
submits to: AppTest runs the page in a thread of this process), and the page is drawn once the jobs have
ended — again only while what the test waits for is not there yet (a page may start a follow-up job, or draw
its answer one rerun later).
"""

from __future__ import annotations

import time
from collections.abc import Callable

POLL_S = 0.25


def until(at, ready: Callable, timeout_s: float = 180.0, what: str = "the page's answer"):
    """Draw ``at`` once its jobs have ended, until ``ready(at)`` holds; returns ``at``."""
    from pages.common import lab

    deadline = time.monotonic() + timeout_s
    while True:
        while lab.manager().active() and time.monotonic() < deadline:
            time.sleep(POLL_S)
        at.run()
        if ready(at):
            return at
        if time.monotonic() >= deadline:
            errors = [e.value for e in at.error]
            raise AssertionError(f"no {what} within {timeout_s:g} s: errors {errors}, exceptions {at.exception}")
        time.sleep(POLL_S)


def metric(label: str) -> Callable:
    """Ready once a metric with this label is drawn."""
    return lambda at: any(m.label == label for m in at.metric)


def chart(at) -> bool:
    """Ready once a chart is drawn."""
    return bool(at.get("plotly_chart"))


def error(at) -> bool:
    """Ready once an error is shown."""
    return bool(at.error)

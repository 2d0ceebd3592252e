"""Load: four sessions submit five jobs each at once on one device, through two JobManagers (the
dashboard's and a second one, as a second server or the CLI would have). All 20 must complete,
each session's jobs in its order, never two on the device at once (from the recorded start/end
times, which the worker takes while it holds the device lock), none lost, the store consistent.
"""

from __future__ import annotations

import statistics
import threading
import time
from datetime import datetime

from core.jobs import JobManager

SESSIONS, JOBS_PER_SESSION = 4, 5
WAIT_S = 300


def _t(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


def test_four_sessions_five_jobs_each_on_one_device(manager, store, app):
    at = app.run()  # the dashboard, warmed up (device list cached) before the queue fills
    second = JobManager(store=store)  # another process's queue; only the workers' device lock serialises them
    managers = [manager, manager, manager, second]
    submitted: dict[int, list] = {}
    barrier = threading.Barrier(SESSIONS)

    def session(n: int) -> None:
        barrier.wait()
        submitted[n] = [
            managers[n].submit("probe", {"steps": 2, "seconds": 0.02}, "cpu", name=f"s{n}-j{i}")
            for i in range(JOBS_PER_SESSION)
        ]

    try:
        threads = [threading.Thread(target=session, args=(n,)) for n in range(SESSIONS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        jobs = [job for n in range(SESSIONS) for job in submitted[n]]

        begun = time.monotonic()
        at.run()  # the page while the queue is full
        page_s = time.monotonic() - begun
        assert not at.exception

        runs = [job.wait(WAIT_S) for job in jobs]
    finally:
        second.shutdown()

    assert all(run is not None for run in runs), "a job never finished"
    assert [run.status for run in runs] == ["ok"] * len(jobs), [run.error for run in runs if run.status != "ok"]

    intervals = sorted((_t(run.started_at), _t(run.finished_at), run.name) for run in runs)
    for (_, end, name), (start, _, next_name) in zip(intervals, intervals[1:]):
        assert start >= end, f"{next_name} started {end - start:.3f} s before {name} finished: two jobs at once"

    for n in range(SESSIONS):
        starts = [_t(job.result.started_at) for job in submitted[n]]
        assert starts == sorted(starts), f"session {n}'s jobs ran out of order"

    stored = store.list(experiment="probe")
    assert sorted(r.id for r in stored) == sorted(run.id for run in runs), "runs lost or duplicated in the store"
    for run in runs:
        kept = store.get(run.id)
        assert kept.status == "ok" and kept.rows == run.rows and len(kept.rows) == 2 and kept.finished_at
    assert store.list(status="running") == []
    assert {r.meta["worker"]["pid"] for r in stored} and len({r.meta["worker"]["pid"] for r in stored}) == 2

    latency_s = [_t(job.result.started_at) - _t(job.submitted_at) for job in jobs]
    busy_s = sum(end - start for start, end, _ in intervals)
    print(
        f"\nload: {len(jobs)} jobs, wall {intervals[-1][1] - intervals[0][0]:.2f} s, device busy {busy_s:.2f} s; "
        f"submit-to-start median {statistics.median(latency_s):.2f} s, max {max(latency_s):.2f} s; "
        f"dashboard rerun with the queue full {page_s:.2f} s"
    )

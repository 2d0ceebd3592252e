"""The run store keeps everything across restarts and knows its schema version."""

import sqlite3

import pytest

from core.result import RunResult, now_iso
from core.store import DB_VERSION, RunStore, StoreError


def make_run(**over) -> RunResult:
    values = dict(
        experiment="probe",
        config={"steps": 1},
        device={"kind": "cpu", "name": "test CPU"},
        versions={"torch": "x"},
        started_at=now_iso(),
        finished_at=now_iso(),
        status="ok",
        rows=[{"step": 1, "value": float("inf")}],
    )
    values.update(over)
    return RunResult(**values)


def test_runs_survive_a_restart_of_the_store(tmp_path):
    path = tmp_path / "runs.sqlite"
    runs = [make_run(status=s) for s in ("ok", "error", "cancelled", "unsupported")]
    store = RunStore(path)
    for run in runs:
        store.save(run)
    del store
    again = RunStore(path)
    assert {r.id: r.status for r in again.list()} == {r.id: r.status for r in runs}
    assert again.get(runs[0].id).rows == [{"step": 1, "value": "inf"}]  # strict JSON keeps the overflow
    assert again.get(runs[0].id).frame()["value"].iloc[0] == float("inf")


def test_wal_mode_and_schema_version(tmp_path):
    path = tmp_path / "runs.sqlite"
    RunStore(path)
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA user_version").fetchone()[0] == DB_VERSION


def test_a_database_from_a_newer_lab_is_refused_not_damaged(tmp_path):
    path = tmp_path / "runs.sqlite"
    RunStore(path).save(make_run())
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {DB_VERSION + 1}")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="newer than this GPU Lab"):
        RunStore(path)


def test_filters(tmp_path):
    store = RunStore(tmp_path / "r.sqlite")
    store.save(make_run(experiment="matmul", started_at="2026-01-02T00:00:00+00:00"))
    store.save(
        make_run(
            experiment="probe",
            started_at="2026-03-02T00:00:00+00:00",
            device={"kind": "cuda", "name": "NVIDIA H100 80GB HBM3"},
        )
    )
    assert [r.experiment for r in store.list(experiment="matmul")] == ["matmul"]
    assert [r.experiment for r in store.list(device="H100")] == ["probe"]
    assert [r.experiment for r in store.list(since="2026-02-01")] == ["probe"]
    assert len(store.frame()) == 2 and store.count() == 2
    assert store.delete([r.id for r in store.list(experiment="matmul")]) == 1 and store.count() == 1


def test_running_runs_of_a_dead_process_become_interrupted(tmp_path):
    store = RunStore(tmp_path / "r.sqlite")
    run = make_run(status="running", finished_at=None)
    store.save(run, owner_pid=2**22 + 12345)  # no such process
    assert store.mark_interrupted() == 1
    again = store.get(run.id)
    assert again.status == "interrupted" and "stopped before the run finished" in again.error

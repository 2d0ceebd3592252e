"""The run store: save/replace, lookup by prefix, filters, relabel, delete, interrupted runs."""
import os

import pytest

from core.result import RunResult
from core.store import DB_VERSION, RunStore, StoreError

CPU = {"kind": "cpu", "name": "Test CPU", "label": "CPU — Test CPU"}
GPU = {"kind": "cuda", "name": "NVIDIA A100-SXM4-80GB", "label": "cuda:0 — NVIDIA A100-SXM4-80GB"}


def run(experiment="probe", device=CPU, started="2026-02-01T10:00:00+00:00", status="ok", run_id=None, **kw):
    r = RunResult(experiment, {"mode": "ok"}, device, {"torch": "2.13.0"}, started, started, status, **kw)
    if run_id:
        r.id = run_id
    return r


def test_save_then_get_is_identical(store):
    original = run(rows=[{"x": 1, "y": "inf"}], meta={"k": [1, 2]}, tags=["a"], name="n")
    store.save(original)
    assert store.get(original.id).to_dict() == original.to_dict()


def test_save_replaces_a_running_row(store):
    r = run(status="running")
    store.save(r, owner_pid=os.getpid())
    r.status, r.rows = "ok", [{"x": 1}]
    store.save(r)
    assert store.count() == 1 and store.get(r.id).status == "ok"


def test_find_by_unique_prefix(store):
    store.save(run(run_id="abc111"))
    store.save(run(run_id="abc222"))
    assert store.find("abc1").id == "abc111"
    with pytest.raises(KeyError, match="matches 2 runs"):
        store.find("abc")
    with pytest.raises(KeyError, match="no run"):
        store.find("zzz")
    with pytest.raises(KeyError, match="no run"):
        store.find("%")  # a LIKE wildcard is a plain character here


def test_list_is_newest_first_and_filters(store):
    store.save(run("matmul", GPU, "2026-02-03T00:00:00+00:00", run_id="c3"))
    store.save(run("probe", CPU, "2026-02-01T00:00:00+00:00", run_id="a1"))
    store.save(run("matmul", CPU, "2026-02-02T00:00:00+00:00", status="error", run_id="b2"))
    assert [r.id for r in store.list()] == ["c3", "b2", "a1"]
    assert [r.id for r in store.list(experiment="matmul")] == ["c3", "b2"]
    assert [r.id for r in store.list(device="A100")] == ["c3"]
    assert [r.id for r in store.list(status="error")] == ["b2"]
    assert [r.id for r in store.list(since="2026-02-02", until="2026-02-03")] == ["b2"]
    assert [r.id for r in store.list(limit=1)] == ["c3"]


def test_relabel_and_delete(store):
    r = run()
    store.save(r)
    store.relabel(r.id, name="baseline", tags=[" h100 ", "", "bf16"])
    again = store.get(r.id)
    assert (again.name, again.tags) == ("baseline", ["h100", "bf16"])
    assert store.delete([r.id, "not-there"]) == 1 and store.count() == 0
    assert store.delete([]) == 0


def test_frame_has_one_line_per_run(store):
    store.save(run(rows=[{"x": 1}, {"x": 2}], name="two rows"))
    frame = store.frame()
    assert list(frame["rows"]) == [2] and list(frame["name"]) == ["two rows"]
    assert frame["duration_s"][0] == 0.0


def test_dead_owner_makes_a_run_interrupted(store):
    dead = run(status="running", rows=[{"x": 1}])
    store.save(dead, owner_pid=2**22 + 12345)  # above the default pid_max: no such process
    alive = run(status="running")
    store.save(alive, owner_pid=os.getpid())
    assert store.mark_interrupted() == 1
    assert store.get(dead.id).status == "interrupted" and "1 row(s)" in store.get(dead.id).error
    assert store.get(alive.id).status == "running"


def test_newer_database_is_refused(tmp_path):
    import sqlite3

    path = tmp_path / "runs.sqlite"
    RunStore(path)
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA user_version = {DB_VERSION + 1}")
    with pytest.raises(StoreError, match="newer"):
        RunStore(path)

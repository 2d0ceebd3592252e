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
    assert store.get(dead.id).status == "interrupted" and "1 row was recorded" in store.get(dead.id).error
    assert store.get(alive.id).status == "running"


def test_newer_database_is_refused(tmp_path):
    import sqlite3

    path = tmp_path / "runs.sqlite"
    RunStore(path)
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA user_version = {DB_VERSION + 1}")
    with pytest.raises(StoreError, match="newer"):
        RunStore(path)


# -- summaries: the history never reads whole runs (issue 15 finding 13) -----------------------------


def _decoding_forbidden(monkeypatch):
    """Any decode of a whole run fails the test."""

    def refuse(cls, data):
        raise AssertionError("a whole run was decoded to list runs")

    monkeypatch.setattr(RunResult, "from_dict", classmethod(refuse))


def test_summaries_list_without_decoding_any_run(store, monkeypatch):
    big = run(
        rows=[{"size": i, "tflops": float(i)} for i in range(5000)],
        name="big",
        tags=["t"],
        error="e" * 5000,
        run_id="big1",
    )
    store.save(big)
    store.save(run("matmul", GPU, "2026-02-03T00:00:00+00:00", run_id="c3"))
    _decoding_forbidden(monkeypatch)
    first, second = store.summaries()
    assert (first.id, first.device_name, first.row_count) == ("c3", "NVIDIA A100-SXM4-80GB", 0)
    # a CPU run's headline follows the unit rule: 4999 TFLOPS stored = 4,999,000 GFLOPS shown
    assert (second.name, second.tags, second.row_count, second.headline) == ("big", ["t"], 5000, "max GFLOPS 4.999e+06")
    assert len(second.error) < 1100 and second.payload_bytes > 5000 * 20
    assert [s.id for s in store.summaries(experiment="matmul")] == ["c3"]
    assert [s.id for s in store.summaries(device="A100", limit=5)] == ["c3"]
    assert store.frame()["rows"].tolist() == [0, 5000]


def test_a_version_1_database_is_upgraded_with_summaries(tmp_path):
    """An existing database gains the summary column and every run's summary (migration 2)."""
    import json
    import sqlite3

    from core import store as store_module

    path = tmp_path / "v1.sqlite"
    conn = sqlite3.connect(path, isolation_level=None)
    store_module._v1(conn)
    conn.execute("PRAGMA user_version = 1")
    good = run(rows=[{"size": 1, "median_ms": 2.5}], name="old run", run_id="aa11")
    bad = run(run_id="bb22")
    bad_payload = dict(bad.to_dict(), device={"name": 5, "kind": "cpu"})  # imported before types were checked
    for r, payload in ((good, good.to_dict()), (bad, bad_payload)):
        conn.execute(
            "INSERT INTO runs VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                r.id,
                r.experiment,
                r.status,
                str(payload["device"]["name"]),
                "cpu",
                r.started_at,
                r.finished_at,
                r.name,
                json.dumps(r.tags),
                0,
                None,
                json.dumps(payload),
            ),
        )
    conn.close()
    store = RunStore(path)
    summaries = {s.id: s for s in store.summaries()}
    assert (summaries["aa11"].name, summaries["aa11"].headline, summaries["aa11"].row_count) == (
        "old run",
        "min median_ms 2.5",
        1,
    )
    assert summaries["bb22"].device_name == "5" and "device.name" in summaries["bb22"].damaged
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == DB_VERSION


def test_runs_list_reads_summaries(store, monkeypatch, capsys):
    from core.cli import main

    store.save(run(name="listed", run_id="dd44"))
    _decoding_forbidden(monkeypatch)
    assert main(["runs", "list"]) == 0
    assert "listed" in capsys.readouterr().out
    assert main(["runs", "list", "--json"]) == 0
    import json

    (listed,) = json.loads(capsys.readouterr().out)
    assert listed["id"] == "dd44" and listed["row_count"] == 0 and "rows" not in listed

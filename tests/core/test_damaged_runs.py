"""Damaged rows in the run store (issue 48, item 2): a payload cut short, the same on the row still marked running
by a process that is gone, a garbled or missing summary. Each is written into a real database here, then every
command is run as ``python -m core`` in a process tree bounded in CPU time and RSS: the damaged run is named in
words (exit 2 when asked for, exit 1 from ``runs check`` while one is left), every other run is still listed, shown
and exported, and ``runs check --quarantine`` moves the damaged ones aside without losing them."""

from __future__ import annotations

import json
import sqlite3

import pytest

from tests.core.workload.test_hostile_files import bounded_cli
from tests.factories import make_run

CPU_S = 20.0  # of CPU time across the command's process tree
RSS = 600 << 20
DEAD_PID = 2**22 + 12345  # above the default pid_max: no such process


def cli(*args: str):
    out = bounded_cli(*args, wall_s=CPU_S, rss_bytes=RSS)
    assert "Traceback" not in out.stderr, out.stderr[-2000:]
    return out


@pytest.fixture
def damaged(store, data_dir):
    """Four good runs and three damaged rows, named by what was done to them."""
    good = [make_run("probe", rows=[{"step": i}], id=f"{i}good{i:028d}", name=f"good {i}") for i in range(4)]
    cut, running, garbled = (make_run("probe", id=f"{w}{0:032d}"[:32], name=w) for w in ("cut", "running", "garbled"))
    for run in [*good, cut, garbled]:
        store.save(run)
    store.save(running, owner_pid=DEAD_PID)
    conn = sqlite3.connect(data_dir / "runs.sqlite", isolation_level=None)
    conn.execute("UPDATE runs SET payload = substr(payload, 1, 100) WHERE id IN (?, ?)", (cut.id, running.id))
    conn.execute("UPDATE runs SET status = 'running' WHERE id = ?", (running.id,))
    conn.execute("UPDATE summaries SET summary = '{\"id\": 5' WHERE id = ?", (garbled.id,))
    conn.execute("DELETE FROM summaries WHERE id = ?", (good[3].id,))
    conn.close()
    return {"good": [r.id for r in good], "cut": cut.id, "running": running.id, "garbled": garbled.id}


def test_every_run_is_still_listed_and_the_damaged_one_is_named(damaged):
    out = cli("runs", "list", "--json")
    assert out.code == 0, out.stderr
    listed = {s["id"]: s for s in json.loads(out.stdout)}
    assert set(listed) == {*damaged["good"], damaged["cut"], damaged["running"], damaged["garbled"]}
    # the row left running by a dead process cannot be read back: listed as damaged, no longer running
    assert "cut short" in listed[damaged["running"]]["damaged"] and listed[damaged["running"]]["status"] != "running"
    # a garbled or missing summary is rebuilt from its run, which reads
    assert listed[damaged["garbled"]]["name"] == "garbled" and not listed[damaged["garbled"]]["damaged"]
    assert listed[damaged["good"][3]]["name"] == "good 3"


def test_show_names_the_damage_and_the_others_still_show(damaged):
    out = cli("runs", "show", damaged["cut"])
    assert out.code == 2
    assert f"stored run {damaged['cut']} is damaged: its stored JSON is cut short" in out.stderr
    assert "runs check" in out.stderr
    for run_id in (*damaged["good"], damaged["garbled"]):
        shown = cli("runs", "show", run_id, "--json")
        assert shown.code == 0 and json.loads(shown.stdout)["id"] == run_id


def test_export_leaves_the_damaged_runs_out_with_a_note(damaged, tmp_path):
    target = tmp_path / "all.json"
    out = cli("runs", "export", "-o", str(target))
    assert out.code == 0, out.stderr
    exported = {r["id"] for r in json.loads(target.read_text())["runs"]}
    assert exported == {*damaged["good"], damaged["garbled"]}
    for run_id in (damaged["cut"], damaged["running"]):
        assert f"left out: stored run {run_id} is damaged" in out.stderr
    assert "wrote 5 runs" in out.stderr
    asked = cli("runs", "export", damaged["cut"])
    assert asked.code == 2 and f"{damaged['cut']} is damaged" in asked.stderr


def test_runs_check_names_them_and_quarantine_moves_them_aside(damaged):
    out = cli("runs", "check")
    assert out.code == 1
    assert f"{damaged['cut']}  damaged: its stored JSON is cut short" in out.stdout
    assert f"{damaged['running']}  damaged" in out.stdout
    assert f"{damaged['garbled']}  summary damaged" in out.stdout
    moved = cli("runs", "check", "--quarantine")
    assert moved.code == 0 and "2 damaged runs moved aside" in moved.stdout
    again = cli("runs", "check", "--json")
    assert again.code == 0
    report = json.loads(again.stdout)
    assert report["damaged"] == [] and report["summaries_damaged"] == []
    assert {q["id"] for q in report["quarantined"]} == {damaged["cut"], damaged["running"]}
    listed = {s["id"] for s in json.loads(cli("runs", "list", "--json").stdout)}
    assert listed == {*damaged["good"], damaged["garbled"]}
    # kept, not lost: the row as it was stored, with what is wrong
    from core.store import RunStore

    with sqlite3.connect(RunStore().path) as conn:
        payload, problem = conn.execute(
            "SELECT payload, problem FROM quarantine WHERE id = ?", (damaged["cut"],)
        ).fetchone()
    assert len(payload) == 100 and "cut short" in problem
    removed = cli("runs", "delete", damaged["cut"])
    assert removed.code == 0 and "deleted 1 run" in removed.stdout
    assert [q["id"] for q in json.loads(cli("runs", "check", "--json").stdout)["quarantined"]] == [damaged["running"]]


# -- item 3: ids matched whole ---------------------------------------------------------------------------------


def test_an_imported_id_that_extends_or_recases_another_never_hides_it(store, tmp_path):
    """An import whose ids start with an existing run's whole id, or spell it in capitals: the existing run is still
    shown, exported, reported and deleted by its id, and a prefix that both share is refused with both named."""
    mine = make_run("probe", id="abc123", name="mine")
    store.save(mine)
    theirs = [make_run("probe", id=i, name=f"theirs {i}") for i in ("abc1234", "ABC123")]
    runs_file = tmp_path / "theirs.json"
    runs_file.write_text(
        json.dumps({"format": "gpulab-runs", "schema_version": 1, "runs": [r.to_dict() for r in theirs]})
    )
    assert cli("runs", "import", str(runs_file)).code == 0
    shown = cli("runs", "show", "abc123", "--json")
    assert shown.code == 0 and json.loads(shown.stdout)["name"] == "mine"
    exported = cli("runs", "export", "abc123")
    assert exported.code == 0 and [r["name"] for r in json.loads(exported.stdout)["runs"]] == ["mine"]
    report = tmp_path / "r.html"
    assert cli("report", "abc123", "-o", str(report)).code == 0 and "mine" in report.read_text()
    shared = cli("runs", "show", "abc12")
    assert shared.code == 2 and "id prefix 'abc12' matches 2 runs (abc123, abc1234)" in shared.stderr
    assert json.loads(cli("runs", "show", "ABC1", "--json").stdout)["name"] == "theirs ABC123"  # case is kept
    assert cli("runs", "delete", "abc123").code == 0
    assert sorted(s["id"] for s in json.loads(cli("runs", "list", "--json").stdout)) == ["ABC123", "abc1234"]


# -- item 1: a run its experiment's views cannot read is refused at import, named when stored ----------------------

HOSTILE = {  # a few hundred bytes each (issue 48, item 1): experiment → (config, rows, meta, what is named)
    "doctor": ({}, [{"x": 1}], {}, "a doctor run's rows[0] lacks 'check'"),
    "health": ({}, [{"x": 1}], {}, "a health run's rows[0] lacks 'figure'"),
    "train-memory": ({}, [], {}, "a train-memory run's config lacks 'model'"),
    "flight-recorder": ({"example": ""}, [], {}, "a flight-recorder run's meta lacks 'ranks'"),
    "estimate": ({}, [], {"model": 5}, "an estimate run's meta lacks 'params'"),
}


def _runs_file(path, runs) -> str:
    path.write_text(json.dumps({"format": "gpulab-runs", "schema_version": 1, "runs": [r.to_dict() for r in runs]}))
    assert path.stat().st_size < 1024 or len(runs) > 1
    return str(path)


@pytest.mark.parametrize("experiment", HOSTILE)
def test_an_import_its_views_cannot_read_is_refused_in_words(experiment, store, tmp_path):
    config, rows, meta, named = HOSTILE[experiment]
    run = make_run(experiment, rows=rows, meta=meta, config=config, started_at="2099-01-01T00:00:00+00:00")
    out = cli("runs", "import", _runs_file(tmp_path / "r.json", [run]))
    assert out.code == 2 and f"run 1 of 1: {named}" in out.stderr, out.stderr
    assert store.count() == 0


def test_a_stored_run_its_views_cannot_read_is_named_and_the_rest_still_read(store, tmp_path):
    """Runs stored before imports checked them: each is named by show and check, left out of an export with a note;
    the shipped H200 runs beside them still list, show and export."""
    from core.paths import example_files

    (h200,) = [f for f in example_files() if "h200" in f.name]
    added, _ = store.import_file(h200)
    bad = []
    for i, (experiment, (config, rows, meta, _)) in enumerate(HOSTILE.items()):
        bad.append(make_run(experiment, rows=rows, meta=meta, config=config, id=f"bad{i}"))
        store.save(bad[-1])
    for run, (_, _, _, named) in zip(bad, HOSTILE.values()):
        out = cli("runs", "show", run.id)
        assert out.code == 2 and f"stored run {run.id} is damaged: {named}" in out.stderr
    target = tmp_path / "all.json"
    out = cli("runs", "export", "-o", str(target))
    assert out.code == 0 and f"wrote {added} runs" in out.stderr
    assert len(json.loads(target.read_text())["runs"]) == added
    assert all(f"left out: stored run {r.id} is damaged" in out.stderr for r in bad)
    listed = json.loads(cli("runs", "list", "--json").stdout)
    assert len(listed) == added + len(bad)
    check = cli("runs", "check", "--json")
    assert check.code == 1 and {d["id"] for d in json.loads(check.stdout)["damaged"]} == {r.id for r in bad}


def test_a_run_whose_answer_cannot_be_written_still_shows_its_rows(store):
    """A step-bench run that holds every field its shape asks for, but not what its answer in words reads: runs
    show says so and prints its rows, where it raised a traceback."""
    run = make_run("step-bench", rows=[{"kind": "summary", "precision": "bf16"}], id="odd1")
    store.save(run)
    out = cli("runs", "show", "odd1")
    assert out.code == 0
    assert "(its answer in words cannot be written for this run: TypeError: " in out.stdout and "bf16" in out.stdout


def test_a_quarantine_that_fails_half_way_leaves_the_store_as_it_was(damaged, store, monkeypatch):
    """One transaction: the damaged runs are moved aside, then the summaries rebuilt; a failure at the second step
    (here: the summary cannot be written) moves nothing."""
    from core import store as store_module

    found = store.check()
    assert {d.run_id for d in found.damaged} == {damaged["cut"], damaged["running"]} and found.summaries

    def fails(summary):
        raise OSError("the disk went away")

    with monkeypatch.context() as patched, pytest.raises(OSError):
        patched.setattr(store_module, "_summary_json", fails)
        store.quarantine(found)
    again = store.check()
    assert {d.run_id for d in again.damaged} == {damaged["cut"], damaged["running"]}
    assert again.quarantined == [] and store.count() == 7

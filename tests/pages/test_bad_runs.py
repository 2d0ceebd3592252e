"""Stored runs the pages cannot read (issue 48, items 1, 2 and 4) never take a page down.

The store holds the lab's own H200 runs (examples/) beside what a runs file could bring before imports checked each
experiment's fields, stored as such a file would have been: a doctor run whose row is ``{"x": 1}``, a health run
likewise, two train-memory runs with an empty config, a flight-recorder run with an empty meta, all dated 2099 so
every list shows them first; and rows damaged in the database (a payload cut short, one left running by a gone
process, a garbled summary). Every page opens; each bad run is named where it would be shown; every other run is
still listed and shown."""

from __future__ import annotations

import json
import sqlite3

import pytest

from core.paths import example_files
from core.result import RunResult
from tests.factories import make_run

pytest.importorskip("plotly")

LATER = "2099-01-01T00:00:00+00:00"
HOSTILE = {  # what a 400-byte runs file held (issue 48, item 1): experiment → (config, rows, meta)
    "doctor": ({}, [{"x": 1}], {}),
    "health": ({}, [{"x": 1}], {}),
    "train-memory": ({}, [{"x": 1}], {}),
    "flight-recorder": ({}, [{"x": 1}], {}),
}


def _hostile(experiment: str, n: int) -> RunResult:
    config, rows, meta = HOSTILE[experiment]
    return make_run(
        experiment, rows=rows, meta=meta, config=config, id=f"bad{n}" + "0" * 28, started_at=LATER, finished_at=LATER
    )


@pytest.fixture
def bad_store(store, data_dir):
    """The shipped H200 runs, five runs stored before imports checked them, three damaged rows."""
    (h200,) = [f for f in example_files() if "h200" in f.name]
    added, _ = store.import_file(h200)
    bad = {e: _hostile(e, i) for i, e in enumerate(HOSTILE)} | {"train-memory 2": _hostile("train-memory", 9)}
    for run in bad.values():
        store.save(run)  # as stored before this version: save() writes what the lab made, unchecked
    cut, running, garbled = (make_run("probe", id=f"{w}{'0' * 32}"[:32], name=w) for w in ("cut", "running", "garbled"))
    for run in (cut, running, garbled):
        store.save(run, owner_pid=2**22 + 1)
    conn = sqlite3.connect(data_dir / "runs.sqlite", isolation_level=None)
    conn.execute("UPDATE runs SET payload = substr(payload, 1, 90) WHERE id IN (?, ?)", (cut.id, running.id))
    conn.execute("UPDATE runs SET status = 'running' WHERE id = ?", (running.id,))
    conn.execute("UPDATE summaries SET summary = '{\"garbled' WHERE id = ?", (garbled.id,))
    conn.close()
    return {"good": added, "bad": {key: r.id for key, r in bad.items()}}


def _page(app, page: str | None = None):
    at = app.run()
    assert not at.exception, [e.value for e in at.exception]
    if page:
        at.switch_page(page).run()
        assert not at.exception, [e.value for e in at.exception]
    return at


def _errors(at) -> str:
    return " ".join(e.value for e in at.error).replace("\\", "")


def test_home_names_the_bad_doctor_run_and_lists_the_latest_runs(app, bad_store):
    at = _page(app)
    assert f"stored run {bad_store['bad']['doctor']} is damaged: a doctor run's rows[0] lacks 'check'" in _errors(at)
    latest = at.dataframe[-1].value
    assert len(latest) == 10 and "health" in set(latest["experiment"])  # the sidebar, the health panel, the list


def test_training_memory_names_the_bad_runs_and_overlays_the_real_ones(app, bad_store, store):
    at = _page(app, "pages/train_memory.py")
    bad = [bad_store["bad"][key] for key in ("train-memory", "train-memory 2")]
    at.multiselect(key="training_memory.compare").set_value(bad).run()
    assert not at.exception, [e.value for e in at.exception]
    for run_id in bad:  # picked: named, not drawn
        assert f"stored run {run_id} is damaged: a train-memory run's config lacks 'model'" in _errors(at)
    real = [s.id for s in store.summaries(experiment="train-memory") if not s.id.startswith("bad")]
    assert len(real) == 3  # the H200 file's three train-memory runs
    at.multiselect(key="training_memory.compare").set_value(real[:2]).run()
    assert not at.exception and "overlay" in " ".join(c.proto.spec for c in at.get("plotly_chart")).lower()


def test_interconnect_names_the_bad_hang_when_reopened(app, bad_store, store):
    at = _page(app, "pages/interconnect.py")
    at.selectbox(key="interconnect.hang.reopen").set_value(bad_store["bad"]["flight-recorder"]).run()
    assert not at.exception, [e.value for e in at.exception]
    assert f"{bad_store['bad']['flight-recorder']} is damaged: a flight-recorder run's meta lacks 'ranks'" in _errors(
        at
    )
    # one that holds every field its views read, but a grid of two ranks with one row of cells: its section says
    # so, the page goes on
    grid = {"ranks": [0, 1], "cells": [["completed"]], "seqs": [1], "ops": ["all_reduce"]}
    odd = make_run(
        "flight-recorder", meta={"ranks": [0, 1], "file": "rank0", "version": "2.10", "grid": grid}, id="odd1"
    )
    store.save(odd)
    at.run()  # the picker lists it
    at.selectbox(key="interconnect.hang.reopen").set_value("odd1").run()
    assert not at.exception, [e.value for e in at.exception]
    assert "Cannot show run `odd1` (flight-recorder, " in _errors(at) and "ValueError" in _errors(at)


def test_compare_lists_every_run_opens_the_good_ones_and_names_the_bad(app, bad_store, store):
    at = _page(app, "pages/compare.py")
    history = at.dataframe[0].value
    assert len(history) == store.count() == bad_store["good"] + 5 + 3  # nothing hidden
    assert list(history["status"]).count("damaged (runs check)") == 1  # the row left running by a gone process
    bad = bad_store["bad"]["health"]
    good = next(s.id for s in store.summaries(experiment="allocator", status="ok"))
    at.multiselect(key="compare.selected").set_value([bad]).run()
    assert not at.exception and f"stored run {bad} is damaged: a health run's rows[0] lacks 'figure'" in _errors(at)
    at.multiselect(key="compare.selected").set_value([good]).run()
    assert not at.exception and not at.error, _errors(at)
    assert at.get("plotly_chart")
    exported = json.loads(store.export_json([good]))
    assert [r["id"] for r in exported["runs"]] == [good]


# -- item 4: lists read summaries; a run is read whole only when opened --------------------------------------------


def test_pages_list_stored_runs_without_reading_any(app, store, monkeypatch):
    """An import of 200 MB was read whole on every rerun of Allocator (its earlier imports' picker), Training memory
    read every train-memory run to label them, Home every health check: the lists now read summaries."""
    (h200,) = [f for f in example_files() if "h200" in f.name]
    store.import_file(h200)
    for experiment in ("memory-snapshot", "flight-recorder", "profiler-trace"):
        store.save(make_run(experiment, config={"example": ""}, name=f"an earlier {experiment} import"))

    decode = RunResult.from_dict.__func__  # pyright: ignore[reportFunctionMemberAccess]

    def refuse(cls, data):
        if data.get("experiment") == "estimate":  # Training memory's plan for its settings: a run it shows, opened
            return decode(cls, data)
        raise AssertionError("a page read a whole run to list it")

    monkeypatch.setattr(RunResult, "from_dict", classmethod(refuse))
    for page in (None, "pages/allocator.py", "pages/train_memory.py", "pages/interconnect.py", "pages/compare.py"):
        at = _page(app, page)
        assert not at.error, (page, _errors(at))
    at = _page(app, "pages/allocator.py")
    assert any("an earlier memory-snapshot import" in o for o in at.selectbox(key="allocator.snapshot.reopen").options)


def test_compare_reads_the_newest_runs_and_filters_reach_the_older(app, store, monkeypatch):
    from render import history

    monkeypatch.setattr(history, "LISTED", 3)
    for i in range(5):
        store.save(make_run("probe" if i else "rounding", id=f"r{i}", started_at=f"2026-01-0{i + 1}T00:00:00+00:00"))
    at = _page(app, "pages/compare.py")
    assert list(at.dataframe[0].value["id"]) == ["r4", "r3", "r2"]
    assert any("3 of 5 runs (the newest 3 read" in c.value for c in at.caption)
    at.multiselect(key="compare.f.exp").set_value(["rounding"]).run()
    assert list(at.dataframe[0].value["id"]) == ["r0"]


# -- smaller: a damaged snapshot detail folder ------------------------------------------------------------------


@pytest.mark.parametrize("damage", ["cut", "garbled column"])
def test_a_damaged_snapshot_folder_is_said_and_the_stored_points_drawn(app, store, data_dir, damage):
    from tests.core.workload.test_hostile_files import bounded_cli

    out = bounded_cli("snapshot", "--example", "forward-fp32-snapshot", wall_s=60)
    assert out.code == 0, out.stderr[-2000:]
    (run,) = store.list(experiment="memory-snapshot")
    folder = data_dir / "snapshots" / run.meta["detail_id"]
    if damage == "cut":
        text = (folder / "snapshot.json").read_text()
        (folder / "snapshot.json").write_text(text[: len(text) // 2])
    else:
        (folder / "addr.npy").write_bytes(b"\x93NUMPY garbage")
    at = _page(app, "pages/allocator.py")
    at.selectbox(key="allocator.snapshot.reopen").set_value(run.id).run()
    assert not at.exception, [e.value for e in at.exception]
    said = " ".join(w.value for w in at.warning).replace("\\", "")
    assert f"the full-resolution data of import {run.meta['detail_id']} cannot be read back" in said
    assert f"its folder is damaged: showing its {len(run.rows):,} stored points" in said
    assert at.get("plotly_chart")  # the run's own points

"""An imported file is named in its run once, by its name, size and digest — never by where it lay: the page
deletes an upload's copy once it is imported, so a stored path would name a file that is gone."""

from __future__ import annotations

import hashlib
import shutil

import pytest

from core import registry
from core.experiment import drive
from core.result import RunResult
from tests.conftest import ROOT

DATA = ROOT / "tests" / "data" / "workload"
TRACE = DATA / "kineto_v100_trace.json"
SNAPSHOT = DATA / "snapshots" / "cs336_mem_snapshot.pickle.gz"


def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def upload(tmp_path):
    """A copy of a trace under a name of its own, as the page saves an upload before importing it."""
    copy = tmp_path / "3f2a9c1b7d4e-step.json"
    shutil.copyfile(TRACE, copy)
    return copy


def test_a_stored_trace_import_names_its_file_by_name_and_digest_not_by_where_it_lay(manager, store, upload):
    pytest.importorskip("msgspec")  # the trace reader decodes with it
    job = manager.submit("profiler-trace", {"path": str(upload)}, "cpu")
    run = job.wait(120)
    assert run is not None and run.status == "ok", run and run.error
    upload.unlink()  # what the page does once the import has ended
    stored = store.get(run.id)
    assert "path" not in stored.config and stored.config["top_kernels"] == 20
    assert stored.meta["file"] == upload.name and stored.meta["file_bytes"] == TRACE.stat().st_size
    assert stored.meta["file_sha256"] == _digest(TRACE)
    assert job.config["path"] == str(upload)  # the worker was told where to read it


def test_a_snapshot_import_keeps_the_digest_of_the_file_as_it_lies():
    exp = registry.get("memory-snapshot")
    cfg = exp.make_config({"path": str(SNAPSHOT), "keep_detail": False})
    out, _ = drive(exp.run(cfg, None))  # the import reads no context
    assert out.meta["file"] == SNAPSHOT.name and out.meta["file_sha256"] == _digest(SNAPSHOT)  # gzip as it lies
    assert exp.stored_config({"path": str(SNAPSHOT), "trace_device": None, "keep_detail": False, "example": ""}) == {
        "trace_device": None,
        "keep_detail": False,
        "example": "",
    }


def _trace_run(**meta) -> RunResult:
    """A trace import as a stored run; ``meta`` overrides what it keeps of the file."""
    pytest.importorskip("msgspec")
    exp = registry.get("profiler-trace")
    out, _ = drive(exp.run(exp.make_config({"path": str(TRACE)}), None))
    return RunResult(
        experiment="profiler-trace",
        config={"top_kernels": 20, "example": ""},
        device={"kind": "cpu", "name": "the importing box"},
        versions={},
        started_at="2025-01-01T00:00:00.000+00:00",
        finished_at="2025-01-01T00:00:01.000+00:00",
        status="ok",
        rows=out.rows,
        meta=out.meta | meta,
        name="step.json",
    )


def test_a_trace_stored_with_its_path_by_an_earlier_version_still_opens_and_draws(store):
    """Earlier versions kept the upload's temporary path in the config, and no digest."""
    pytest.importorskip("plotly")
    from render.plots import profiler_trace

    legacy = _trace_run(file="3f2a9c1b7d4e-step.json").to_dict()
    legacy["config"]["path"] = "/data/uploads/3f2a9c1b7d4e-step.json"
    del legacy["meta"]["file_sha256"]
    store.save(RunResult.from_dict(legacy))
    charts = profiler_trace.figures(store.get(legacy["id"]))
    assert charts and all("imported 3f2a9c1b7d4e-step.json" in c.figure.layout.title.text for c in charts)


def test_a_trace_chart_names_its_file_once():
    pytest.importorskip("plotly")
    from render.plots import profiler_trace

    titles = [c.figure.layout.title.text for c in profiler_trace.figures(_trace_run())]
    assert titles and [t.count(TRACE.name) for t in titles] == [1] * len(titles), titles

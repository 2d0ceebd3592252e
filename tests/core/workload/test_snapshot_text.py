"""One writer of a snapshot's text (:mod:`core.workload.snapshot.text`): what ``snapshot FILE`` prints is its
lines, and they read the stored meta's fields, on an out-of-memory snapshot recorded on an H200
(tests/data/workload/README.md)."""

from __future__ import annotations

import contextlib
import io

import pytest

from core.experiment import drive
from core.experiments.memory_snapshot import MemorySnapshotConfig, run
from core.workload.snapshot.text import snapshot_lines
from tests.core.workload.traces import DATA

pytest.importorskip("msgspec")

OOM = DATA / "snapshots" / "oom_h200_cap.pickle.gz"


@pytest.fixture(scope="module")
def meta() -> dict:
    out, _ = drive(run(MemorySnapshotConfig(path=str(OOM), keep_detail=False), None))  # type: ignore[arg-type]
    return out.meta


def test_the_cli_prints_the_text_renderer_s_lines(meta, tmp_path, monkeypatch):
    from core import cli

    monkeypatch.setenv("GPULAB_DB", str(tmp_path / "runs.sqlite"))
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert cli.main(["snapshot", str(OOM), "--no-save"]) == 0
    assert printed.getvalue().splitlines() == snapshot_lines(meta, "not stored (--no-save)")


def test_the_text_reads_the_meta_it_is_given(meta):
    lines = snapshot_lines(meta, "stored as run abc")
    assert lines[0].endswith("— stored as run abc") and lines[1].startswith("finding: out of memory")
    changed = snapshot_lines(meta | {"peak_site": "train.py:12 step", "notes": ["a note"]}, "")
    assert "  site: train.py:12 step" in changed and "note: a note" in changed

"""A full disk hides no run (issue 48, smaller): the dashboard, in a process that may not grow any file (SQLite cannot
create its shared-memory index, as on a disk without a free block), still lists and opens every stored run, and
says that runs are not being saved; it said the store was unavailable and showed none."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.factories import make_run

pytest.importorskip("streamlit")

DASHBOARD = """
import json, sys
from streamlit.testing.v1 import AppTest
from pages.common import lab
lab.query_devices = lambda *a, **k: {"devices": [{"kind": "cpu", "torch_device": "cpu", "name": "CPU",
    "label": "CPU", "cores": 2, "torch_threads": 2, "tf32": {}}], "default": "cpu", "cuda_available": False,
    "cuda_unavailable_reason": "none here", "versions": {}}
at = AppTest.from_file("app.py", default_timeout=120).run()
sidebar = [e.value for e in at.sidebar.error]  # the entrypoint's: AppTest runs only the page after this
at.switch_page("pages/compare.py").run()
listed = list(at.dataframe[0].value["id"]) if at.dataframe else []
at.multiselect(key="compare.selected").set_value([sys.argv[1]]).run()
print(json.dumps({"exceptions": [e.value for e in at.exception], "errors": [e.value for e in at.error],
                  "sidebar": sidebar, "listed": listed,
                  "opened": any(s.value.startswith("probe") for s in at.subheader)}))
"""


def _no_file_may_grow() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a killed process
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))


def test_the_dashboard_lists_and_opens_every_run_when_no_file_can_grow(store, data_dir):
    runs = [make_run("probe", rows=[{"step": i}] * 40, id=f"run{i}", name=f"run {i}") for i in range(3)]
    for run in runs:
        store.save(run)
    assert (data_dir / "runs.sqlite").stat().st_size > 4096
    assert not (data_dir / "runs.sqlite-shm").exists()  # closed cleanly: the next reader must create it
    done = subprocess.run(
        [sys.executable, "-c", DASHBOARD, "run1"],
        cwd=ROOT,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        preexec_fn=_no_file_may_grow,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["exceptions"] == [] and seen["errors"] == [], seen
    assert sorted(seen["listed"]) == ["run0", "run1", "run2"] and seen["opened"]
    assert any(s.startswith("Runs are not being saved: ") for s in seen["sidebar"]), seen["sidebar"]

"""The command and its worker turn the cyclic collector off while they import and freeze what they imported
(core.__main__, core.worker): the collector must be back on for the work itself, or a long job's cyclic garbage
would never be freed.

A ``sitecustomize`` on PYTHONPATH (workers inherit it) writes down every collection a process makes with the
number of frozen objects at that moment; a collection with frozen objects is one made after the freeze, with
collection on again."""

import os
import subprocess
import sys

from tests.conftest import ROOT

# 2,000 utilisation bins and hundreds of events: both processes allocate far past a collection's threshold
TRACE = ROOT / "tests" / "data" / "workload" / "kineto_v100_trace.json"
HOOK = """
import gc, os, sys

def _note(phase, info):
    if phase == "stop":
        with open(os.environ["GPULAB_GC_LOG"], "a") as log:
            log.write(f"{os.getpid()} {sys.argv[0]} {gc.get_freeze_count()}\\n")

gc.callbacks.append(_note)
"""


def test_command_and_worker_collect_after_freezing_their_imports(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(HOOK)
    log = tmp_path / "gc.log"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(ROOT)]), GPULAB_GC_LOG=str(log))
    out = subprocess.run(
        [sys.executable, "-m", "core", "trace", str(TRACE), "--no-save", "--json"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    after_freeze: dict[str, set[str]] = {}
    for line in log.read_text().splitlines():
        pid, program, frozen = line.split()
        if int(frozen) > 0:
            after_freeze.setdefault(os.path.basename(program), set()).add(pid)
    # the command runs as core/__main__.py, its worker as core/worker.py: each collected after its freeze
    assert set(after_freeze) == {"__main__.py", "worker.py"}, log.read_text()

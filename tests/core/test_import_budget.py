"""Imports of outside files (issue 32): on a queue of their own, never behind a device's jobs, and bounded in CPU
time by the bytes they may read (core/import_budget.py)."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys

import pytest

from core import import_budget, registry
from core.errors import ConfigError
from core.intake import LIMITS, LIMITS_ENV, limits_from
from tests.conftest import ROOT

TRACE = ROOT / "tests" / "data" / "workload" / "kineto_v100_trace.json"


def test_the_budget_grows_with_the_bytes_a_file_may_read(tmp_path, monkeypatch):
    plain = tmp_path / "big.json"
    with plain.open("wb") as f:
        f.truncate(300_000_000)  # sparse: 300 MB read, no disk used
    gz = tmp_path / "small.json.gz"
    gz.write_bytes(gzip.compress(b"[]"))
    assert (LIMITS.import_cpu_s, LIMITS.import_cpu_s_per_100mb) == (60.0, 20.0)  # what docs/OPERATIONS.md says
    assert import_budget.budget_s([str(plain)]) == 60 + 3 * 20  # 60 s + 20 s per 100 MB
    # a gzip file counts what it may inflate to: 8 MiB at least (the inflate floor), 1.68 s of the 20 per 100 MB
    assert import_budget.budget_s([str(gz)]) == round(60 + 20 * 8 * 2**20 / 100e6) == 62
    assert import_budget.budget_s([str(plain), str(gz)]) == round(60 + 20 * (3e8 + 8 * 2**20) / 100e6)
    monkeypatch.setattr(import_budget, "LIMITS", limits_from("import_cpu_s=5, import_cpu_s_per_100mb=0"))
    assert import_budget.budget_s([str(plain)]) == 5


@pytest.mark.parametrize(
    "setting, said",
    [
        ("inflate_ratio=lots", "GPULAB_LIMITS: inflate_ratio must be a whole number ≥ 1, got 'lots'"),
        ("rank_files=0", "GPULAB_LIMITS: rank_files must be a whole number ≥ 1, got '0'"),
        ("import_cpu_s=-1", "GPULAB_LIMITS: import_cpu_s must be a number of seconds ≥ 0, got '-1'"),
        ("import_cpu_s=inf", "GPULAB_LIMITS: import_cpu_s must be a number of seconds ≥ 0, got 'inf'"),
        ("inflate=200", "GPULAB_LIMITS: no limit is called 'inflate' (the limits: inflate_ratio, "),
    ],
)
def test_a_bad_limit_setting_is_named(setting, said):
    with pytest.raises(ConfigError) as caught:
        limits_from(setting)
    assert str(caught.value).startswith(said)


def test_limits_are_changed_by_name():
    limits = limits_from(" inflate_ratio = 200 ,, import_cpu_s=0.5")
    assert (limits.inflate_ratio, limits.import_cpu_s, limits.rank_files) == (200, 0.5, 512)


def test_the_cli_names_a_bad_limit_setting_and_exits_2():
    env = os.environ | {LIMITS_ENV: "rank_files=many"}
    out = subprocess.run(
        [sys.executable, "-m", "core", "runs", "list"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert (out.returncode, out.stderr) == (
        2,
        "error: GPULAB_LIMITS: rank_files must be a whole number ≥ 1, got 'many'\n",
    )


def test_every_import_names_what_it_reads_and_runs_on_the_imports_queue():
    imports = [e for e in registry.experiments().values() if e.torch_free]
    assert {e.name for e in imports} >= {"profiler-trace", "profiler-trace-ranks", "memory-snapshot", "runs-import"}
    assert all(e.reads is not None and e.queue == "imports" for e in imports)
    assert registry.get("matmul").queue is None and registry.get("estimate").queue == "in-process"


def test_an_import_does_not_wait_behind_a_cpu_job(manager):
    """A CPU run holds the cpu queue and its lock; a trace import submitted after it ends while it still runs."""
    busy = manager.submit("probe", {"mode": "sleep", "steps": 1}, "cpu")
    try:
        while busy.state != "running" or not busy.rows:  # the probe has started and reported its step
            busy.wait(0.2)
        run = manager.submit("profiler-trace", {"path": str(TRACE)}, "cpu", save=False)
        result = run.wait(300)
        assert result is not None and result.status == "ok", result and result.error
        assert busy.state == "running"
    finally:
        busy.cancel()
        busy.wait(60)


def test_an_import_past_its_cpu_time_is_refused_naming_the_limit(tmp_path, data_dir):
    """600,000 kernels take a few seconds of CPU to read; under a budget of 1 s the import is refused with exit
    2, the limit and how to change it named, nothing stored."""
    path = tmp_path / "long.json.gz"
    with gzip.open(path, "wt", compresslevel=1) as f:
        event = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "dur": 5, "args": {"device": 0}}
        f.write('{"traceEvents": [' + ",".join(json.dumps(event | {"ts": i}) for i in range(600_000)) + "]}")
    env = os.environ | {LIMITS_ENV: "import_cpu_s=1,import_cpu_s_per_100mb=0"}
    out = subprocess.run(
        [sys.executable, "-m", "core", "trace", str(path)], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    assert out.returncode == 2, out.stderr[-2000:]
    assert "long.json.gz took more than 1 s of CPU time, the import_cpu_s limit (1 s + 0 s per 100 MB" in out.stderr
    assert "GPULAB_LIMITS changes it" in out.stderr
    assert "Traceback" not in out.stderr
    from core.store import RunStore

    assert RunStore().summaries() == []

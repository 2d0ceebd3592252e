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
        ("inflate_ratio=lots", "GPULAB_LIMITS: inflate_ratio must be a whole number from 1 to 2^63, got 'lots'"),
        ("rank_files=0", "GPULAB_LIMITS: rank_files must be a whole number from 1 to 2^63, got '0'"),
        (
            "import_cpu_s=-1",
            "GPULAB_LIMITS: import_cpu_s must be a number of seconds from 0 to 1,000,000,000, got '-1'",
        ),
        (
            "import_cpu_s=inf",
            "GPULAB_LIMITS: import_cpu_s must be a number of seconds from 0 to 1,000,000,000, got 'inf'",
        ),
        # too large for RLIMIT_CPU's C long, or for any count: named, never an OverflowError later (issue 48)
        ("import_cpu_s=1e19", "GPULAB_LIMITS: import_cpu_s must be a number of seconds from 0 to 1,000,000,000, got "),
        ("fr_entries=" + "9" * 400, "GPULAB_LIMITS: fr_entries must be a whole number from 1 to 2^63, got '9999"),
        ("inflate=200", "GPULAB_LIMITS: no limit is called 'inflate' (did you mean inflate_ratio? the limits: "),
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
        "error: GPULAB_LIMITS: rank_files must be a whole number from 1 to 2^63, got 'many'\n",
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


@pytest.mark.parametrize("setting", ["import_cpu_s=1e19", "trace_devices=" + "4" * 400, "import_cpu=5"])
def test_a_limit_too_large_or_misspelled_stops_the_cli_in_words(setting):
    """They ended in an OverflowError traceback (issue 48): RLIMIT_CPU takes a C long."""
    env = os.environ | {LIMITS_ENV: setting}
    out = subprocess.run([sys.executable, "-m", "core", "info", "--no-gpu-query"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert out.returncode == 2 and out.stderr.startswith("error: GPULAB_LIMITS: ") and "Traceback" not in out.stderr


def test_a_misspelled_limit_stops_the_dashboard_in_words(app, monkeypatch):
    """It started, and every job then failed (issue 48)."""
    from core import intake

    monkeypatch.setattr(intake, "_LIMITS_PROBLEM", str(_refusal("import_cpu=5")))
    at = app.run()
    assert not at.exception
    (said,) = [e.value for e in at.error]
    assert said.startswith("GPU Lab cannot start: GPULAB_LIMITS: no limit is called 'import_cpu' (did you mean ")


def _refusal(setting: str) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        limits_from(setting)
    return caught.value

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
from core.limits import LIMITS, LIMITS_ENV, limits_from
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
    from core import limits

    monkeypatch.setattr(limits, "_LIMITS_PROBLEM", str(_refusal("import_cpu=5")))
    at = app.run()
    assert not at.exception
    (said,) = [e.value for e in at.error]
    assert said.startswith("GPU Lab cannot start: GPULAB_LIMITS: no limit is called 'import_cpu' (did you mean ")


def _refusal(setting: str) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        limits_from(setting)
    return caught.value


# -- issue 48, item 6: the budget follows the bytes the reader consumes --------------------------------------------

GRANTED = """
import json, mmap, resource, sys, time
from core.import_budget import cpu_limited

path, reads = sys.argv[1], json.loads(sys.argv[2])


def granted(start, want):
    # the watcher raises the limit a few times a second: wait for the figure worked out by hand, or settle
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        soft = resource.getrlimit(resource.RLIMIT_CPU)[0] - start
        if soft == want:
            break
        time.sleep(0.05)
    return soft


start = int(sum(resource.getrusage(resource.RUSAGE_SELF)[:2]))
seen = []
with cpu_limited([path]) as most:
    with open(path, "rb") as fh:
        for how, n, want in reads:
            if how == "read":
                fh.read(n)
            else:
                view = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
            seen.append(granted(start, want))
print(json.dumps({"most": most, "granted": seen}))
"""


def _granted(path, reads) -> dict:
    out = subprocess.run([sys.executable, "-c", GRANTED, str(path), json.dumps(reads)], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)


def test_a_pickle_that_ends_before_a_sparse_tebibyte_buys_only_what_was_read(tmp_path):
    """The issue's dump: 1.5 MB read of a 1 TiB file, the rest a sparse tail the reader never reaches. From its
    size it bought 60 + 20 × 1,099,511,627,776 / 10^8 = 219,962 s (the issue's figure); read as it is,
    60 + 20 × 0.015 = 60.3 → 60 s, and 120 s once 301.5 MB have been read (60 + 20 × 3.015 = 120.3)."""
    path = tmp_path / "rank0"
    with path.open("wb") as f:
        f.write(os.urandom(1_500_000))
        f.truncate(2**40)
    got = _granted(path, [["read", 1_500_000, 60], ["read", 300_000_000, 120]])
    assert got == {"most": 219_962, "granted": [60, 120]}


def test_a_gzip_member_never_reached_buys_nothing_and_a_mapped_file_all_it_maps(tmp_path):
    """A gzip member of 1 KiB read, then 400 MB (sparse) never reached: from its size it bought what 100 × it may
    inflate to, capped at 32 GiB: 60 + 20 × 34,359,738,368 / 10^8 = 6,932 s; read, the 1,024 bytes inflate to at
    most 102,400: 60 + 0.02 → 60 s. A plain file mapped is read whole: 300 MB mapped = 60 + 60 = 120 s."""
    member = gzip.compress(os.urandom(1024))
    gz = tmp_path / "dump.gz"
    with gz.open("wb") as f:
        f.write(member)
        f.truncate(400_000_000)
    assert _granted(gz, [["read", len(member), 60]]) == {"most": 6_932, "granted": [60]}
    plain = tmp_path / "trace.json"
    with plain.open("wb") as f:
        f.truncate(300_000_000)
    assert _granted(plain, [["map", 0, 120]]) == {"most": 120, "granted": [120]}

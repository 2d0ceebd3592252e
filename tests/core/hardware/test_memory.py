"""Refuse before running what cannot fit, and cap CPU jobs so a wrong estimate is a clean out-of-memory error
(issue 15 finding 1): the budget against psutil, the cap's settings, GPU jobs never capped, and the CLI's
refusals end to end (exit 2 within seconds naming the estimate and the limit, the worker staying small)."""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from core.errors import DoesNotFit
from core.experiment import Context
from core.hardware import memory
from core.hardware.memory import MEMORY_FRACTION_ENV, MEMORY_LIMIT_ENV, budget, capped, cpu_cap
from tests.conftest import ROOT

GIB = 2**30
CTX = Context("cpu", "Test CPU")


@pytest.fixture(autouse=True)
def default_cap(monkeypatch):
    """The default cap in every test; whatever a test writes to these variables is undone after it
    (setenv first: monkeypatch records nothing for deleting a variable that is absent)."""
    for name in (MEMORY_LIMIT_ENV, MEMORY_FRACTION_ENV):
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)


def test_cpu_budget_is_available_ram_less_the_reserve():
    available = psutil.virtual_memory().available  # psutil reads MemAvailable too: an independent reader
    got = budget("cpu")
    assert abs(got.bytes - (available - 512 * 2**20)) < 256 * 2**20  # the box moves a little between reads
    assert "of RAM is available" in got.source


def test_cpu_cap_settings():
    assert cpu_cap(3 * GIB, 10 * GIB) == 3 * GIB + 8 * GIB  # default: 0.8 of the available RAM on top
    os.environ[MEMORY_FRACTION_ENV] = "0.5"
    assert cpu_cap(GIB, 10 * GIB) == 6 * GIB
    os.environ[MEMORY_FRACTION_ENV] = "0"
    assert cpu_cap(GIB, 10 * GIB) is None  # off only when asked
    os.environ[MEMORY_LIMIT_ENV] = str(2 * GIB)
    assert cpu_cap(GIB, 10 * GIB) == 2 * GIB  # explicit bytes win
    os.environ[MEMORY_LIMIT_ENV] = "0"
    assert cpu_cap(GIB, 10 * GIB) is None
    for name, bad in ((MEMORY_LIMIT_ENV, "2G"), (MEMORY_LIMIT_ENV, "-5")):
        os.environ[name] = bad
        with pytest.raises(ValueError, match=name):
            cpu_cap(GIB, GIB)
    del os.environ[MEMORY_LIMIT_ENV]
    os.environ[MEMORY_FRACTION_ENV] = "1.5"
    with pytest.raises(ValueError, match=MEMORY_FRACTION_ENV):
        cpu_cap(GIB, GIB)


def test_a_cpu_job_is_capped_and_the_cap_is_lifted_after_it():
    before = resource.getrlimit(resource.RLIMIT_AS)
    mapped = memory.address_space_bytes()
    available = psutil.virtual_memory().available
    with capped("cpu") as cap:
        inside = resource.getrlimit(resource.RLIMIT_AS)
        assert inside[0] == cap and abs(cap - (mapped + 0.8 * available)) < GIB
        assert budget("cpu").bytes <= cap - mapped + 1  # the budget sees the cap too
    assert resource.getrlimit(resource.RLIMIT_AS) == before


def test_a_gpu_job_is_never_capped():
    """CUDA reserves far more address space than any RAM-sized cap (context creation fails under one)."""
    os.environ[MEMORY_LIMIT_ENV] = str(2 * GIB)
    before = resource.getrlimit(resource.RLIMIT_AS)
    with capped("cuda:0") as cap:
        assert cap is None and resource.getrlimit(resource.RLIMIT_AS) == before


def test_check_fits_names_the_estimate_and_the_limit():
    limit = budget("cpu")
    CTX.check_fits(limit.bytes // 2, "half")
    with pytest.raises(DoesNotFit) as refused:
        CTX.check_fits(limit.bytes + GIB, "too much")
    text = str(refused.value)
    assert text.startswith("too much needs an estimated") and "of RAM is available" in text
    assert refused.value.meta["refused"]["need_bytes"] == limit.bytes + GIB


# -- end to end --------------------------------------------------------------------------------------


def run_cli(*args, env=None, timeout=180) -> tuple[subprocess.CompletedProcess, float, int]:
    """Run ``python -m core ARGS``; returns the result, its wall time and the most RSS any child reached."""
    begun = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "core", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    peak = 0
    parent = psutil.Process(proc.pid)
    while proc.poll() is None and time.monotonic() - begun < timeout:
        try:
            for child in parent.children(recursive=True):
                try:
                    peak = max(peak, child.memory_info().rss)
                except psutil.Error:
                    pass
        except psutil.Error:
            pass
        time.sleep(0.02)
    out, err = proc.communicate(timeout=timeout)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), time.monotonic() - begun, peak


ESTIMATE = re.compile(r"needs an estimated ([\d,.]+) (TiB|GiB)")
LIMIT = re.compile(r"only ([\d,.]+) (TiB|GiB|MiB)")
IN_GIB = {"TiB": 1024, "GiB": 1, "MiB": 1 / 1024}


def _refusal(out: subprocess.CompletedProcess) -> tuple[float, float]:
    """(estimate, limit) in GiB, read from the refusal's text."""
    text = out.stdout + out.stderr
    estimate, limit = ESTIMATE.search(text), LIMIT.search(text)
    assert estimate and limit and "refused before allocating" in text, text[-2000:]
    return (
        float(estimate.group(1).replace(",", "")) * IN_GIB[estimate.group(2)],
        float(limit.group(1).replace(",", "")) * IN_GIB[limit.group(2)],
    )


def test_train_memory_that_cannot_fit_is_refused_within_seconds_and_the_worker_stays_small(data_dir):
    """The acceptance: 2.7B at batch 64 × 4096 grew to 19 GiB RSS in 67 s and kept climbing."""
    out, took, worker_rss = run_cli(
        "train-memory", "--model", "2.7B", "--batch", "64", "--context", "4096", "--device", "cpu"
    )
    assert out.returncode == 2, out.stderr[-2000:]
    estimate, limit = _refusal(out)
    assert estimate > 1000 and limit < psutil.virtual_memory().total / GIB
    assert took < 90, f"refusing took {took:.0f} s"  # a cold worker imports torch first on this shared box
    assert 0 < worker_rss < GIB, f"the worker reached {worker_rss / GIB:.2f} GiB RSS"
    listed = subprocess.run(
        [sys.executable, "-m", "core", "runs", "list", "--json"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    (stored,) = json.loads(listed.stdout)  # stored like any run a worker refused, with the numbers
    assert stored["status"] == "error" and stored["error"].startswith("refused: ")


def test_a_step_bench_sweep_that_cannot_fit_is_refused(data_dir):
    out, _, worker_rss = run_cli(
        "step-bench", "--model", "xl", "--batch", "16", "--context", "1024", "--sweep", "--device", "cpu", "--no-save"
    )
    assert out.returncode == 2, out.stderr[-2000:]
    estimate, limit = _refusal(out)
    assert estimate > limit and worker_rss < GIB


def test_matmul_shapes_that_cannot_fit_are_refused_up_front(data_dir):
    out, _, _ = run_cli(
        "matmul", "--model", "2.7B", "--batch", "64", "--context", "4096", "--device", "cpu", "--no-save"
    )
    assert out.returncode == 2 and "262144 tokens" in out.stderr and "131072" in out.stderr  # at the config
    out, _, worker_rss = run_cli("matmul", "--mnk", "100000,100000,100000", "--device", "cpu", "--no-save")
    assert out.returncode == 2, out.stdout[-2000:]
    estimate, limit = _refusal(out)
    assert estimate > 100 and worker_rss < GIB  # 2 × 10^10 fp32 draws alone are 74.5 GiB


ALLOCATE = textwrap.dedent("""
    import json, resource, sys
    from core import registry
    from core.experiment import Experiment, Output
    from core.experiments.probe import ProbeConfig
    from core import worker
    from core.protocol import RunRequest

    def allocate(cfg, ctx):
        import torch
        # mapped, not touched: the cap is on address space, so the mapping is what it refuses (touching 4 GiB
        # cost ~40 s of a loaded box's time and proved nothing more)
        block = torch.empty(int(sys.argv[1]), dtype=torch.uint8)
        yield from ()
        return Output(rows=[{"bytes": block.numel()}])

    registry.experiments()["allocate"] = Experiment("allocate", "allocate", ProbeConfig, allocate)
    worker.run_job(RunRequest("allocate", {}, "cpu", "j"), lambda event: print(event.to_json(), flush=True))
    print(json.dumps({"after": resource.getrlimit(resource.RLIMIT_AS)[0]}), flush=True)
""")


@pytest.mark.parametrize(
    "setting, fits",
    [
        ({MEMORY_LIMIT_ENV: "0"}, True),  # the control, uncapped (a fraction of 0 is off too: test_cpu_cap_settings)
        ({MEMORY_LIMIT_ENV: str(2 * GIB)}, False),
        ({MEMORY_FRACTION_ENV: "0.05"}, False),
        ({}, True),
    ],
)
def test_the_cap_turns_a_real_allocation_into_a_clean_oom(setting, fits):
    """A 4 GiB tensor is mapped uncapped (and under the default 0.8), and is a clean OOM under a tight cap."""
    available = psutil.virtual_memory().available
    if available < 7 * GIB:
        pytest.skip("needs ~7 GiB of free memory for the uncapped control run")
    if not fits and MEMORY_FRACTION_ENV in setting:
        assert 0.05 * available < 4 * GIB - GIB  # the cap really is below the tensor
    env = dict(os.environ, PYTHONPATH=str(ROOT), **setting)
    out = subprocess.run(
        [sys.executable, "-c", ALLOCATE, str(4 * GIB)], capture_output=True, text=True, env=env, cwd=ROOT, timeout=180
    )
    assert out.returncode == 0, out.stderr[-2000:]
    events = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    started = next(e for e in events if e.get("type") == "started")
    result = next(e for e in events if e.get("type") == "result")
    assert events[-1]["after"] == resource.RLIM_INFINITY  # the cap ends with the job
    if fits:
        assert result["status"] == "ok" and result["rows"] == [{"bytes": 4 * GIB}]
        assert (started["memory_cap_bytes"] is None) == bool(setting)
    else:
        assert result["status"] == "error" and result["meta"] == {"oom": True} and result["recycle"] is True
        assert "out of memory" in result["error"] and "memory cap" in result["error"]


@pytest.mark.gpu
def test_a_gpu_job_runs_with_a_memory_cap_set(store):
    """GPULAB_WORKER_MEMORY_LIMIT_BYTES used to make every GPU job fail at CUDA context creation."""
    from core.jobs import JobManager

    os.environ[MEMORY_LIMIT_ENV] = str(4 * GIB)
    manager = JobManager(store=store)
    try:
        run = manager.submit("matmul", {"sizes": [256], "dtypes": ["fp32"], "roofline": False}, "cuda").wait(300)
    finally:
        manager.shutdown()
    assert run.status == "ok", run.error
    assert run.meta["worker"]["memory_cap_bytes"] is None


@pytest.mark.gpu
def test_a_gpu_run_that_cannot_fit_is_refused_against_mem_get_info(data_dir):
    import torch

    free, _ = torch.cuda.mem_get_info(0)
    out, _, _ = run_cli(
        "train-memory", "--model", "2.7B", "--batch", "64", "--context", "4096", "--device", "cuda", "--no-save"
    )
    assert out.returncode == 2, out.stdout[-2000:]
    estimate, limit = _refusal(out)
    assert "torch.cuda.mem_get_info" in out.stdout and limit <= free / GIB + 1 and estimate > limit


def test_a_malformed_cap_setting_is_a_clear_job_error(store, monkeypatch):
    from core.jobs import JobManager

    monkeypatch.setenv(MEMORY_FRACTION_ENV, "most")
    manager = JobManager(store=store)
    try:
        run = manager.submit("probe", {"steps": 1}, "cpu").wait(180)
    finally:
        manager.shutdown()
    assert run.status == "error" and f"{MEMORY_FRACTION_ENV} must be a number from 0 to 1" in run.error
    assert "Traceback" not in run.error

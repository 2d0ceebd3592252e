"""The GPU check's dry run on the CPU (so it cannot rot between GPU sessions), its budget and its bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from scripts import gpu_check

ROOT = Path(__file__).resolve().parents[2]
# Every step that needs neither the doctor's minute nor a nested test run.
DRY_STEPS = "box,matmul,search,allocator,train-memory,stacks,workload,soak,copies"


@pytest.mark.slow
def test_the_tiny_dry_run_passes_and_writes_its_files(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run(
        ["bash", "scripts/gpu_check.sh", "--device", "cpu", "--tiny", "--only", DRY_STEPS, "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(p.name for p in out.iterdir()) == ["log.txt", "results.json", "runs.json", "summary.txt"]
    summary = (out / "summary.txt").read_text()
    assert summary.startswith("GPU Lab check on CPU dry run")
    steps = [line.split()[:2] for line in summary.split("\nsteps\n")[1].split("\n\n")[0].splitlines()]
    assert steps == [[name, "pass"] for name in DRY_STEPS.split(",")]
    assert summary.rstrip().endswith("result: PASS")
    # The runs file holds one run per experiment command the steps gave, counted from the plan by hand:
    # matmul + reference; the bounded search (matmul); allocator lifecycle, backward-peak, fragmentation, del;
    # train-memory tiny; the stacks step's five step benchmarks (the fp8 one stored as unsupported on a CPU);
    # the profiled step and its trace import (no snapshot on a CPU: nothing recorded); the soak; the copies.
    runs = json.loads((out / "runs.json").read_text())["runs"]
    experiments = sorted(r["experiment"] for r in runs)
    assert experiments == sorted(
        ["matmul", "reference", "matmul", *["allocator"] * 4, "train-memory", *["step-bench"] * 5]
        + ["step-bench", "profiler-trace"]
        + ["matmul-soak", "interconnect"]
    )
    claims = json.loads((out / "results.json").read_text())["claims"]
    assert {c["verdict"] for c in claims} <= {"pass", "unsupported", "info"}


def test_a_step_past_its_limit_fails_and_a_spent_budget_skips_the_rest(tmp_path, monkeypatch):
    def sleeper(ck):
        ck.command([sys.executable, "-c", "import time; time.sleep(60)"], 1.0, "sleeper")

    monkeypatch.setattr(gpu_check, "MIN_STEP_S", 0.5)
    monkeypatch.setattr(gpu_check, "STEPS", {"box": sleeper, "doctor": sleeper})
    monkeypatch.setattr(gpu_check, "export", lambda ck: None)
    code = gpu_check.main(["--device", "cpu", "--only", "box", "--out", str(tmp_path)])
    assert code == 1
    summary = (tmp_path / "summary.txt").read_text()
    assert "box           fail" in summary and "passed its limit of 1 s" in summary

    monkeypatch.setattr(gpu_check, "RESERVE_S", 59.8)  # a 60 s budget leaves 0.2 s: less than a step's minimum
    code = gpu_check.main(["--device", "cpu", "--budget-s", "60", "--only", "doctor", "--out", str(tmp_path)])
    summary = (tmp_path / "summary.txt").read_text()
    assert "doctor        skipped" in summary and "budget spent" in summary


@pytest.mark.parametrize(
    "argv",
    [["--only", "matmul,nonsense"], ["--device", "tpu"], ["--budget-s", "5"]],
)
def test_bad_input_exits_2_naming_it(argv, capsys):
    with pytest.raises(SystemExit) as stop:
        gpu_check.parse(argv)
    assert stop.value.code == 2
    assert argv[-1].split(",")[-1] in capsys.readouterr().err


def test_config_dicts_become_the_cli_options():
    assert gpu_check.options({"size_mib": 16, "trace": False, "sweep": True, "sizes": (64, 128)}) == [
        "--size-mib",
        "16",
        "--no-trace",
        "--sweep",
        "--sizes",
        "64,128",
    ]

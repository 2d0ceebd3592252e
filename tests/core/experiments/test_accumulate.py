"""The accumulation loop against numpy's own float16/float32 loops and hand-derived bf16 stalls."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from core.errors import ConfigError
from core.experiment import Context, drive
from core.experiments.accumulate import AccumulateConfig, accumulate, checkpoints, run


def numpy_loop(value, steps, acc, addend):
    s, x = acc(0), acc(addend(value))
    for _ in range(steps):
        s = acc(s + x)
    return float(s)


@pytest.mark.parametrize(
    "acc, add, np_acc, np_add",
    [
        (torch.float32, torch.float32, np.float32, np.float32),
        (torch.float16, torch.float16, np.float16, np.float16),
        (torch.float32, torch.float16, np.float32, np.float16),
        (torch.float64, torch.float32, np.float64, np.float32),
    ],
)
def test_loop_matches_numpy(acc, add, np_acc, np_add):
    result, _, _ = accumulate(0.01, 1000, acc, add, "cpu", set())
    assert result == numpy_loop(0.01, 1000, np_acc, np_add)


def test_seed_numbers():
    fp32, _, _ = accumulate(0.01, 1000, torch.float32, torch.float32, "cpu", set())
    fp16, _, _ = accumulate(0.01, 1000, torch.float16, torch.float16, "cpu", set())
    mixed, _, _ = accumulate(0.01, 1000, torch.float32, torch.float16, "cpu", set())
    assert round(fp32, 4) == 10.0001  # the note's tensor(10.0001)
    assert fp16 == 9.953125  # tensor(9.9531, dtype=torch.float16)
    assert round(mixed, 4) == 10.0021  # the fp16 addend is 0.01000213623046875


def test_bf16_stalls_at_4():
    """Hand: in [4, 8) bf16's spacing is 2^-5 = 0.03125; half of it exceeds 0.01, so 4 + 0.01 rounds to 4."""
    result, _, stalled = accumulate(0.01, 1000, torch.bfloat16, torch.bfloat16, "cpu", set())
    assert result == 4.0 and stalled is not None and stalled > 1


def test_fp16_stalls_at_32():
    """Hand: in [32, 64) fp16's spacing is 2^-5 = 0.03125 > 2 × 0.01."""
    result, curve, stalled = accumulate(0.01, 5000, torch.float16, torch.float16, "cpu", {4999, 5000})
    assert result == 32.0 and curve == [32.0, 32.0] and stalled is not None


def test_checkpoints():
    assert checkpoints(5, 400) == [1, 2, 3, 4, 5]
    points = checkpoints(100_000, 400)
    assert points[-1] == 100_000 and len(points) <= 401 and points == sorted(set(points))


def test_run_rows_and_curve():
    out, _ = drive(run(AccumulateConfig(steps=300, dtypes=("fp32", "fp16")), Context("cpu", "CPU")))
    loops = [r for r in out.rows if r["method"] == "loop"]
    sums = [r for r in out.rows if r["method"] == "torch.sum"]
    assert len(loops) == 4 and len(sums) == 2
    assert out.meta["curve"]["steps"][-1] == 300
    for row, series in zip(loops, out.meta["curve"]["series"]):
        assert series["sum"][-1] == row["result"]
        assert row["error"] == pytest.approx(row["result"] - 3.0, abs=1e-12)
    fp16_sum = next(r for r in sums if r["addend"] == "fp16")
    assert fp16_sum["result"] == float(np.float16(np.float32(np.float16(0.01)) * 300))  # fp32 accumulate, one rounding


def test_config_limits():
    with pytest.raises(ConfigError, match="steps"):
        AccumulateConfig(steps=0)
    with pytest.raises(ConfigError, match="dtypes"):
        AccumulateConfig(dtypes=("fp8",))


def test_cli_json(tmp_path):
    env = dict(os.environ, GPULAB_DATA_DIR=str(tmp_path / "d"), GPULAB_LOCK_DIR=str(tmp_path / "l"))
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "core",
            "accumulate",
            "--value",
            "0.01",
            "--steps",
            "1000",
            "--device",
            "cpu",
            "--json",
            "--no-save",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    rows = {(r["accumulator"], r["addend"]): r for r in json.loads(out.stdout)["rows"]}
    assert rows[("fp16", "fp16")]["result"] == 9.953125
    assert {"result", "error"} <= set(rows[("fp32", "fp16")])


@pytest.mark.gpu
def test_cuda_loop_matches_numpy():
    result, _, _ = accumulate(0.01, 1000, torch.float16, torch.float16, "cuda", set())
    assert result == numpy_loop(0.01, 1000, np.float16, np.float16)


def test_the_loop_makes_no_tensor_from_the_host_per_step(monkeypatch):
    """On CUDA ``torch.tensor(step, device=...)`` is a blocking host-to-device copy: none may happen per step."""
    from core.experiments import accumulate as module

    made = []
    real = torch.tensor
    monkeypatch.setattr(torch, "tensor", lambda *a, **k: made.append(a) or real(*a, **k))
    for steps in (10, 200):
        made.clear()
        result, _, stalled = module.accumulate(0.01, steps, torch.float32, torch.float32, "cpu", set())
        assert len(made) == 1  # the addend, once
    assert result == pytest.approx(2.0, abs=0.01) and stalled is None


@pytest.mark.gpu
def test_cuda_loop_never_synchronises():
    from core.experiments.accumulate import add_loop

    s = torch.zeros((), dtype=torch.float16, device="cuda:0")
    x = torch.tensor(0.01, dtype=torch.float16, device="cuda:0")
    stalled = torch.zeros((), dtype=torch.int64, device="cuda:0")
    torch.cuda.synchronize("cuda:0")
    torch.cuda.set_sync_debug_mode("error")  # any synchronising call in the loop raises
    try:
        add_loop(s, x, stalled, 5000, {1000, 5000})
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert int(stalled.item()) > 0  # fp16 += 0.01 stalls long before 5000 steps

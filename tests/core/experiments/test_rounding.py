"""Matmul rounding: CPU names TF32 unsupported; errors ordered as the unit roundoffs predict."""

import numpy as np
import pytest
import torch

from core.errors import ConfigError
from core.experiment import Context, drive
from core.experiments.rounding import RoundingConfig, relative_error, run


def test_relative_error_against_numpy():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((8, 8)), rng.standard_normal((8, 8))
    rel, worst = relative_error(torch.tensor(a, dtype=torch.float32), torch.tensor(b))
    assert rel == pytest.approx(np.linalg.norm(a.astype(np.float32) - b) / np.linalg.norm(b), rel=1e-9)
    assert worst == pytest.approx(np.abs(a.astype(np.float32) - b).max() / np.abs(b).max(), rel=1e-9)


def test_cpu_rows():
    rows = {r["mode"]: r for r in drive(run(RoundingConfig(size=128), Context("cpu", "CPU")))[0].rows}
    assert rows["tf32"]["status"] == "unsupported"
    assert rows["tf32"]["reason"] == "TF32 applies to CUDA tensor cores only" and "rel_error" not in rows["tf32"]
    assert rows["fp32"]["rel_error"] < 1e-5 < rows["fp16"]["rel_error"] < rows["bf16"]["rel_error"] < 2e-2


def test_config_limits():
    with pytest.raises(ConfigError, match="size"):
        RoundingConfig(size=8)


@pytest.mark.gpu
def test_cuda_tf32_sits_between_fp32_and_bf16():
    rows = {r["mode"]: r for r in drive(run(RoundingConfig(size=1024), Context("cuda:0", "GPU")))[0].rows}
    if rows["tf32"]["status"] == "unsupported":
        pytest.skip(rows["tf32"]["reason"])
    assert rows["fp32"]["rel_error"] < rows["tf32"]["rel_error"] < rows["bf16"]["rel_error"]


def test_a_size_that_cannot_fit_is_refused_before_allocating(monkeypatch):
    """Issue 15 finding 1: every experiment that allocates checks its need first."""
    from core.errors import DoesNotFit
    from core.hardware import memory

    monkeypatch.setattr(memory, "budget", lambda device: memory.Budget(2**30, "only 1 GiB is free (test)"))
    with pytest.raises(DoesNotFit, match="rounding at size 8192 .* needs an estimated 4.0 GiB"):
        drive(run(RoundingConfig(size=8192), Context("cpu", "CPU")))  # 64 bytes × 8192² = 4 GiB

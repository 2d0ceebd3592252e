"""The max-batch search, against a known limit (the GPU probes themselves need a GPU)."""

import pytest

from core.experiments.max_batch import binary_search_max


def test_binary_search_finds_limit_with_few_probes():
    limit = 37
    found, probes = binary_search_max(lambda b: b <= limit, guess=20, max_probes=20)
    assert found == limit and len(probes) <= 8
    assert binary_search_max(lambda b: False, guess=4, max_probes=10)[0] == 0
    assert binary_search_max(lambda b: b <= 3, guess=100, max_probes=20)[0] == 3


def test_every_allocation_failure_is_named_and_other_errors_are_not():
    import torch

    from core.hardware.memory import allocation_failure

    assert "CUBLAS_STATUS_ALLOC_FAILED" in allocation_failure(
        RuntimeError("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`")
    )
    assert "cudaErrorMemoryAllocation" in allocation_failure(
        "RuntimeError: CUDA driver error: cudaErrorMemoryAllocation (lazy module load)"
    )
    assert allocation_failure(torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")).startswith(
        "torch.cuda.OutOfMemoryError"
    )
    assert allocation_failure(RuntimeError("CUDA error: out of memory")) == "out of memory"
    assert allocation_failure(RuntimeError("mat1 and mat2 shapes cannot be multiplied")) is None
    assert allocation_failure(ValueError("out of memory")) is None  # not an error torch raises for memory


class _Done:
    def __init__(self, returncode, stdout="", stderr=""):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def test_a_probe_that_dies_allocating_does_not_fit_and_the_search_goes_on(monkeypatch):
    from core.experiments import max_batch

    crash = "Traceback …\nRuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"
    monkeypatch.setattr(max_batch.subprocess, "run", lambda *a, **k: _Done(1, stderr=crash))
    result = max_batch._fresh_probe({"batch": 64}, "cuda:0")
    assert result["fits"] is False and "cuBLAS" in result["failure"] and "CUBLAS_STATUS_ALLOC_FAILED" in result["error"]
    monkeypatch.setattr(max_batch.subprocess, "run", lambda *a, **k: _Done(1, stderr="AssertionError: a bug"))
    with pytest.raises(RuntimeError, match="probe at batch 64 crashed: AssertionError: a bug"):
        max_batch._fresh_probe({"batch": 64}, "cuda:0")


@pytest.mark.gpu
def test_gpu_search_confirms_a_batch_within_the_planner_range(manager):
    run = manager.submit(
        "max-batch", {"model": "small", "precision": "bf16-autocast", "context": 256, "max_probes": 6}, "cuda:0"
    ).wait(3600)
    assert run.status == "ok", run.error
    assert run.meta["max_batch_measured"] >= 1
    assert all(r["fits"] or r["failure"] for r in run.rows)  # a failed probe always says which allocation

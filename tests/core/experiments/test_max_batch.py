"""The max-batch search, against a known limit (the GPU probes themselves need a GPU)."""

import pytest

from core.experiments.max_batch import binary_search_max


def test_binary_search_finds_limit_with_few_probes():
    limit = 37
    found, probes = binary_search_max(lambda b: b <= limit, guess=20, max_probes=20)
    assert found == limit and len(probes) <= 8
    assert binary_search_max(lambda b: False, guess=4, max_probes=10)[0] == 0
    assert binary_search_max(lambda b: b <= 3, guess=100, max_probes=20)[0] == 3


def test_chart_shows_each_probe_where_it_belongs():
    from core.result import RunResult
    from render.plots.max_batch import figures

    gib = 2**30
    rows = [
        {"batch": 8, "fits": True, "peak_measured_bytes": 10 * gib, "peak_estimated_bytes": 11 * gib, "error": None},
        {
            "batch": 16,
            "fits": False,
            "peak_measured_bytes": None,
            "peak_estimated_bytes": 21 * gib,
            "error": "CUDA out of memory",
        },
        {"batch": 12, "fits": True, "peak_measured_bytes": 15 * gib, "peak_estimated_bytes": 16 * gib, "error": None},
    ]
    run = RunResult(
        experiment="max-batch",
        config={"model": "small", "context": 256},
        device={"kind": "cuda", "name": "G"},
        versions={},
        started_at="2026-01-01T00:00:00",
        finished_at=None,
        status="ok",
        rows=rows,
        meta={"max_batch_measured": 12, "max_batch_estimated": 8, "memory_bytes": 80 * gib},
    )
    (chart,) = figures(run)
    traces = {t.name: t for t in chart.figure.data}
    assert list(traces["fits (measured)"].x) == [8, 12] and list(traces["fits (measured)"].y) == [10.0, 15.0]
    assert list(traces["does not fit"].x) == [16] and list(traces["does not fit"].y) == [21.0]
    assert list(traces["estimate"].x) == [8, 12, 16]
    assert "Max batch that fits: 12" in chart.figure.layout.title.text
    assert chart.figure.layout.yaxis.title.text == "peak allocated (GiB)"


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

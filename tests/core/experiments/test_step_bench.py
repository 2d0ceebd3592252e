"""step-bench on CPU: both timing series, a breakdown that adds up, honest unsupported modes."""

import gzip
import json

import pytest

from core.errors import ConfigError
from core.experiment import Context, drive
from core.experiments.step_bench import GROUPS, StepBenchConfig, run

CPU = Context("cpu", "CPU")
SMALL = dict(model="tiny", batch=2, context=16, warmup_steps=1, timed_steps=3, cold_steps=2, profile_steps=1)


@pytest.fixture(scope="module")
def output(tmp_path_factory):
    """One small run shared by the tests below (its trace goes to a private data directory)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GPULAB_DATA_DIR", str(tmp_path_factory.mktemp("step-bench-data")))
        return drive(run(StepBenchConfig(**SMALL), CPU))


def test_warm_and_cold_series(output):
    out, events = output
    samples = [r for r in out.rows if r["kind"] == "sample"]
    for series, steps in (("cold", 2), ("warm", 3)):
        got = [r for r in samples if r["series"] == series]
        assert sorted({r["step"] for r in got}) == list(range(1, steps + 1))
        assert {r["phase"] for r in got} == {"forward", "backward", "optimizer", "zero_grad", "step"}
        assert all(r["ms"] > 0 for r in got)
    # progress events carried the cold samples before the run finished
    assert any(r.get("series") == "cold" for e in events for r in e.rows)
    summary = next(r for r in out.rows if r["kind"] == "summary")
    assert summary["mfu"] is None and "CPU" in summary["mfu_note"]
    assert summary["tokens_per_step"] == 2 * 16
    warm_steps = sorted(r["ms"] for r in samples if r["series"] == "warm" and r["phase"] == "step")
    assert summary["step_ms_median"] == warm_steps[1]
    assert summary["tokens_per_s"] == pytest.approx(32 / (warm_steps[1] / 1e3))


def test_cold_steps_say_what_they_pay_for_and_it_is_not_the_context(output):
    from core.experiments.step_bench import COLD_INCLUDES

    out, _ = output
    assert out.meta["cold_includes"] == COLD_INCLUDES["cpu"]
    # the worker creates the CUDA context before a job starts (describe → mem_get_info): the GPU note says so
    assert "context already existed" in COLD_INCLUDES["cuda"] and "cuBLAS handle" in COLD_INCLUDES["cuda"]


def test_phases_add_up_to_the_step(output):
    out, _ = output
    samples = [r for r in out.rows if r["kind"] == "sample"]
    for series, step in {(r["series"], r["step"]) for r in samples}:
        mine = {r["phase"]: r["ms"] for r in samples if r["series"] == series and r["step"] == step}
        parts = mine["forward"] + mine["backward"] + mine["optimizer"] + mine["zero_grad"]
        assert parts == pytest.approx(mine["step"], rel=1e-9)


def test_groups_sum_to_profiled_total(output):
    out, _ = output
    trace = json.loads(gzip.open(out.meta["trace_path"]).read())
    for scope in ("forward", "step"):
        groups = [r for r in out.rows if r["kind"] == "group" and r["scope"] == scope]
        assert [g["group"] for g in groups] == list(GROUPS)
        total = sum(g["ms_per_step"] for g in groups)
        assert total == pytest.approx(out.meta["profiled_total_ms"][scope], rel=1e-9)
        assert sum(g["share"] for g in groups) == pytest.approx(1.0)
        # independent: the wall duration of the scope's range in the exported Chrome trace (µs)
        wall_us = sum(
            e["dur"] for e in trace["traceEvents"] if e.get("name") == f"gpulab:scope:{scope}" and e.get("ph") == "X"
        )
        assert total == pytest.approx(wall_us / 1e3, rel=0.02)
        kernels = [r for r in out.rows if r["kind"] == "kernel" and r["scope"] == scope]
        assert kernels and kernels[0]["rank"] == 1
        assert [k["ms_per_step"] for k in kernels] == sorted((k["ms_per_step"] for k in kernels), reverse=True)
    step_groups = {r["group"]: r for r in out.rows if r["kind"] == "group" and r["scope"] == "step"}
    fwd_groups = {r["group"]: r for r in out.rows if r["kind"] == "group" and r["scope"] == "forward"}
    assert step_groups["optimizer"]["ms_per_step"] > 0 and fwd_groups["optimizer"]["ms_per_step"] == 0
    assert step_groups["matmul"]["ms_per_step"] > 0
    assert step_groups["matmul"]["flops_share"] + step_groups["attention-softmax"]["flops_share"] == pytest.approx(1)


def test_sweep_reports_unsupported_modes():
    cfg = StepBenchConfig(**(SMALL | {"timed_steps": 2, "warmup_steps": 0}), sweep=True)
    out, _ = drive(run(cfg, CPU))
    rows = {r["precision"]: r for r in out.rows if r["kind"] == "precision"}
    assert list(rows) == ["fp32", "tf32", "bf16-autocast", "fp16-autocast", "bf16"]
    assert rows["tf32"]["status"] == "unsupported" and "unsupported on CPU" in rows["tf32"]["reason"]
    assert rows["fp32"]["status"] == "ok" and rows["fp32"]["speedup_vs_fp32"] == 1.0
    assert rows["bf16"]["status"] == "ok"
    assert rows["bf16"]["speedup_vs_fp32"] == pytest.approx(
        rows["fp32"]["step_ms_median"] / rows["bf16"]["step_ms_median"]
    )


def test_tf32_on_cpu_is_unsupported():
    from core.errors import Unsupported

    with pytest.raises(Unsupported, match="unsupported on CPU"):
        drive(run(StepBenchConfig(**(SMALL | {"precision": "tf32"})), CPU))


@pytest.mark.parametrize(
    "bad, limit",
    [
        ({"timed_steps": 1}, "timed_steps must be between 2"),
        ({"batch": 0}, "batch must be between 1"),
        ({"model": "huge"}, "unknown model preset"),
        ({"profile_steps": 11}, "profile_steps must be between 0 and 10"),
    ],
)
def test_bad_config_names_the_limit(bad, limit):
    with pytest.raises(ConfigError, match=limit):
        StepBenchConfig(**bad)


@pytest.mark.gpu
def test_gpu_step_bench_kernels_and_mfu():
    import torch

    ctx = Context("cuda:0", torch.cuda.get_device_name(0))
    out, _ = drive(run(StepBenchConfig(**(SMALL | {"model": "mini", "context": 128})), ctx))
    groups = {r["group"]: r for r in out.rows if r["kind"] == "group" and r["scope"] == "step"}
    assert groups["matmul"]["ms_per_step"] > 0
    kernels = [r for r in out.rows if r["kind"] == "kernel"]
    assert not any(k["name"].startswith("aten::") for k in kernels)  # GPU kernels, not CPU ops
    summary = next(r for r in out.rows if r["kind"] == "summary")
    assert summary["mfu"] is None or 0 < summary["mfu"] < 1


def test_a_step_faster_than_the_datasheet_is_a_measurement_error():
    from core.experiments.step_bench import throughput
    from core.transformer.flops import StepFlops

    # 4e12 FLOP in 2 ms = 2000 TFLOPS: beyond an H100's 989.4 bf16 peak, so the timing must be wrong
    flops = StepFlops(
        tokens=1000,
        matmul_params=1,
        weight_forward=1e12,
        weight_backward=3e12,
        attention_forward=0,
        attention_backward=0,
        softmax_forward_estimate=0,
        softmax_backward_estimate=0,
    )
    wrong = throughput(flops, 2.0, 989.4)
    assert wrong["achieved_tflops"] == pytest.approx(2000.0) and wrong["above_peak"] is True
    assert wrong["measurement_error"].startswith("measurement error: above the datasheet peak: the training step")
    fine = throughput(flops, 8.0, 989.4)  # 500 TFLOPS
    assert fine["above_peak"] is False and fine["mfu"] == pytest.approx(500 / 989.4)
    assert throughput(flops, 2.0, None)["above_peak"] is False  # no sheet, nothing to compare


def test_a_sweep_refuses_the_precisions_that_cannot_fit(monkeypatch):
    """Issue 15 finding 1: the sweep built every precision's model whatever it needed."""
    from core.hardware import memory
    from core.transformer.planner import EstimateConfig, need_bytes

    cfg = StepBenchConfig(
        model="tiny", batch=2, context=32, sweep=True, warmup_steps=0, timed_steps=2, cold_steps=0, profile_steps=0
    )
    need = {
        p: need_bytes(EstimateConfig(model="tiny", precision=p, batch=2, context=32, target="cpu"))
        for p in ("fp32", "bf16")
    }
    assert need["bf16"] < need["fp32"]  # bf16 weights are half the size
    between = (need["bf16"] + need["fp32"]) // 2
    monkeypatch.setattr(memory, "budget", lambda device: memory.Budget(between, "only a little is free (test)"))
    out, _ = drive(run(cfg, CPU))
    status = {r["precision"]: r["status"] for r in out.rows if r["kind"] == "precision"}
    assert status["fp32"] == "refused" and status["bf16"] == "ok" and status["tf32"] == "unsupported"
    monkeypatch.setattr(memory, "budget", lambda device: memory.Budget(need["bf16"] - 1, "only a little (test)"))
    from core.errors import DoesNotFit

    with pytest.raises(DoesNotFit, match="a bf16 training step of tiny"):  # none fits: the smallest is named
        drive(run(cfg, CPU))

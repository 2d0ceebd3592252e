"""step-bench on CPU: both timing series, a breakdown that adds up, honest unsupported modes."""

import gzip
import json
import time

import pytest

from core.errors import ConfigError
from core.experiment import Context, drive
from core.experiments.step_bench import GROUPS, StepBenchConfig, run
from core.measure.kernels import classify
from core.measure.step_timer import PhaseTimer

CPU = Context("cpu", "CPU")
SMALL = dict(
    model="tiny", batch=2, context=16, warmup_steps=1, max_warmup_steps=2, timed_steps=3, cold_steps=2, profile_steps=1
)


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


def test_phases_add_up_to_the_step():
    """The phases and the step against the test's own wall clock around the same steps."""
    from core.transformer.bench import Bench
    from core.transformer.planner import MeasuredStep

    bench = Bench.build(MeasuredStep(model="tiny", batch=2, context=16), "cpu")
    bench.step.run(*bench.next_batch())  # first-touch costs outside the timed steps
    timer = PhaseTimer("cpu")
    for _ in range(3):
        x, y = bench.next_batch()
        t0 = time.perf_counter()
        ms = timer.time_step(bench.step, x, y)
        wall_ms = (time.perf_counter() - t0) * 1e3
        parts = ms["forward"] + ms["backward"] + ms["optimizer"] + ms["zero_grad"]
        for measured in (parts, ms["step"]):
            # inside the wall clock, missing at most the timer's own bookkeeping around the step
            assert wall_ms - max(1.0, 0.1 * wall_ms) <= measured <= wall_ms
        assert all(ms[p] > 0 for p in ("forward", "backward", "optimizer"))


def _self_times(events: list[dict]) -> list[tuple[dict, float]]:
    """(event, self µs) of every complete event of a Chrome trace: its duration less its direct children's,
    nesting read per thread from the timestamps."""
    threads: dict[tuple, list[dict]] = {}
    for e in events:
        threads.setdefault((e["pid"], e["tid"]), []).append(e)
    out = []
    for evs in threads.values():
        stack: list[list] = []
        for e in sorted(evs, key=lambda e: (e["ts"], -e["dur"])):
            while stack and e["ts"] >= stack[-1][0]["ts"] + stack[-1][0]["dur"]:
                out.append(tuple(stack.pop()))
            if stack:
                stack[-1][1] -= e["dur"]
            stack.append([e, e["dur"]])
        out.extend(tuple(entry) for entry in stack)
    return out


def test_groups_sum_to_profiled_total(output):
    out, _ = output
    trace = json.loads(gzip.open(out.meta["trace_path"]).read())
    complete = [e for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation")]

    def ranges(kind):
        return [
            (e["name"].split(":")[2], e["ts"], e["ts"] + e["dur"])
            for e in complete
            if e["name"].startswith(f"gpulab:{kind}:")
        ]

    def at(spans, ts):
        return next((name for name, a, b in spans if a <= ts < b), None)

    scopes, phases = ranges("scope"), ranges("phase")
    by_hand = {s: dict.fromkeys(GROUPS, 0.0) for s in ("forward", "step")}
    for e, self_us in _self_times(complete):
        if (scope := at(scopes, e["ts"])) is not None:
            by_hand[scope][classify(e["name"], at(phases, e["ts"]))] += self_us / 1e3 / out.meta["profile_steps"]
    for scope in ("forward", "step"):
        groups = [r for r in out.rows if r["kind"] == "group" and r["scope"] == scope]
        assert [g["group"] for g in groups] == list(GROUPS)
        total = sum(g["ms_per_step"] for g in groups)
        # independent: every op's self time in the exported Chrome trace, by the scope and phase range it starts in
        assert {g["group"]: g["ms_per_step"] for g in groups} == pytest.approx(by_hand[scope], rel=1e-3, abs=1e-3)
        assert sum(g["share"] for g in groups) == pytest.approx(1.0)
        # independent: the wall duration of the scope's range in the exported Chrome trace (µs)
        wall_us = sum(
            e["dur"] for e in trace["traceEvents"] if e.get("name") == f"gpulab:scope:{scope}" and e.get("ph") == "X"
        )
        assert total == pytest.approx(wall_us / 1e3, rel=0.02)
        summary = next(r for r in out.rows if r["kind"] == "summary")
        assert summary["profiled_total_ms"][scope] == pytest.approx(wall_us / 1e3, rel=0.02)
        kernels = [r for r in out.rows if r["kind"] == "kernel" and r["scope"] == scope]
        assert kernels and kernels[0]["rank"] == 1
        assert [k["ms_per_step"] for k in kernels] == sorted((k["ms_per_step"] for k in kernels), reverse=True)
    step_groups = {r["group"]: r for r in out.rows if r["kind"] == "group" and r["scope"] == "step"}
    fwd_groups = {r["group"]: r for r in out.rows if r["kind"] == "group" and r["scope"] == "forward"}
    assert step_groups["optimizer"]["ms_per_step"] > 0 and fwd_groups["optimizer"]["ms_per_step"] == 0
    assert step_groups["matmul"]["ms_per_step"] > 0
    assert step_groups["matmul"]["flops_share"] + step_groups["attention-softmax"]["flops_share"] == pytest.approx(1)


def test_sweep_reports_unsupported_modes():
    cfg = StepBenchConfig(**(SMALL | {"timed_steps": 2, "warmup_steps": 0, "profile_steps": 0}), sweep=True)
    out, _ = drive(run(cfg, CPU))
    rows = {r["precision"]: r for r in out.rows if r["kind"] == "precision"}
    assert list(rows) == ["fp32", "tf32", "bf16-autocast", "fp16-autocast", "bf16-master", "bf16", "fp8"]
    assert rows["tf32"]["status"] == "unsupported" and "unsupported on CPU" in rows["tf32"]["reason"]
    assert rows["fp8"]["status"] == "unsupported" and "fp8 tensor cores" in rows["fp8"]["reason"]
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
        ({"batch": -1}, "batch must be between 0"),
        ({"stacks": ("course", "turbo")}, "'turbo' is not one of"),
        ({"stacks": ("modern", "sdpa+fused+compile")}, "names one stack twice"),
        ({"precisions": ("fp4",)}, "precision 'fp4' is not one of"),
        ({"models": ("gpt2-124m", "huge")}, "unknown model preset 'huge'"),
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


H100 = {"kind": "cuda", "name": "NVIDIA H100 80GB HBM3", "spec": {"name": "H100 SXM", "tflops": {"bf16": 989.4}}}


def test_a_step_faster_than_the_datasheet_is_a_measurement_error():
    from core.experiments.step_bench import step_figures
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
    wrong = step_figures(flops, 2.0, H100, "bf16-autocast", None, "the training step")
    assert wrong["achieved_tflops"] == pytest.approx(2000.0) and wrong["above_peak"] is True
    assert wrong["measurement_error"].startswith("measurement error: above the datasheet peak: the training step")
    fine = step_figures(flops, 8.0, H100, "bf16-autocast", None, "the training step")  # 500 TFLOPS
    assert fine["above_peak"] is False and fine["mfu"] == pytest.approx(500 / 989.4)
    unknown = {"kind": "cuda", "name": "a GPU the sheet lacks", "spec": None}
    assert step_figures(flops, 2.0, unknown, "bf16-autocast", None, "x")["above_peak"] is False  # nothing to compare


def test_a_sweep_refuses_the_precisions_that_cannot_fit(monkeypatch):
    """Issue 15 finding 1: the sweep built every precision's model whatever it needed."""
    from core.hardware import memory
    from core.transformer.planner import EstimateConfig, need_bytes

    cfg = StepBenchConfig(
        model="tiny",
        batch=2,
        context=32,
        sweep=True,
        warmup_steps=0,
        max_warmup_steps=0,
        timed_steps=2,
        cold_steps=0,
        profile_steps=0,
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
    assert "stack course) by the memory planner" in next(r["reason"] for r in out.rows if r["status"] == "refused")
    monkeypatch.setattr(memory, "budget", lambda device: memory.Budget(need["bf16"] - 1, "only a little (test)"))
    from core.errors import DoesNotFit

    with pytest.raises(DoesNotFit, match="a bf16 training step of tiny"):  # none fits: the smallest is named
        drive(run(cfg, CPU))


def test_a_cpu_run_on_a_busy_machine_says_so(monkeypatch, tmp_path):
    """As the matmul page does: a CPU whose load is over its cores gets the busy-machine note in the meta,
    which the page shows; a quiet one gets none."""
    import os

    monkeypatch.setenv("GPULAB_DATA_DIR", str(tmp_path))
    config = StepBenchConfig(**dict(SMALL, profile_steps=0, trace=False, cold_steps=0, timed_steps=2))
    monkeypatch.setattr(os, "getloadavg", lambda: (64.0 * (os.cpu_count() or 1), 0.0, 0.0))
    out, _ = drive(run(config, CPU))
    assert "the CPU was busy" in out.meta["cpu_load_note"] and "times include waits" in out.meta["cpu_load_note"]
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    out, _ = drive(run(config, CPU))
    assert "cpu_load_note" not in out.meta and out.meta["cpu_load_1min"] == 0.0

"""The GPU check's judges, fed hand-made runs whose right verdict is worked out by hand in each test."""

from __future__ import annotations

import pytest

from scripts import gpu_claims as claims

GIB = 2**30
CUDA = {"kind": "cuda", "name": "NVIDIA H100 80GB HBM3"}


def run(rows: list[dict], meta: dict | None = None, status: str = "ok", device: dict = CUDA) -> dict:
    return {"status": status, "error": None, "rows": rows, "meta": meta or {}, "device": device}


def point(dtype: str, size: int, ms: float, **extra) -> dict:
    """A matmul row whose TFLOPS is 2·size³ / ms, worked out here."""
    return {
        "dtype": dtype,
        "m": size,
        "n": size,
        "k": size,
        "status": "ok",
        "median_ms": ms,
        "tflops": 2 * size**3 / (ms * 1e9),
        "peak_tflops": 989.0,
    } | extra


def test_every_dtype_measured_or_explained_passes_and_a_figure_above_the_sheet_fails():
    fine = run(
        [
            point("bf16", 8192, 1.5),  # 733 TFLOPS < 989
            {"dtype": "int4", "m": 8192, "status": "unsupported", "reason": "unsupported on X: no int4 matmul"},
        ]
    )
    assert claims.dtypes_measured(fine).verdict == "pass"
    above = run([point("bf16", 8192, 1.0)])  # 2·8192³ / 1 ms = 1099.5 TFLOPS > 989
    judged = claims.dtypes_measured(above)
    assert judged.verdict == "fail" and "1099.5 > peak 989.0" in judged.measured
    unexplained = run([{"dtype": "fp8", "m": 64, "status": "unsupported", "reason": "no"}])
    assert claims.dtypes_measured(unexplained).verdict == "fail"
    crashed = run([{"dtype": "fp8", "m": 64, "status": "error", "reason": "boom"}])
    assert claims.dtypes_measured(crashed).verdict == "fail"


def test_a_missing_or_failed_run_fails_and_an_unsupported_one_is_said():
    assert claims.dtypes_measured(None).verdict == "fail"
    assert claims.dtypes_measured(run([], status="error")).verdict == "fail"
    unsupported = run([], status="unsupported") | {"error": "unsupported on CPU: no tensor cores"}
    judged = claims.timer_agreement(unsupported)
    assert judged.verdict == "unsupported" and "no tensor cores" in judged.measured


@pytest.mark.parametrize(("lab_ms", "verdict"), [(1.02, "pass"), (1.05, "fail")])
def test_timer_agreement_compares_medians_of_the_rounds(lab_ms, verdict):
    # Medians over three rounds: lab (lab_ms, 9, 0.5) → lab_ms; reference (1.0, 7, 0.1) → 1.0; TFLOPS ratio 1/lab_ms.
    rows = [
        {"dtype": "bf16", "m": 8192, "n": 8192, "k": 8192, "tool": "t", "lab_median_ms": a, "reference_median_ms": b}
        for a, b in ((lab_ms, 1.0), (9.0, 7.0), (0.5, 0.1))
    ]
    judged = claims.timer_agreement(run(rows))
    assert judged.verdict == verdict
    assert f"{1 / lab_ms:.3f}×" in judged.measured
    on_cpu = claims.timer_agreement(run(rows, device={"kind": "cpu", "name": "AMD EPYC"}))
    assert on_cpu.verdict == "info"  # shown, never judged: a CPU timing moves with the load


def test_tf32_must_be_several_times_faster_and_less_exact():
    fast = run([point("fp32", 8192, 20.0, rel_error=1e-6), point("tf32", 8192, 4.0, rel_error=5e-4)])
    judged = claims.tf32_speedup(fast, 8192)
    assert judged.verdict == "pass" and "5.00×" in judged.measured
    slow = run([point("fp32", 8192, 20.0, rel_error=1e-6), point("tf32", 8192, 15.0, rel_error=5e-4)])
    assert claims.tf32_speedup(slow, 8192).verdict == "fail"  # 1.33×
    exact = run([point("fp32", 8192, 20.0, rel_error=1e-6), point("tf32", 8192, 4.0, rel_error=1e-7)])
    assert claims.tf32_speedup(exact, 8192).verdict == "fail"  # a TF32 as exact as fp32 was not TF32


def test_a_fixed_shape_is_shown_beside_the_published_figure_never_judged_by_it():
    judged = claims.against_published(run([point("bf16", 8192, 1.5, published_tflops=794.5)]), "bf16", 8192)
    assert judged.verdict == "info" and "92.3%" in judged.measured  # 733.0 / 794.5 = 0.9226
    low = claims.against_published(run([point("bf16", 8192, 2.0, published_tflops=794.5)]), "bf16", 8192)
    assert low.verdict == "info" and "69.2%" in low.measured  # 549.8 / 794.5: a finding, not a verdict


def lifecycle_rows(size: int, to_cpu_frees: bool = False, reassign_in_place: bool = False) -> list[dict]:
    """The seed's steps as the caching allocator books them, by hand (units of the tensor's size S)."""
    context = 500 * 2**20
    seq = [  # op, allocated, reserved, peak (since the reset), in S
        ("", 0, 0, 0),
        ("alloc a", 1, 1, 1),
        ("alloc b", 2, 2, 2),
        ("to_cpu b", 1, 1 if to_cpu_frees else 2, 2),
        ("alloc c", 2, 2, 2),
        ("alloc c", 2, 3, 2 if reassign_in_place else 3),
        ("alloc d", 3, 3, 3),
        ("free d", 2, 3, 3),
        ("alloc_cpu e", 2, 3, 3),
        ("to_device e", 3, 3, 3),
        ("empty_cache", 3, 3, 3),
    ]
    return [
        {
            "op": f"{op} 1024".strip() if op.startswith("alloc") else op,
            "step": f"{i}. …",
            "allocated_bytes": a * size,
            "reserved_bytes": r * size,
            "peak_allocated_bytes": p * size,
            "driver_used_bytes": context + r * size,
        }
        for i, (op, a, r, p) in enumerate(seq)
    ]


def test_lifecycle_claims_hold_on_the_allocator_the_seed_describes():
    judged = claims.lifecycle_claims(run(lifecycle_rows(GIB)), 1024)
    assert [c.verdict for c in judged] == ["pass", "pass"]
    freed = claims.lifecycle_claims(run(lifecycle_rows(GIB, to_cpu_frees=True)), 1024)
    assert [c.verdict for c in freed] == ["fail", "pass"]
    in_place = claims.lifecycle_claims(run(lifecycle_rows(GIB, reassign_in_place=True)), 1024)
    assert [c.verdict for c in in_place] == ["pass", "fail"]


def test_the_allocator_claims_are_unsupported_on_a_cpu():
    cpu = run(lifecycle_rows(GIB), device={"kind": "cpu", "name": "AMD EPYC"})
    assert {c.verdict for c in claims.lifecycle_claims(cpu, 1024)} == {"unsupported"}
    assert {c.verdict for c in claims.delete_claim(cpu, 1024)} == {"unsupported"}


@pytest.mark.parametrize(("after_empty_cache", "verdict"), [(0, "pass"), (1, "fail")])
def test_del_keeps_memory_until_empty_cache(after_empty_cache, verdict):
    context = 500 * 2**20
    rows = [
        {"op": op, "driver_used_bytes": context + held * GIB}
        for op, held in (("", 0), ("alloc x 1024", 1), ("free x", 1), ("empty_cache", after_empty_cache))
    ]
    assert claims.delete_claim(run(rows), 1024)[0].verdict == verdict


@pytest.mark.parametrize(("a_peak", "b_peak", "verdicts"), [(4, 3, ["pass", "pass"]), (5, 3, ["fail", "pass"])])
def test_backward_peaks_are_multiples_of_x(a_peak, b_peak, verdicts):
    base = 100 * 2**20  # something else already allocated: the peak is counted from here
    rows = []
    for phase, peak in (("A", a_peak), ("B", b_peak)):
        rows += [
            {"step": f"1. {phase}: reset peak", "allocated_bytes": base, "peak_allocated_bytes": base},
            {"step": f"2. {phase}: x = zeros", "allocated_bytes": base + GIB, "peak_allocated_bytes": base + GIB},
            {
                "step": f"3. {phase}: backward",
                "allocated_bytes": base + 2 * GIB,
                "peak_allocated_bytes": base + peak * GIB,
            },
        ]
    judged = claims.backward_peaks(run(rows))
    assert [c.verdict for c in judged] == verdicts
    assert f"{a_peak:.3f}×" in judged[0].measured


@pytest.mark.parametrize(("estimated", "verdict"), [(104, "pass"), (96, "pass"), (106, "fail")])
def test_planner_within_five_percent(estimated, verdict):
    meta = {"peak_measured_bytes": 100 * 2**20, "peak_estimated_bytes": estimated * 2**20}
    assert claims.planner_agreement(run([], meta), "small").verdict == verdict


def test_adam_four_times_reads_the_largest_model_state_on_the_timeline():
    w = 1000
    rows = [
        {"t_ms": 1.0, "parameters": w, "gradients": 0, "optimizer_state": 2 * w},  # forward: grads freed
        {"t_ms": 2.0, "parameters": w, "gradients": w, "optimizer_state": 2 * w},  # optimizer step: 4 w
    ]
    assert claims.adam_four_times(run(rows, {"peak_phase": "forward"}), "x").verdict == "pass"
    sgd = [{"t_ms": 1.0, "parameters": w, "gradients": w, "optimizer_state": w}]  # momentum: 3 w
    assert claims.adam_four_times(run(sgd, {"peak_phase": "optimizer"}), "x").verdict == "fail"


def test_snapshot_peak_is_the_requested_peak_within_one_percent_and_under_the_blocks():
    truth = {"cuda": True, "requested_peak": 1000 * 2**20, "max_memory_allocated": 1030 * 2**20}
    assert claims.snapshot_peak({"peak_allocated_bytes": 1005 * 2**20}, truth).verdict == "pass"
    assert claims.snapshot_peak({"peak_allocated_bytes": 1020 * 2**20}, truth).verdict == "fail"  # +2%
    over_blocks = truth | {"max_memory_allocated": 1002 * 2**20}  # more than the blocks it took: impossible
    assert claims.snapshot_peak({"peak_allocated_bytes": 1005 * 2**20}, over_blocks).verdict == "fail"
    assert claims.snapshot_peak(None, truth).verdict == "fail"
    assert claims.snapshot_peak(None, {"cuda": False}).verdict == "unsupported"


def test_trace_gpu_time_against_the_benchmark_per_step_figures_times_steps():
    # Two profiled steps per scope: (3.0 + 7.0) ms a step × 2 = 20 ms of GPU activity in the trace, where the
    # import keeps kernels, memcpy and memset apart: 19.0 + 0.8 + 0.5 = 20.3 ms (+1.5%).
    bench = run([], {"profiled_total_ms": {"forward": 3.0, "step": 7.0}, "profile_steps": 2})
    trace = {"kernel_time_us": 19_000.0, "memcpy_time_us": 800.0, "memset_time_us": 500.0}
    assert claims.trace_kernel_time(trace, bench).verdict == "pass"
    assert claims.trace_kernel_time(trace | {"kernel_time_us": 19_700.0}, bench).verdict == "fail"  # +5%
    kernels_only = trace | {"memcpy_time_us": 0.0, "memset_time_us": 0.0}  # 19.0 ms: −5%
    assert claims.trace_kernel_time(kernels_only, bench).verdict == "fail"


def test_health_passes_only_when_healthy_and_names_what_is_below():
    healthy = {"verdict": "healthy", "answer": "Healthy on box", "rows": []}
    assert claims.health(healthy).verdict == "pass"
    row = {"figure": "matmul bf16 burst", "where": "cuda:0", "verdict": "below expected", "reason": "81% of 794.5"}
    below = claims.health({"verdict": "below expected", "answer": "Not healthy", "rows": [row]})
    assert below.verdict == "fail" and "matmul bf16 burst on cuda:0" in below.measured


def test_the_judges_on_the_runs_the_check_recorded_on_an_h200():
    """The shipped reference runs (examples/, recorded by the check on an H200) hold the seed's claims."""
    import json
    from pathlib import Path

    file = Path(__file__).resolve().parents[2] / "examples" / "nvidia-h200-2026-11-26.json"
    runs = json.loads(file.read_text())["runs"]
    assert {r["device"]["name"] for r in runs if r["experiment"] != "health"} == {"NVIDIA H200"}

    def one(experiment: str, **config) -> dict:
        return next(r for r in runs if r["experiment"] == experiment and config.items() <= r["config"].items())

    matmul = one("matmul")
    bf16 = next(r for r in matmul["rows"] if r["dtype"] == "bf16" and r["m"] == 8192)
    assert bf16["tflops"] == pytest.approx(2 * 8192**3 / (bf16["median_ms"] * 1e9))  # the row's own arithmetic
    assert claims.dtypes_measured(matmul).verdict == "pass"
    assert claims.tf32_speedup(matmul, 8192).verdict == "pass"
    lifecycle = one("allocator", scenario="lifecycle", alloc_conf="")
    assert [c.verdict for c in claims.lifecycle_claims(lifecycle, 1024)] == ["pass", "pass"]
    assert claims.delete_claim(one("allocator", scenario="custom"), 1024)[0].verdict == "pass"
    assert [c.verdict for c in claims.backward_peaks(one("allocator", scenario="backward-peak"))] == ["pass", "pass"]
    for model, precision in (("small", "fp32"), ("small", "bf16-autocast"), ("medium", "bf16-autocast")):
        run = one("train-memory", model=model, precision=precision)
        assert claims.planner_agreement(run, model).verdict == "pass"
        assert claims.adam_four_times(run, model).verdict == "pass"


def search_run(ms: float, spent_s: float, published: float | None = 794.5) -> dict:
    """A bounded bf16 search of two shapes as matmul --mamf stores it; the best is 2048×2048×13312 at ``ms``."""
    rows = [
        point("bf16", 2048, 0.1, published_tflops=published, t_start_s=1.0, t_end_s=1.5)
        | {"n": 2048, "k": 2048, "label": "mamf search"},
        {**point("bf16", 2048, ms, published_tflops=published, t_start_s=1.5, t_end_s=2.5), "k": 13312},
    ]
    search = {"started": 2, "grid": 125, "spent_s": spent_s, "budget_s": 30.0, "start_from": "the published best"}
    return run(rows, {"search": {"bf16": search}})


def test_the_bounded_search_must_reach_90_percent_of_the_published_maximum_within_its_budget():
    # 2 · 2048 · 2048 · 13312 FLOP = 111.67 GFLOP; in 0.15 ms: 744.5 TFLOPS = 93.7 % of 794.5
    judged = claims.search_reaches_published(search_run(0.15, 31.0), "bf16")
    assert judged.verdict == "pass" and "744.5 TFLOPS at 2048×2048×13312" in judged.measured
    assert (
        "93.7% of 794.5 published" in judged.measured and "2 of 125 shapes in 31.0 s (budget 30 s)" in judged.measured
    )
    low = claims.search_reaches_published(search_run(0.17, 31.0), "bf16")  # 656.9 TFLOPS = 82.7 %
    assert low.verdict == "fail"
    # spent 34 s: less its last shape's 1 s, 3 s past the 30 s budget, over the 2 s slack
    late = claims.search_reaches_published(search_run(0.15, 34.0), "bf16")
    assert late.verdict == "fail" and "3.0 s past it besides its last shape" in late.measured
    assert claims.search_reaches_published(search_run(0.15, 31.0, None), "bf16").verdict == "info"
    assert claims.search_reaches_published(run([point("bf16", 64, 1.0)]), "bf16").verdict == "fail"  # no search


# --- the step you would really run ---------------------------------------------------------------------------


def bench(stack_ms: dict[str, list[float]], flops: float, busy: float = 0.95, **summary) -> dict:
    """A step-bench run: warm step samples per stack, a summary per stack (bf16 peak 989.4, the given busy)."""
    rows = [
        {"kind": "sample", "stack": s, "series": "warm", "step": i, "phase": "step", "ms": ms}
        for s, times in stack_ms.items()
        for i, ms in enumerate(times)
    ]
    rows += [{"kind": "summary", "stack": s, "peak_tflops": 989.4, "busy": busy} | summary for s in stack_ms]
    return run(rows, {"flops": {"total": flops}, "tokens_per_step": 65_536})


def test_mfu_is_recomputed_from_the_model_flops_and_the_median_step():
    # 4.0e14 FLOP a step in a median of 1,000 ms → 400 TFLOPS, 40.4% of 989.4: over 35%, under 45%
    fine = bench({"modern": [990.0, 1000.0, 1010.0]}, 4.0e14)
    assert claims.step_mfu(fine, "modern", claims.MFU_SMALL_FLOOR, "x").verdict == "pass"
    assert claims.step_mfu(fine, "modern", claims.MFU_LARGE_FLOOR, "x").verdict == "fail"
    idle = bench({"modern": [1000.0] * 3}, 4.0e14, busy=0.85)  # fast enough, but the GPU idled 15%
    assert claims.step_mfu(idle, "modern", claims.MFU_SMALL_FLOOR, "x").verdict == "fail"
    assert "MFU 40.4% of 989.4" in claims.step_mfu(fine, "modern", 0.35, "x").measured


def test_fp8_must_buy_a_fifth_more_tokens():
    bf16 = bench({"modern": [100.0] * 3}, 1e14)
    assert claims.fp8_speedup(bf16, bench({"modern": [80.0] * 3}, 1e14)).verdict == "pass"  # 1.25×
    assert claims.fp8_speedup(bf16, bench({"modern": [90.0] * 3}, 1e14)).verdict == "fail"  # 1.11×
    unsupported = run([], status="unsupported") | {"error": "unsupported on X: torchao is not installed"}
    assert claims.fp8_speedup(bf16, unsupported).verdict == "unsupported"


def _sweep(*rows: dict) -> dict:
    return run([{"kind": "precision", "status": "ok", "reason": None} | r for r in rows])


def test_bf16_over_fp32_and_the_same_configuration_twice():
    sweep = _sweep(
        {"precision": "fp32", "stack": "course", "step_ms_median": 2000.0},
        {"precision": "bf16-autocast", "stack": "course", "step_ms_median": 450.0},  # 4.44×
    )
    assert claims.bf16_over_fp32(sweep).verdict == "pass"
    slow = _sweep(
        {"precision": "fp32", "stack": "course", "step_ms_median": 2000.0},
        {"precision": "bf16-autocast", "stack": "course", "step_ms_median": 600.0},  # 3.33×
    )
    assert claims.bf16_over_fp32(slow).verdict == "fail"
    alone = bench({"course": [100.0, 101.0, 99.0], "modern": [50.0] * 3}, 1e14)
    again = _sweep(
        {"precision": "bf16-autocast", "stack": "course", "step_ms_median": 102.5},  # +2.5%
        {"precision": "bf16-autocast", "stack": "modern", "step_ms_median": 52.0},  # +4.0%
    )
    verdicts = [c.verdict for c in claims.repeatable(alone, again, "bf16-autocast", ("course", "modern"))]
    assert verdicts == ["pass", "fail"]


def test_the_planner_against_the_allocator_s_peak():
    near = bench({"modern": [1.0]}, 1e12, peak_estimated_bytes=41 * GIB, peak_measured_bytes=40 * GIB)  # +2.5%
    far = bench({"modern": [1.0]}, 1e12, peak_estimated_bytes=43 * GIB, peak_measured_bytes=40 * GIB)  # +7.5%
    assert claims.step_planner(near, "modern", "x").verdict == "pass"
    assert claims.step_planner(far, "modern", "x").verdict == "fail"


def test_the_lab_s_findings_on_its_own_steps():
    def with_findings(course: list[dict], modern: list[dict]) -> dict:
        out = bench({"course": [1.0], "modern": [1.0]}, 1e12)
        for row in out["rows"]:
            if row["kind"] == "summary":
                row["trace_findings"] = course if row["stack"] == "course" else modern
        return out

    gaps = {"kind": "host_gap", "cause": "Python", "text": "the GPU waited 40% of the span on the host"}
    unfused = {"kind": "op_pattern", "cause": "attention kernels", "text": "unfused attention: softmax + bmm"}
    group = {"kind": "kernel_group", "cause": "matmul kernels", "text": "matmul kernels 80%"}
    assert claims.own_step_findings(with_findings([gaps], [group])).verdict == "pass"
    assert claims.own_step_findings(with_findings([group], [group])).verdict == "fail"  # names nothing holding back
    assert claims.own_step_findings(with_findings([gaps], [unfused])).verdict == "fail"  # invents attention

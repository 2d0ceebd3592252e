"""step-bench's stacks side by side, MFU as the field counts it, busy %, the steady warm-up and the batch that fills
the card: on the CPU, against hand arithmetic and the profiler's own events."""

from types import SimpleNamespace

import pytest

from core.errors import DoesNotFit
from core.experiment import Context, drive
from core.experiments.step_bench import StepBenchConfig, auto_batch, busy_fraction, run
from core.measure.kernels import HOST_GAP_NAME
from core.result import RunResult
from core.transformer.bench import STEADY_TOLERANCE, STEADY_WINDOW, is_steady
from core.transformer.mfu import HOST_BOUND_WARNING, measured_ceiling, mfu_figures

CPU = Context("cpu", "CPU")
H100 = {
    "kind": "cuda",
    "name": "NVIDIA H100 80GB HBM3",
    "host": "box",
    "uuid": "GPU-1",
    "spec": {"name": "H100 SXM", "tflops": {"fp32": 66.9, "tf32": 494.7, "bf16": 989.4, "fp8": 1978.9}},
}


@pytest.fixture(scope="module")
def course_vs_modern(tmp_path_factory):
    """The course's stack, every switch of today's but compile, and today's whole stack (compiled), timed side by
    side on one shape in one run."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GPULAB_DATA_DIR", str(tmp_path_factory.mktemp("step-bench-stacks")))
        cfg = StepBenchConfig(
            model="tiny",
            batch=2,
            context=32,
            precision="bf16-master",
            stacks=("course", "sdpa+foreach+checkpoint", "modern"),
            warmup_steps=1,
            max_warmup_steps=2,
            timed_steps=2,
            cold_steps=1,
            profile_steps=1,
        )
        return drive(run(cfg, CPU))


def test_every_switch_runs_and_its_choices_are_stored(course_vs_modern):
    out, _ = course_vs_modern
    summaries = {r["stack"]: r for r in out.rows if r["kind"] == "summary"}
    assert list(summaries) == ["course", "sdpa+foreach+checkpoint", "modern"]
    assert {k: summaries["sdpa+foreach+checkpoint"][k] for k in ("attention", "optimizer_impl", "compile")} == {
        "attention": "sdpa",
        "optimizer_impl": "foreach",
        "compile": False,
    }
    assert summaries["sdpa+foreach+checkpoint"]["checkpointing"] is True
    modern = summaries["modern"]
    assert (modern["attention"], modern["optimizer_impl"], modern["compile"]) == ("sdpa", "fused", True)
    # compilation is reported apart: the first step's excess over the median, never inside the timed steps
    assert modern["compile_s"] is not None and modern["compile_s"] > 0
    assert summaries["course"]["compile_s"] is None
    for s in summaries.values():
        assert s["precision"] == "bf16-master" and s["batch"] == 2 and s["context"] == 32
        assert s["tokens_per_step"] == 64 and s["step_ms_count"] == 2
        samples = [r for r in out.rows if r["kind"] == "sample" and r["stack"] == s["stack"]]
        assert sorted(r["ms"] for r in samples if r["series"] == "warm" and r["phase"] == "step")[0] > 0
    assert set(out.meta["stacks"]) == set(summaries) and "scaled_dot_product_attention" in out.meta["stacks"]["modern"]
    assert set(out.meta["traces"]) == set(summaries)


def test_the_cpu_says_why_it_has_no_mfu_and_how_busy_it_was(course_vs_modern):
    out, _ = course_vs_modern
    for s in (r for r in out.rows if r["kind"] == "summary"):
        assert s["mfu"] is None and s["mfu_note"] == "CPU: no datasheet peak, so no MFU"
        assert s["peak_unit"] == "bf16" and s["unit_peak_name"] == "bf16"
        assert 0 < s["busy"] <= 1 and s["host_bound"] == (s["busy"] < 0.8)
    assert out.meta["host_bound_warning"] == HOST_BOUND_WARNING


def test_mfu_is_over_the_bf16_dense_peak_whatever_the_precision():
    # an fp32 step at 40 TFLOPS on an H100: 4.0% of the bf16 dense peak (989.4), 59.8% of the fp32 unit's (66.9)
    fp32 = mfu_figures(40.0, H100, "fp32", None, "the step")
    assert fp32["mfu"] == pytest.approx(40 / 989.4) and fp32["peak_unit"] == "bf16"
    assert fp32["mfu_unit"] == pytest.approx(40 / 66.9) and fp32["unit_peak_name"] == "fp32"
    # a bf16 step at 400: 40.4% on both scales; an fp8 step is judged above its own peak only past fp8's
    bf16 = mfu_figures(400.0, H100, "bf16-autocast", None, "the step")
    assert bf16["mfu"] == bf16["mfu_unit"] == pytest.approx(400 / 989.4)
    fp8 = mfu_figures(1200.0, H100, "fp8", None, "the step")
    assert fp8["mfu"] == pytest.approx(1200 / 989.4) and fp8["above_peak"] is False
    assert fp8["mfu_unit"] == pytest.approx(1200 / 1978.9)


def _matmul_run(run_id: str, device: dict, points: list[tuple[str, float]]) -> RunResult:
    rows = [{"dtype": d, "m": 8192, "n": 8192, "k": 8192, "tflops": t, "status": "ok"} for d, t in points]
    return RunResult(
        experiment="matmul",
        config={},
        device=device,
        versions={},
        started_at=f"2026-11-2{run_id[-1]}T10:00:00",
        finished_at=None,
        status="ok",
        rows=rows,
        id=run_id,
    )


def test_the_measured_ceiling_is_this_device_s_best_bf16_matmul():
    other_gpu = H100 | {"uuid": "GPU-2"}
    runs = [
        _matmul_run("run-1", H100, [("bf16", 700.0), ("fp8", 1300.0), ("fp32", 50.0)]),
        _matmul_run("run-2", H100, [("bf16", 760.5)]),
        _matmul_run("run-3", other_gpu, [("bf16", 800.0)]),  # another GPU: never this one's ceiling
    ]
    store = SimpleNamespace(list=lambda experiment, status, limit: runs if experiment == "matmul" else [])
    ceiling = measured_ceiling(H100, store)
    assert ceiling is not None and (ceiling.tflops, ceiling.run_id) == (760.5, "run-2")
    assert "8192×8192×8192" in ceiling.text and "run-2" in ceiling.text
    figures = mfu_figures(380.25, H100, "bf16-autocast", ceiling, "the step")
    assert figures["mfu_measured"] == pytest.approx(0.5) and figures["measured_ceiling_tflops"] == 760.5
    assert measured_ceiling(H100 | {"host": None}, store) is None  # a device of no known box


class _Event(SimpleNamespace):
    pass


def _ev(name: str, start: float, end: float, device: str = "CPU") -> _Event:
    return _Event(
        name=name,
        device_type=SimpleNamespace(name=device),
        time_range=SimpleNamespace(start=start, end=end),
    )


def test_gpu_busy_is_the_union_of_its_work_over_the_step():
    # one 100 µs step: kernels 10–40 and 30–50 overlap (40 µs together), a copy 70–80, and a kernel that ends
    # after the step (95–130) counts its 5 µs inside it: 55 µs of 100 busy; the kernel before the step counts nothing
    events = [
        _ev("gpulab:scope:step", 0.0, 100.0),
        _ev("k1", 10.0, 40.0, "CUDA"),
        _ev("k2", 30.0, 50.0, "CUDA"),
        _ev("Memcpy HtoD", 70.0, 80.0, "CUDA"),
        _ev("k3", 95.0, 130.0, "CUDA"),
        _ev("k0", -20.0, -5.0, "CUDA"),
    ]
    assert busy_fraction(events, [], cuda=True) == pytest.approx(0.55)


def test_cpu_busy_is_the_time_inside_ops():
    events = [_ev("gpulab:scope:step", 0.0, 100.0)]
    items = [
        ("step", "forward", "aten::mm", 60.0),
        ("step", None, HOST_GAP_NAME, 30.0),
        ("step", "x", "aten::add", 10.0),
    ]
    assert busy_fraction(events, items, cuda=False) == pytest.approx(0.7)


def test_steady_means_two_windows_agree():
    assert STEADY_WINDOW == 3 and STEADY_TOLERANCE == 0.03
    assert not is_steady([10.0] * 5)  # one window and a bit: nothing to compare yet
    assert not is_steady([30.0, 20.0, 10.0, 10.0, 10.2, 10.1])  # windows' medians 20 and 10.1: still settling
    assert is_steady([30.0, 20.0, 10.0, 10.0, 10.2, 10.1, 10.0, 10.1, 10.2])  # 10.1 and 10.1 (the last two)
    assert is_steady([12.0, 10.0, 10.1, 10.2, 10.0, 10.3])  # medians 10.1 and 10.2: 1% apart
    assert not is_steady([10.0, 10.0, 10.0, 11.0, 11.0, 11.0])  # 10% apart


def test_auto_batch_fills_a_gpu_and_keeps_the_course_s_on_a_cpu(monkeypatch):
    from core.hardware import memory
    from core.transformer.planner import need_bytes

    cfg = StepBenchConfig(model="gpt2-124m", context=1024, stacks=("course", "modern"), precision="bf16-autocast")
    assert auto_batch(cfg, cfg.model, ["bf16-autocast"], CPU)[0] == 4
    limit = 80 * 2**30
    monkeypatch.setattr(memory, "budget", lambda device: memory.Budget(limit, "80 GiB free (test)"))
    batch, rule = auto_batch(cfg, cfg.model, ["bf16-autocast"], Context("cuda:0", "GPU"))
    # the largest batch whose every stack fits, and not one more
    needs = [need_bytes(cfg.setup(cfg.model, "bf16-autocast", s, b, "cuda")) for s in cfg.stack_list for b in (batch,)]
    more = [need_bytes(cfg.setup(cfg.model, "bf16-autocast", s, batch + 1, "cuda")) for s in cfg.stack_list]
    assert max(needs) <= limit < max(more) and batch > 4
    assert "largest the planner says fits" in rule


def test_a_step_too_large_is_refused_with_the_planner_s_figures(tmp_path, monkeypatch):
    monkeypatch.setenv("GPULAB_DATA_DIR", str(tmp_path))
    cfg = StepBenchConfig(model="10B", batch=64, context=2048, stacks=("course", "modern"), profile_steps=0)
    with pytest.raises(DoesNotFit, match=r"a fp32 training step of 10B \(batch 64, context 2048, stack course\)"):
        drive(run(cfg, CPU))


def test_the_cli_says_the_answer_before_any_table(capsys):
    """The stacks' times in words first, the host-bound warning where it holds, then the summary table; the raw
    samples only counted (--json keeps them)."""
    from core.cli.output import print_run
    from tests.factories import make_run

    summary = {
        "kind": "summary",
        "stack": "course",
        "precision": "bf16-autocast",
        "step_ms_median": 59.0,
        "tokens_per_s": 69_424.0,
        "mfu": 0.054,
        "peak_tflops": 989.4,
        "busy": 0.48,
        "host_bound": True,
    }
    samples = [
        {"kind": "sample", "stack": "course", "series": "warm", "step": i, "phase": "step", "ms": 59.0}
        for i in range(30)
    ]
    run = make_run("step-bench", [*samples, summary], {"host_bound_warning": HOST_BOUND_WARNING})
    print_run(run, as_json=False)
    out = capsys.readouterr().out.splitlines()
    assert out[1] == (
        "bf16-autocast · course: 59.00 ms a step, 69,424 tokens/s, MFU 5.4% of the bf16 dense peak (989.4 TFLOPS); "
        "device busy 48%"
    )
    assert out[2].startswith("host-bound — these times compare launch overhead") and out[2].endswith("course)")
    assert out.index("summary:") > 2 and "30 more rows (raw samples): --json has them all" in out


def test_the_step_s_own_trace_is_read_as_an_imported_one():
    """The lab reads its own profiled step with the analysis a user's trace gets: on a real GPU trace (the V100
    ResNet-50 step of tests/data, recorded elsewhere) the same findings and busy share the trace import stores."""
    from pathlib import Path

    from core.experiments.step_bench import OWN_TRACE_FINDINGS, own_trace_findings
    from core.workload.trace.analysis import analyse
    from core.workload.trace.timeline import read_trace

    path = Path(__file__).parents[2] / "data" / "workload" / "hta_v100_step1012_trimmed.json.gz"
    own = own_trace_findings(str(path))
    _, meta = analyse(read_trace(str(path)), 10)
    texts = [f["text"] for f in own["trace_findings"]]
    assert texts == [f["text"] for f in meta["findings"][:OWN_TRACE_FINDINGS]] and texts
    assert [f["kind"] for f in own["trace_findings"]] == [f["kind"] for f in meta["findings"][:OWN_TRACE_FINDINGS]]
    assert own["trace_busy"] == pytest.approx(meta["busy_us"] / meta["span_us"])
    summary = {"kind": "summary", "stack": "course", "precision": "bf16-autocast", "step_ms_median": 1.0}
    summary |= {"tokens_per_s": 1.0, "mfu": None, "trace_findings": own["trace_findings"]}
    from core.experiments.step_bench import answer_lines

    lines = answer_lines([summary], {})
    assert lines[1] == f"  its trace, read as an imported one: {texts[0]}"

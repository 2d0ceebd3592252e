"""The reference timer: do_bench where it works, CUDA events after an L2 flush where it does not (named, with
the reason), torch.utils.benchmark on a CPU; the fallback simulated on CPU, and timed for real on a GPU."""

import statistics
import sys
import time

import pytest
import torch

from core import doctor
from core.experiment import Context, drive
from core.experiments import reference
from core.experiments.reference import CUDA_EVENTS, DO_BENCH, TORCH_BENCHMARK, ReferenceConfig, ReferenceTimer
from core.result import RunResult

CPU = Context(device="cpu", device_name="test CPU")
# What triton prints when its C stub cannot be built (a box without gcc or Python.h), many lines long.
COMPILE_ERROR = "failed to compile cuda_utils.c\n/usr/include/python3.11/Python.h: No such file or directory\n..."


class Bench:
    """A stand-in for ``do_bench``: answers ``ms`` or raises ``error``, and counts its calls."""

    def __init__(self, ms: float = 1.0, error: Exception | None = None):
        self.ms, self.error, self.calls = ms, error, []

    def __call__(self, op, **kwargs):
        self.calls.append(kwargs)
        if self.error is not None:
            raise self.error
        op()
        return self.ms


@pytest.fixture
def events_on_cpu(monkeypatch):
    """``cuda_event_ms`` replaced by a perf_counter median on the CPU (no CUDA here); records its calls."""
    calls = []

    def fake(op, device, warmup_ms=25.0, rep_ms=100.0):
        calls.append(device)
        samples = []
        for _ in range(5):
            t0 = time.perf_counter()
            op()
            samples.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(samples)

    monkeypatch.setattr(reference, "cuda_event_ms", fake)
    return calls


def test_a_do_bench_that_raises_falls_back_to_cuda_events_and_says_why(monkeypatch, events_on_cpu):
    bench = Bench(error=RuntimeError(COMPILE_ERROR))
    monkeypatch.setattr(reference, "_triton_bench", lambda: bench)
    timer = ReferenceTimer("cuda:1")
    assert timer.fallback_reason is None  # importable: do_bench is tried first
    ms, tool = timer(lambda: None)
    assert tool == CUDA_EVENTS and ms >= 0
    assert events_on_cpu == ["cuda:1"]  # on the run's own device
    assert timer.fallback_reason == "do_bench raised RuntimeError: failed to compile cuda_utils.c"  # first line only
    assert timer(lambda: None)[1] == CUDA_EVENTS
    assert len(bench.calls) == 1  # a failed do_bench is not retried (each try compiles again)


def test_without_triton_the_gpu_reference_is_cuda_events_and_the_import_error_is_the_reason(monkeypatch, events_on_cpu):
    monkeypatch.setitem(sys.modules, "triton", None)  # import triton → ModuleNotFoundError
    assert reference._triton_bench() is None
    timer = ReferenceTimer("cuda:0")
    assert timer(lambda: None)[1] == CUDA_EVENTS
    assert timer.fallback_reason is not None
    assert timer.fallback_reason.startswith("triton.testing is not importable: ModuleNotFoundError: ")


def test_a_working_do_bench_is_used_with_its_median_and_no_reason(monkeypatch, events_on_cpu):
    bench = Bench(ms=1.25)
    monkeypatch.setattr(reference, "_triton_bench", lambda: bench)
    timer = ReferenceTimer("cuda:0")
    assert timer(lambda: None) == (1.25, DO_BENCH)
    assert bench.calls == [{"warmup": 25, "rep": 100, "return_mode": "median"}]
    assert timer.fallback_reason is None and events_on_cpu == []


def test_the_cpu_reference_is_torch_utils_benchmark_and_never_asks_for_triton(monkeypatch):
    def refuse():
        raise AssertionError("do_bench looked up for a CPU run")

    monkeypatch.setattr(reference, "_triton_bench", refuse)
    a = torch.randn(64, 64)
    ms, tool = ReferenceTimer("cpu", min_run_time_s=0.05)(lambda: a @ a)
    assert tool == TORCH_BENCHMARK and ms > 0
    monkeypatch.undo()  # the run's meta says whether triton is importable, for the bundle
    out, _ = drive(reference.run(ReferenceConfig(size=64, rounds=1, rep_ms=10.0, min_run_time_s=0.05), CPU))
    assert out.meta["tool"] == TORCH_BENCHMARK and out.meta["reference_fallback_reason"] is None


def test_the_run_stores_the_fallback_and_its_reason_and_the_doctor_names_it(monkeypatch, events_on_cpu):
    """The whole run (lab timer on this CPU) with the reference taking the GPU path and do_bench failing."""
    bench = Bench(error=RuntimeError(COMPILE_ERROR))
    monkeypatch.setattr(reference, "_triton_bench", lambda: bench)

    class OnTheGpuPath(ReferenceTimer):
        def __init__(self, device, min_run_time_s=0.2):
            super().__init__("cuda:0", min_run_time_s)

    monkeypatch.setattr(reference, "ReferenceTimer", OnTheGpuPath)
    out, progress = drive(reference.run(ReferenceConfig(size=64, rounds=2, rep_ms=10.0), CPU))
    reason = "do_bench raised RuntimeError: failed to compile cuda_utils.c"
    assert [r["tool"] for r in out.rows] == [CUDA_EVENTS, CUDA_EVENTS]
    assert out.meta["tool"] == CUDA_EVENTS and out.meta["reference_fallback_reason"] == reason
    assert len(bench.calls) == 1 and len(events_on_cpu) == 2
    assert CUDA_EVENTS in progress[0].message

    run = RunResult("reference", {}, {"kind": "cuda", "name": "GPU"}, {}, "", "", "ok", rows=out.rows, meta=out.meta)
    check = doctor.timer_agreement(run, cuda=True)
    assert check.check == f"matmul timer vs {CUDA_EVENTS}"
    assert check.expected == "lab / reference median 0.9–1.1"  # it flushes L2 as do_bench does
    assert check.result.endswith(f"; do_bench not used: {reason}")


def test_a_do_bench_that_fails_after_a_round_names_both_tools(monkeypatch, events_on_cpu):
    bench = Bench(ms=1.0)
    monkeypatch.setattr(reference, "_triton_bench", lambda: bench)

    class OnTheGpuPath(ReferenceTimer):
        def __init__(self, device, min_run_time_s=0.2):
            super().__init__("cuda:0", min_run_time_s)

        def __call__(self, op):
            if bench.calls:
                bench.error = RuntimeError("CUDA driver lost")
            return super().__call__(op)

    monkeypatch.setattr(reference, "ReferenceTimer", OnTheGpuPath)
    out, _ = drive(reference.run(ReferenceConfig(size=64, rounds=3, rep_ms=10.0), CPU))
    assert [r["tool"] for r in out.rows] == [DO_BENCH, CUDA_EVENTS, CUDA_EVENTS]
    assert out.meta["tool"] == f"{DO_BENCH} + {CUDA_EVENTS}"
    assert out.meta["reference_fallback_reason"] == "do_bench raised RuntimeError: CUDA driver lost"


# --- on a GPU: the fallback itself, against expectations that do not come from it -------------------------


@pytest.mark.gpu
def test_cuda_event_timer_measures_a_known_sleep():
    """``torch.cuda._sleep(cycles)`` spins ``cycles`` SM clocks: at the card's highest clock (``clock_rate``,
    kHz = cycles per ms) 20 ms of cycles take at least 20 ms, and the host's clock around a synchronised
    call (launch and sync included, so a little longer) says how long they really took."""
    device = "cuda:0"
    cycles_per_ms = torch.cuda.get_device_properties(device).clock_rate  # kHz
    cycles = 20 * cycles_per_ms

    def op():
        torch.cuda._sleep(cycles)

    with torch.cuda.device(device):
        walls = []
        for _ in range(5):
            torch.cuda.synchronize(device)
            t0 = time.perf_counter()
            op()
            torch.cuda.synchronize(device)
            walls.append((time.perf_counter() - t0) * 1e3)
    wall = statistics.median(walls)
    ms = reference.cuda_event_ms(op, device, warmup_ms=50.0, rep_ms=300.0)
    assert ms >= 0.97 * 20, (ms, wall)
    assert 0.9 * wall <= ms <= 1.01 * wall, (ms, wall)


@pytest.mark.gpu
def test_cuda_event_timer_agrees_with_the_lab_timer_on_a_matmul(monkeypatch):
    """The fallback against the lab's own timer (``measure_point``) on a bf16 4096³ matmul, both flushing L2:
    within the doctor's tolerance for a flushing tool. Reached through ReferenceTimer with do_bench failing."""
    from core.experiments import matmul
    from core.hardware.device import describe
    from core.measure import gemm

    device = "cuda:0"
    ctx = Context(device=device, device_name=torch.cuda.get_device_name(device))
    desc = describe(device)
    shape = gemm.Shape(4096, 4096, 4096, label="reference")
    cfg = matmul.MatmulConfig(dtypes=("bf16",), sizes=(4096,), accuracy=False, roofline=False)
    gen = torch.Generator(device).manual_seed(0)
    flush, _ = gemm.flush_for(device, desc, cfg.flush)
    gemm.warm_up(device, cfg.gpu_warmup_s)
    ops = gemm.make_operands("bf16", shape, device, gen)
    monkeypatch.setattr(reference, "_triton_bench", lambda: Bench(error=RuntimeError(COMPILE_ERROR)))
    timer = ReferenceTimer(device)
    labs, refs = [], []
    for _ in range(3):
        labs.append(matmul.measure_point("bf16", shape, ctx, cfg, flush, gen, time.perf_counter())["median_ms"])
        ms, tool = timer(ops.op)
        assert tool == CUDA_EVENTS
        refs.append(ms)
    ratio = statistics.median(labs) / statistics.median(refs)
    lo, hi = doctor.timer_tolerance(CUDA_EVENTS, cuda=True)
    assert lo <= ratio <= hi, (labs, refs)


def test_the_lab_side_times_with_the_matmul_experiments_defaults():
    """The reference compares the lab's timer as a default matmul run uses it: same plan, same GPU warm-up."""
    from core.experiments.matmul import MatmulConfig
    from core.measure import gemm
    from core.measure.timing import TimingPlan

    assert MatmulConfig(rep_ms=123.0).plan == TimingPlan(rep_ms=123.0)
    assert MatmulConfig().gpu_warmup_s == gemm.GPU_WARMUP_S and MatmulConfig().flush

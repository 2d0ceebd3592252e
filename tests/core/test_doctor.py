"""The doctor: its checks on fabricated runs (verdicts derived by hand), its exit code, and a real CPU run (CI)."""

import json
import subprocess
import sys
import time

import pytest

from core import doctor
from core.doctor import Check, Report
from core.result import RunResult
from tests.conftest import ROOT

MIB = 2**20
GPU = {"kind": "cuda", "name": "NVIDIA H100 80GB HBM3", "label": "cuda:0 — NVIDIA H100 80GB HBM3"}
CPU = {"kind": "cpu", "name": "Test CPU", "label": "CPU — Test CPU"}


def run_of(experiment, rows=(), meta=None, status="ok", error=None, device=GPU):
    return RunResult(
        experiment,
        {},
        device,
        {"torch": "2.13.0", "cuda": "12.8"},
        "2026-01-01T00:00:00+00:00",
        "2026-01-01T00:00:01+00:00",
        status,
        error=error,
        rows=list(rows),
        meta=meta or {},
    )


def test_fp16_overflow_is_checked_against_the_seed():
    assert (
        doctor.fp16_overflow(run_of("formats", [{"format": "fp16", "stored": "inf", "status": "overflow"}])).verdict
        == "pass"
    )
    wrong = doctor.fp16_overflow(run_of("formats", [{"format": "fp16", "stored": 65504.0, "status": "rounded"}]))
    assert wrong.verdict == "fail" and "65504.0" in wrong.result


@pytest.fixture
def idle_now(monkeypatch):
    """The machine the checks are made on reads idle (the load is a seam, not this machine's real load)."""
    monkeypatch.setattr(doctor, "current_load", lambda: (0.1, 2))


def reference_run(rounds, load_at_end=0.2, cores=2):
    """A CPU ``reference`` run with per-round medians (lab ms, reference ms)."""
    rows = [
        {"dtype": "fp32", "m": 256, "lab_median_ms": lab, "reference_median_ms": ref, "tool": "torch.utils.benchmark"}
        for lab, ref in rounds
    ]
    lab_ms = sorted(r[0] for r in rounds)[len(rounds) // 2]
    ref_ms = sorted(r[1] for r in rounds)[len(rounds) // 2]
    meta = {
        "tool": "torch.utils.benchmark",
        "lab_median_ms": lab_ms,
        "reference_median_ms": ref_ms,
        "ratio": lab_ms / ref_ms,
        "cpu_load_1min": load_at_end,
        "cpu_cores": cores,
    }
    return run_of("reference", rows, meta, device=CPU)


def test_a_second_doctor_running_now_makes_the_timer_check_inconclusive_not_fail(monkeypatch):
    # The issue: two doctors at once, timer ratio 69, FAIL. The reference's own load reading (0.2, taken as
    # it ended) missed the other doctor; the load when the checks are made does not.
    run = reference_run([(69.0, 1.0), (70.0, 1.0), (68.0, 1.0)], load_at_end=0.2)
    monkeypatch.setattr(doctor, "current_load", lambda: (3.9, 2))
    check = doctor.timer_agreement(run, cuda=False)
    assert check.verdict == "unsupported"
    assert check.result.startswith("inconclusive: machine busy (1-minute load 3.9 on 2 cores)")
    assert "ratio 69.00" in check.result
    monkeypatch.setattr(doctor, "current_load", lambda: (0.1, 2))
    assert doctor.timer_agreement(run, cuda=False).verdict == "fail"  # the same ratio on an idle machine fails


def test_rounds_that_disagree_say_the_machine_was_busy(idle_now):
    run = reference_run([(1.0, 1.0), (69.0, 1.0), (3.0, 1.0)])
    check = doctor.timer_agreement(run, cuda=False)
    assert check.verdict == "unsupported"
    assert "inconclusive: machine busy (the rounds' lab/reference ratios range 1.00–69.00)" in check.result
    steady = doctor.timer_agreement(reference_run([(3.0, 1.0), (3.1, 1.0), (2.9, 1.0)]), cuda=False)
    assert steady.verdict == "fail"  # steady rounds with a wrong ratio: the timer is wrong, whatever the load


def test_a_gpu_timer_check_is_never_excused_by_the_cpu_load(monkeypatch):
    monkeypatch.setattr(doctor, "current_load", lambda: (9.0, 2))
    run = run_of(
        "reference",
        [{"dtype": "bf16", "m": 4096}],
        {"tool": "triton.testing.do_bench", "lab_median_ms": 1.2, "reference_median_ms": 1.0, "ratio": 1.2},
    )
    assert doctor.timer_agreement(run, cuda=True).verdict == "fail"


def test_on_a_busy_machine_the_reference_job_runs_through_the_cli_and_the_check_never_fails(busy_machine):
    out = subprocess.run(
        [sys.executable, "-m", "core", "reference", "--device", "cpu", "--size", "256", "--rounds", "3", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    run = RunResult.from_dict(json.loads(out.stdout))
    assert run.status == "ok" and len(run.rows) == 3
    check = doctor.timer_agreement(run, cuda=False)
    assert check.verdict in ("pass", "unsupported"), check
    if check.verdict == "unsupported":
        assert check.result.startswith("inconclusive: machine busy (")


@pytest.mark.parametrize(
    "lab, ref, cuda, tool, load, verdict",
    [
        (1.00, 1.05, True, "triton.testing.do_bench", None, "pass"),  # 0.95: within 0.9–1.1 on a GPU
        (1.20, 1.00, True, "triton.testing.do_bench", None, "fail"),  # 1.2: a GPU timer that far off is wrong
        (1.20, 1.00, True, "torch.utils.benchmark", None, "pass"),  # no flush in the reference: 0.8–1.25
        (1.05, 1.00, True, "torch.cuda.Event, L2 flushed", None, "pass"),  # do_bench's fallback flushes: 0.9–1.1
        (1.20, 1.00, True, "torch.cuda.Event, L2 flushed", None, "fail"),
        (3.00, 1.00, False, "torch.utils.benchmark", 0.5, "fail"),  # 3.0 on an idle CPU: beyond 0.5–2
        (3.00, 1.00, False, "torch.utils.benchmark", 5.0, "unsupported"),  # load 5 on 2 cores: cannot be compared
        (1.50, 1.00, False, "torch.utils.benchmark", 5.0, "pass"),
    ],
)
def test_timer_agreement_by_hand(lab, ref, cuda, tool, load, verdict, idle_now):
    run = run_of(
        "reference",
        [{"dtype": "bf16", "m": 4096}],
        {
            "tool": tool,
            "lab_median_ms": lab,
            "reference_median_ms": ref,
            "ratio": lab / ref,
            "cpu_load_1min": load,
            "cpu_cores": 2,
        },
    )
    check = doctor.timer_agreement(run, cuda)
    assert check.verdict == verdict
    assert f"ratio {lab / ref:.2f}" in check.result
    if verdict == "unsupported":
        assert check.reason.startswith("inconclusive: machine busy (1-minute load 5.0 on 2 cores)")
        assert check.result.startswith("inconclusive: machine busy (1-minute load 5.0 on 2 cores)")


@pytest.mark.parametrize(
    "tool, cuda, expected",
    [
        ("triton.testing.do_bench", True, doctor.GPU_TIMER_RATIO),
        ("torch.cuda.Event, L2 flushed", True, doctor.GPU_TIMER_RATIO),  # the fallback flushes L2 too
        ("triton.testing.do_bench + torch.cuda.Event, L2 flushed", True, doctor.GPU_TIMER_RATIO),  # both flush
        ("torch.utils.benchmark", True, doctor.GPU_TIMER_RATIO_NO_FLUSH),
        ("triton.testing.do_bench + torch.utils.benchmark", True, doctor.GPU_TIMER_RATIO_NO_FLUSH),
        ("a tool nobody knows", True, doctor.GPU_TIMER_RATIO_NO_FLUSH),
        ("torch.utils.benchmark", False, doctor.CPU_TIMER_RATIO),
    ],
)
def test_the_timer_tolerance_follows_the_tool_the_reference_used(tool, cuda, expected):
    assert doctor.timer_tolerance(tool, cuda) == expected
    run = run_of(
        "reference",
        [{"dtype": "bf16", "m": 4096}],
        {"tool": tool, "lab_median_ms": 1.0, "reference_median_ms": 1.0, "ratio": 1.0},
    )
    check = doctor.timer_agreement(run, cuda)
    assert check.check == f"matmul timer vs {tool}"
    assert check.expected == f"lab / reference median {expected[0]:g}–{expected[1]:g}"


def test_the_tool_names_the_doctor_knows_are_the_reference_experiments():
    from core.experiments import reference

    assert reference.FLUSHING_TOOLS == {"triton.testing.do_bench", "torch.cuda.Event, L2 flushed"}
    assert reference.TORCH_BENCHMARK == "torch.utils.benchmark"


def test_the_timer_check_says_why_do_bench_was_not_used(idle_now):
    reason = "do_bench raised RuntimeError: failed to compile cuda_utils.c"
    meta = {"lab_median_ms": 1.0, "reference_median_ms": 1.0, "ratio": 1.0}
    fallback = {"tool": "torch.cuda.Event, L2 flushed", "reference_fallback_reason": reason}
    check = doctor.timer_agreement(run_of("reference", [{"dtype": "bf16", "m": 4096}], meta | fallback), True)
    assert check.verdict == "pass" and check.result.endswith(f"; do_bench not used: {reason}")
    plain = {"tool": "triton.testing.do_bench", "reference_fallback_reason": None}
    check = doctor.timer_agreement(run_of("reference", [{"dtype": "bf16", "m": 4096}], meta | plain), True)
    assert "do_bench not used" not in check.result


def test_trace_peak_replays_the_history_by_hand():
    # alloc 64, alloc 32 (96 live), free 64 (32), alloc 16 (48): the replayed peak is 96 MiB
    trace = [
        [1, "alloc", 64 * MIB],
        [2, "alloc", 32 * MIB],
        [3, "free_requested", 64 * MIB],
        [4, "free_completed", 64 * MIB],
        [5, "alloc", 16 * MIB],
        [6, "segment_alloc", 128 * MIB],
    ]
    assert doctor.replay_peak(trace) == 96 * MIB
    rows = [
        {"trace": trace[:2], "peak_allocated_bytes": 96 * MIB},
        {"trace": trace[2:], "peak_allocated_bytes": 96 * MIB},
    ]
    assert doctor.trace_peak(run_of("allocator", rows), cuda=True).verdict == "pass"
    rows[1]["peak_allocated_bytes"] = 120 * MIB  # the counter saw more than the history: they disagree
    assert doctor.trace_peak(run_of("allocator", rows), cuda=True).verdict == "fail"
    cpu = doctor.trace_peak(run_of("allocator", rows, device=CPU), cuda=False)
    assert cpu.verdict == "unsupported" and "no caching allocator" in cpu.reason


def test_planner_and_backward_peak_checks_by_hand():
    def memory(estimate, measured):  # error = (estimate − measured) / measured
        return run_of(
            "train-memory",
            meta={
                "peak_estimated_bytes": estimate,
                "peak_measured_bytes": measured,
                "error_pct": 100 * (estimate - measured) / measured,
            },
        )

    assert doctor.planner_vs_measured(memory(109, 100)).verdict == "pass"  # +9 %
    assert doctor.planner_vs_measured(memory(89, 100)).verdict == "fail"  # −11 %
    forms = {
        "backward_peak": [
            {"form": "y = 5*x; y.mean().backward()", "peak_over_x": 4.01},
            {"form": "(5*x).mean().backward()", "peak_over_x": 3.5},
        ]
    }
    four, three = doctor.backward_peaks(run_of("allocator", meta=forms), cuda=True)
    assert (four.verdict, three.verdict) == ("pass", "fail")
    refused = run_of(
        "allocator", status="unsupported", error="unsupported on Test CPU: no caching allocator", device=CPU
    )
    assert [c.verdict for c in doctor.backward_peaks(refused, cuda=False)] == ["unsupported"] * 2


def test_a_failed_experiment_fails_its_checks_and_an_unsupported_one_gives_its_reason():
    assert doctor.runs_check("matmul", run_of("matmul", status="error", error="boom")).verdict == "fail"
    skipped = doctor.runs_check("max batch", run_of("max-batch", status="unsupported", error="no limit on a CPU"))
    assert skipped.verdict == "unsupported" and skipped.reason == "no limit on a CPU"
    crashed = doctor.planner_vs_measured(run_of("train-memory", status="error", error="worker killed"))
    assert crashed.verdict == "fail" and crashed.reason == "worker killed"
    above = run_of("matmul", meta={"measurement_errors": ["measurement error: above the datasheet peak: …"]})
    assert doctor.no_throughput_above_peak([above]).verdict == "fail"


def test_the_cli_exits_1_when_a_check_fails(monkeypatch, capsys, tmp_path):
    from core import cli

    report = Report(
        device="cpu",
        checks=[Check("one", "ok", "ok", "pass"), Check("two", "3.0×", "4×", "fail", "off")],
        runs=[run_of("probe")],
    )
    monkeypatch.setattr(doctor, "run_doctor", lambda *a, **k: report)
    bundle = tmp_path / "bundle.json"
    assert cli.main(["doctor", "--device", "cpu", "--no-save", "-o", str(bundle)]) == 1
    out = capsys.readouterr().out
    assert "two" in out and "fail" in out and "↳ off" in out
    saved = json.loads(bundle.read_text())
    assert saved["summary"] == {"pass": 1, "fail": 1, "unsupported": 0}
    report.checks.pop()
    assert cli.main(["doctor", "--device", "cpu", "--no-save", "--json"]) == 0


def test_an_unwritable_bundle_path_exits_2_before_any_check(monkeypatch, capsys, tmp_path):
    from core import cli

    ran = []
    monkeypatch.setattr(doctor, "run_doctor", lambda *a, **k: ran.append(1))
    assert cli.main(["doctor", "--device", "cpu", "--no-save", "-o", str(tmp_path / "no" / "b.json")]) == 2
    assert "cannot write" in capsys.readouterr().err and not ran


def test_doctor_on_the_cpu_passes_every_check_or_says_why(tmp_path):
    """What CI runs: every verdict pass, or unsupported with its reason (its time is not judged: a CPU's wall
    clock moves with whatever else the machine runs)."""
    bundle_path = tmp_path / "bundle.json"
    out = subprocess.run(
        [sys.executable, "-m", "core", "doctor", "--device", "cpu", "--json", "-o", str(bundle_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    bundle = json.loads(out.stdout)
    assert bundle == json.loads(bundle_path.read_text())
    for check in bundle["checks"]:
        assert check["verdict"] in ("pass", "unsupported"), check
        if check["verdict"] == "unsupported":
            assert len(check["reason"]) > 20, check  # a reason a user can act on
    assert bundle["device"]["kind"] == "cpu" and bundle["versions"]["torch"] and "driver" in bundle["versions"]
    assert len(bundle["runs"]) == len(doctor.PLAN)
    assert {r["experiment"] for r in bundle["runs"]} >= {
        "matmul",
        "reference",
        "allocator",
        "train-memory",
        "step-bench",
        "estimate",
        "formats",
    }


@pytest.mark.gpu
def test_doctor_on_a_gpu_passes_every_check_within_three_minutes(tmp_path):
    t0 = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-m", "core", "doctor", "--device", "cuda:0", "--json", "--no-save"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    wall = time.monotonic() - t0
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    checks = {c["check"]: c for c in json.loads(out.stdout)["checks"]}
    # on a GPU the seed's backward peaks, the allocator's two views of its peak and the timer are measured
    for name in (
        "seed: backward peak of y = 5*x; y.mean().backward()",
        "seed: backward peak of (5*x).mean().backward()",
        "allocator: max_memory_allocated vs its own event history",
    ):
        assert checks[name]["verdict"] == "pass", checks[name]
    assert wall < 180, f"the doctor took {wall:.1f} s"

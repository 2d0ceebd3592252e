"""The doctor: does everything work on this device? One command, one table, one bundle for a bug report.

It runs every experiment at its smallest useful setting on the device through the normal job path
(:class:`~core.jobs.JobManager`, a worker process per device, stored like any run), then checks what
came back against references that do not come from the lab's own code path, measured in the same run:

- the lab's matmul median against ``torch.utils.benchmark`` (CPU) or ``triton.testing.do_bench`` (GPU;
  where do_bench cannot be imported or run, CUDA events after an L2 flush, the reason said) timing the
  same operands (the hidden ``reference`` experiment);
- the allocator's ``max_memory_allocated`` against the peak replayed from its own event history;
- the planner's estimate against the measured peak of the smallest preset's training step;
- the seed's facts: 65536 is inf in fp16; the backward peak of ``y = 5*x; y.mean().backward()`` is 4×
  size(x) and of ``(5*x).mean().backward()`` 3× on a GPU (the CPU has no caching allocator to ask);
- no throughput above the datasheet peak.

Each check is pass, fail, or unsupported with the reason; a CPU timing comparison made on a busy machine
(its load, or its own samples' spread) says "inconclusive: machine busy (…)" with what it saw, never fail. This module imports no torch: the dashboard
runs it in a thread of the server process and every measurement happens in a worker.
"""

from __future__ import annotations

import math
import os
import platform
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from core import __version__
from core.experiments.reference import DO_BENCH, FLUSHING_TOOLS, TORCH_BENCHMARK
from core.result import RunResult, now_iso
from core.rows.formats import values_of
from core.rows.train_memory import TrainMemorySummary
from core.units import bytes_text, count_text, duration_text

BUNDLE_FORMAT = "gpulab-doctor"
# Agreement the checks accept. A shared CPU's timings are noisy (both tools see the same waits), a GPU's
# are not; the planner claims 10 % (tests/core/experiments/test_train_memory.py); the allocator's two
# views of one peak must agree exactly but for rounding.
CPU_TIMER_RATIO = (0.5, 2.0)
GPU_TIMER_RATIO = (0.9, 1.1)  # against a tool that flushes L2 before each call as the lab does (FLUSHING_TOOLS)
# Any other tool: a run stored when the GPU fallback was torch.utils.benchmark (back to back: inputs may stay in L2).
GPU_TIMER_RATIO_NO_FLUSH = (0.8, 1.25)
# A CPU timing check cannot decide on a busy machine: other processes' waits land in both timers unevenly.
# Busy: a 1-minute load of at least this many runnable processes per core (when the reference ran, or now,
# while the checks are made: a second doctor raises it within seconds), or rounds whose lab/reference ratios
# differ by more than this factor (the samples themselves say the machine changed under them).
BUSY_LOAD_PER_CORE = 0.75
BUSY_ROUND_SPREAD = 2.0
PLANNER_ERROR_PCT = 10.0
TRACE_PEAK_TOLERANCE = 0.01
BACKWARD_TOLERANCE = 0.05
VERDICTS = ("pass", "fail", "unsupported")


@dataclass
class Check:
    check: str
    result: str
    expected: str
    verdict: str  # pass | fail | unsupported
    reason: str = ""  # why unsupported, or what failed

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict {self.verdict!r} is not one of {VERDICTS}")


@dataclass(frozen=True)
class Step:
    """One job of the doctor's plan: a label, the experiment and its smallest useful config per device kind
    (None: the step does not apply there)."""

    label: str
    experiment: str
    cpu: dict | None
    gpu: dict | None


PLAN: tuple[Step, ...] = (
    Step("worker round trip", "probe", {"steps": 1}, {"steps": 1}),
    Step(
        "number formats (65536)",
        "formats",
        {"value": 65536.0, "spacing_points": 16},
        {"value": 65536.0, "spacing_points": 16},
    ),
    Step("accumulation", "accumulate", {"steps": 200, "curve_points": 20}, {"steps": 200, "curve_points": 20}),
    Step("autocast dtype map", "autocast", {"models": ["toy"]}, {"models": ["toy"]}),
    Step("matmul rounding", "rounding", {"size": 64}, {"size": 1024}),
    Step("quantization", "quantize", {"size": 2000, "bins": 20}, {"size": 2000, "bins": 20}),
    Step(
        "matmul throughput",
        "matmul",
        {"dtypes": ["fp32"], "sizes": [512], "warmup_ms": 20.0, "rep_ms": 150.0, "roofline": False},
        {"dtypes": ["bf16"], "sizes": [4096], "gpu_warmup_s": 0.5, "roofline": False},
    ),
    Step(
        "matmul timer vs reference",
        "reference",
        {"dtype": "fp32", "size": 256, "rounds": 3},
        {"dtype": "bf16", "size": 4096, "rounds": 3},
    ),
    Step(
        "allocator lifecycle",
        "allocator",
        {"scenario": "lifecycle", "size_mib": 16},
        {"scenario": "lifecycle", "size_mib": 64, "history_entries": 10_000},
    ),
    Step(
        "allocator backward peak",
        "allocator",
        {"scenario": "backward-peak", "size_mib": 16},
        {"scenario": "backward-peak", "size_mib": 64},
    ),
    Step(
        "training memory",
        "train-memory",
        {"model": "tiny", "batch": 2, "context": 64},
        {"model": "tiny", "batch": 2, "context": 64},
    ),
    Step(
        "memory planner",
        "estimate",
        {"model": "tiny", "batch": 2, "context": 64, "target": "cpu"},
        {"model": "tiny", "batch": 2, "context": 64, "target": "cuda"},
    ),
    Step(
        "step benchmark",
        "step-bench",
        {
            "model": "tiny",
            "batch": 2,
            "context": 32,
            "warmup_steps": 1,
            "timed_steps": 2,
            "cold_steps": 1,
            "profile_steps": 0,
            "trace": False,
        },
        {
            "model": "tiny",
            "batch": 2,
            "context": 64,
            "warmup_steps": 2,
            "timed_steps": 3,
            "cold_steps": 1,
            "profile_steps": 1,
            "trace": False,
        },
    ),
    Step(
        "max batch",
        "max-batch",
        {"model": "tiny", "context": 64, "max_probes": 1},
        {"model": "tiny", "context": 256, "max_probes": 2},
    ),
)
# On the CPU, max-batch reports "unsupported" with its reason at once: it is still run, so the table says why.


@dataclass
class Report:
    device: str  # as requested
    checks: list[Check] = field(default_factory=list)
    runs: list[RunResult] = field(default_factory=list)
    started_at: str = field(default_factory=now_iso)
    finished_at: str | None = None
    wall_s: float = 0.0

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if c.verdict == "fail"]

    @property
    def device_description(self) -> dict:
        return next((r.device for r in self.runs if r.device.get("kind") in ("cpu", "cuda")), {})

    @property
    def versions(self) -> dict:
        return next(
            (r.versions for r in self.runs if r.versions.get("torch") and "cuda" in r.versions),
            {"gpulab": __version__, "python": platform.python_version()},
        )

    def bundle(self) -> dict:
        """Everything a bug report needs: versions (torch, CUDA, cuDNN, driver), the device, every check
        and every run with its rows."""
        return {
            "format": BUNDLE_FORMAT,
            "version": 1,
            "device_requested": self.device,
            "device": self.device_description,
            "versions": self.versions,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "wall_s": self.wall_s,
            "summary": {v: sum(c.verdict == v for c in self.checks) for v in VERDICTS},
            "checks": [asdict(c) for c in self.checks],
            "runs": [r.to_dict() for r in self.runs],
        }

    def table(self) -> str:
        """The checks as aligned text, one line each (the reason under an unsupported or failed check)."""
        heads = ("check", "result", "expected", "verdict")
        rows = [(c.check, c.result, c.expected, c.verdict) for c in self.checks]
        widths = [min(60, max(len(h), *(len(r[i]) for r in rows))) for i, h in enumerate(heads)]
        lines = ["  ".join(h.ljust(w) for h, w in zip(heads, widths)).rstrip()]
        for check, row in zip(self.checks, rows):
            lines.append("  ".join(_clip(v, w).ljust(w) for v, w in zip(row, widths)).rstrip())
            if check.reason and check.verdict != "pass":
                lines.append(f"    ↳ {check.reason}")
        summary = ", ".join(f"{n} {v}" for v, n in self.bundle()["summary"].items())
        lines.append(f"{len(self.checks)} checks: {summary} — {duration_text(self.wall_s)} on {self.device_label()}")
        return "\n".join(lines)

    def device_label(self) -> str:
        return self.device_description.get("label") or self.device

    @classmethod
    def from_run(cls, run: RunResult, runs: list[RunResult]) -> Report:
        """A stored doctor run (see :func:`report_run`) and its runs, back as a report (for its bundle)."""
        return cls(
            device=run.config.get("device", "auto"),
            checks=[Check(**row) for row in run.rows],
            runs=runs,
            started_at=run.started_at,
            finished_at=run.finished_at,
            wall_s=run.meta.get("wall_s", 0.0),
        )


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


Progress = Callable[[int, int, str], None]


def run_doctor(
    device: str = "auto",
    manager=None,
    *,
    name: str = "doctor",
    timeout_s: float = 600.0,
    on_progress: Progress | None = None,
    save: bool = True,
) -> Report:
    """Run the plan on ``device`` through ``manager`` (a fresh :class:`~core.jobs.JobManager` without a
    store if None) and check the results. Never raises for a failing experiment: that is a failed check.
    ``save=False``: the runs are parts of a larger run that stores them inside itself (the health check)."""
    from core.hardware.device import check_device_string
    from core.jobs import JobManager

    device = check_device_string(device)
    own = manager is None
    manager = manager or JobManager(store=None)
    report = Report(device=device)
    t0 = time.monotonic()
    notify = on_progress or (lambda done, total, message: None)
    try:
        first = manager.submit(
            PLAN[0].experiment, PLAN[0].cpu, device, timeout_s=timeout_s, name=f"{name}: {PLAN[0].label}", save=save
        ).wait()
        assert first is not None  # wait() without a timeout returns once the job has its result
        cuda = first.device.get("kind") == "cuda"
        steps = [(s, s.gpu if cuda else s.cpu) for s in PLAN]
        steps = [(s, cfg) for s, cfg in steps if cfg is not None]
        total = len(steps)
        results: dict[str, RunResult] = {PLAN[0].label: first}
        notify(1, total, f"{PLAN[0].label}: {first.status}")
        jobs = [
            (s, manager.submit(s.experiment, cfg, device, timeout_s=timeout_s, name=f"{name}: {s.label}", save=save))
            for s, cfg in steps[1:]
        ]
        for i, (step, job) in enumerate(jobs, start=2):
            result = job.wait()
            assert result is not None
            results[step.label] = result
            notify(i, total, f"{step.label}: {results[step.label].status}")
        report.runs = [results[s.label] for s, _ in steps]
        report.checks = [runs_check(s.label, results[s.label]) for s, _ in steps] + cross_checks(results, cuda)
    finally:
        if own:
            manager.shutdown()
    report.finished_at = now_iso()
    report.wall_s = time.monotonic() - t0
    return report


def runs_check(label: str, run: RunResult) -> Check:
    """An experiment ran to the end on the device (unsupported is the device's answer, with its reason)."""
    took = f" in {duration_text(run.duration_s)}" if run.duration_s is not None else ""
    what = f"{label} ({run.experiment}) runs"
    if run.status == "ok":
        return Check(what, f"ok, {len(run.rows)} rows{took}", "ok", "pass")
    if run.status == "unsupported":
        return Check(what, "unsupported", "ok or unsupported with the reason", "unsupported", run.error or "")
    return Check(what, run.status, "ok", "fail", run.error or "")


def _unsupported(check: str, expected: str, reason: str) -> Check:
    return Check(check, "not measured", expected, "unsupported", reason)


def _missing(check: str, expected: str, run: RunResult | None) -> Check | None:
    """A check whose run did not finish cannot pass: it fails (or is unsupported) with that run's reason."""
    if run is None:
        return Check(check, "not run", expected, "fail", "its experiment was not run")
    if run.status == "unsupported":
        return _unsupported(check, expected, run.error or "")
    if run.status != "ok":
        return Check(check, f"{run.experiment} {run.status}", expected, "fail", run.error or "")
    return None


def cross_checks(results: dict[str, RunResult], cuda: bool) -> list[Check]:
    return [
        fp16_overflow(results.get("number formats (65536)")),
        timer_agreement(results.get("matmul timer vs reference"), cuda),
        trace_peak(results.get("allocator lifecycle"), cuda),
        planner_vs_measured(results.get("training memory")),
        *backward_peaks(results.get("allocator backward peak"), cuda),
        no_throughput_above_peak(list(results.values())),
    ]


def fp16_overflow(run: RunResult | None) -> Check:
    check, expected = "seed: 65536 stored in fp16", "inf (fp16's largest finite value is 65504)"
    missing = _missing(check, expected, run)
    if missing:
        return missing
    assert run is not None  # _missing answers for a run that is None
    row = next((r for r in values_of(run) if r.format == "fp16"), None)
    if row is None:
        return Check(check, "no fp16 row", expected, "fail", "the formats run has no fp16 row")
    ok = row.stored == math.inf
    return Check(
        check,
        f"{row.stored} ({row.status})",
        expected,
        "pass" if ok else "fail",
        "" if ok else "fp16 did not overflow to inf",
    )


def current_load() -> tuple[float | None, int]:
    """The 1-minute load average and the number of cores, now (the seam the tests replace)."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    return load, os.cpu_count() or 1


def machine_busy(ref: RunResult) -> str | None:
    """Why the machine was too busy for a CPU timing comparison (the load and the samples' spread seen), or None."""
    load_now, cores = current_load()
    cores = ref.meta.get("cpu_cores") or cores
    loads = [x for x in (ref.meta.get("cpu_load_1min"), load_now) if isinstance(x, int | float)]
    ratios = [
        r["lab_median_ms"] / r["reference_median_ms"]
        for r in ref.rows
        if isinstance(r.get("lab_median_ms"), int | float)
        and isinstance(r.get("reference_median_ms"), int | float)
        and r["lab_median_ms"] > 0
        and r["reference_median_ms"] > 0
    ]
    spread = max(ratios) / min(ratios) if len(ratios) > 1 else 1.0
    seen = []
    if loads and max(loads) >= BUSY_LOAD_PER_CORE * cores:
        seen.append(f"1-minute load {max(loads):.1f} on {cores} cores")
    if spread > BUSY_ROUND_SPREAD:
        seen.append(f"the rounds' lab/reference ratios range {min(ratios):.2f}–{max(ratios):.2f}")
    return "; ".join(seen) or None


def timer_tolerance(tool: str, cuda: bool) -> tuple[float, float]:
    """The lab/reference ratios accepted for ``tool`` (a run's meta names one, or two joined by " + " when
    do_bench failed mid-run): on a GPU the tight range only where every tool used flushes L2 before each call."""
    if not cuda:
        return CPU_TIMER_RATIO
    return GPU_TIMER_RATIO if set(tool.split(" + ")) <= FLUSHING_TOOLS else GPU_TIMER_RATIO_NO_FLUSH


def timer_agreement(ref: RunResult | None, cuda: bool) -> Check:
    """The lab's per-point timer against an independent tool, interleaved in one job (``reference``)."""
    tool = (ref.meta.get("tool") if ref is not None and ref.status == "ok" else None) or (
        DO_BENCH if cuda else TORCH_BENCHMARK
    )
    lo, hi = timer_tolerance(tool, cuda)
    check = f"matmul timer vs {tool}"
    expected = f"lab / reference median {lo:g}–{hi:g}"
    missing = _missing(check, expected, ref)
    if missing:
        return missing
    assert ref is not None  # _missing answers for a run that is None
    meta, row = ref.meta, ref.rows[0]
    ratio = meta["ratio"]
    result = (
        f"{row['dtype']} {row['m']}³: lab {meta['lab_median_ms']:.4g} ms, reference "
        f"{meta['reference_median_ms']:.4g} ms (ratio {ratio:.2f})"
    )
    if meta.get("reference_fallback_reason"):
        result += f"; do_bench not used: {meta['reference_fallback_reason']}"
    if lo <= ratio <= hi:
        return Check(check, result, expected, "pass")
    busy = None if cuda else machine_busy(ref)
    if busy:
        return Check(
            check,
            f"inconclusive: machine busy ({busy}); {result}",
            expected,
            "unsupported",
            f"inconclusive: machine busy ({busy}): other processes' waits land in both timers unevenly, so "
            f"they cannot be compared; run the doctor on an idle machine",
        )
    return Check(check, result, expected, "fail", "the lab's timer and the reference disagree beyond the tolerance")


def replay_peak(trace: list[list]) -> int:
    """Highest live total replayed from allocator history entries [time_us, action, size]."""
    live = peak = 0
    for _, action, size in sorted(trace, key=lambda e: e[0]):
        live += size if action == "alloc" else -size if action == "free_completed" else 0
        peak = max(peak, live)
    return peak


def trace_peak(run: RunResult | None, cuda: bool) -> Check:
    check = "allocator: max_memory_allocated vs its own event history"
    expected = f"equal (±{TRACE_PEAK_TOLERANCE:.0%})"
    if not cuda:
        return _unsupported(
            check,
            expected,
            "the CPU has no caching allocator: max_memory_allocated and the allocation history are CUDA-only",
        )
    missing = _missing(check, expected, run)
    if missing:
        return missing
    assert run is not None  # _missing answers for a run that is None
    if run.meta.get("snapshot_note"):
        return _unsupported(check, expected, run.meta["snapshot_note"])
    trace = [e for r in run.rows for e in (r.get("trace") or [])]
    counter = max((r.get("peak_allocated_bytes") or 0) for r in run.rows)
    if not trace:
        return Check(check, "no history recorded", expected, "fail", "the run kept no allocation history")
    replayed = replay_peak(trace)
    ok = counter > 0 and abs(replayed - counter) <= TRACE_PEAK_TOLERANCE * counter
    return Check(
        check,
        f"counter {bytes_text(counter)}, history {bytes_text(replayed)}",
        expected,
        "pass" if ok else "fail",
        "" if ok else "the allocator's counter and its history disagree",
    )


def planner_vs_measured(run: RunResult | None) -> Check:
    check = "planner vs measured peak (tiny training step)"
    expected = f"|estimate − measured| ≤ {PLANNER_ERROR_PCT:g}% of measured"
    missing = _missing(check, expected, run)
    if missing:
        return missing
    assert run is not None  # _missing answers for a run that is None
    s = TrainMemorySummary.from_meta(run.meta)
    ok = abs(s.error_pct) <= PLANNER_ERROR_PCT
    result = (
        f"estimate {bytes_text(s.peak_estimated_bytes)}, measured {bytes_text(s.peak_measured_bytes)}"
        f" ({s.error_pct:+.1f}%)"
    )
    return Check(
        check,
        result,
        expected,
        "pass" if ok else "fail",
        "" if ok else "the planner is off by more than it claims for this step",
    )


def backward_peaks(run: RunResult | None, cuda: bool) -> list[Check]:
    checks = []
    for form, claim in (("y = 5*x; y.mean().backward()", 4.0), ("(5*x).mean().backward()", 3.0)):
        check = f"seed: backward peak of {form}"
        expected = f"{claim:g}× size(x) (±{BACKWARD_TOLERANCE:g})"
        if not cuda:
            reason = (
                run.error
                if run is not None and run.status == "unsupported" and run.error
                else "the peak is read from the CUDA caching allocator, which a CPU does not have"
            )
            checks.append(_unsupported(check, expected, reason))
            continue
        missing = _missing(check, expected, run)
        if missing:
            checks.append(missing)
            continue
        assert run is not None  # _missing answers for a run that is None
        found = next((f for f in run.meta.get("backward_peak", []) if f["form"] == form), None)
        if found is None:
            checks.append(Check(check, "not in the run", expected, "fail", "the backward-peak run has no such form"))
            continue
        ok = abs(found["peak_over_x"] - claim) <= BACKWARD_TOLERANCE
        checks.append(
            Check(
                check,
                f"{found['peak_over_x']:.3f}× size(x)",
                expected,
                "pass" if ok else "fail",
                "" if ok else "the measured peak differs from the autograd arithmetic",
            )
        )
    return checks


def no_throughput_above_peak(runs: list[RunResult]) -> Check:
    check, expected = "no throughput above the datasheet peak", "none (a number above the sheet is a timing error)"
    errors = [e for r in runs for e in (r.meta.get("measurement_errors") or [])]
    if errors:
        return Check(check, f"{len(errors)} above", expected, "fail", errors[0])
    return Check(check, "none", expected, "pass")


def report_run(report: Report) -> RunResult:
    """The doctor's answer as a stored run (experiment "doctor"): the home page shows the latest one."""
    status = "error" if report.failed else "ok"
    error = (
        f"{count_text(len(report.failed), 'check')} failed: " + "; ".join(c.check for c in report.failed)
        if report.failed
        else None
    )
    bundle = report.bundle()
    return RunResult(
        experiment="doctor",
        config={"device": report.device},
        device=report.device_description or {"kind": "unknown", "name": report.device},
        versions=report.versions,
        started_at=report.started_at,
        finished_at=report.finished_at,
        status=status,
        error=error,
        rows=[asdict(c) for c in report.checks],
        meta={"summary": bundle["summary"], "wall_s": report.wall_s, "run_ids": [r.id for r in report.runs]},
        name="doctor",
    )

"""The claims the GPU check judges, one function each, from the JSON the lab's commands printed.

Each judge reads the stored run (or the import's answer) as ``python -m core … --json`` printed it and
returns one :class:`Claim`: what was measured, what was expected (the seed's words, the issue's
tolerance, the published figure) and a verdict. A judge recomputes what it compares from the rows —
times, bytes, TFLOPS — rather than trusting a verdict the lab derived, so a wrong derivation in the lab
shows up here as a failed claim. Pure functions of dicts: the tests feed them hand-made runs.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from typing import Any

PASS, FAIL, UNSUPPORTED, INFO = "pass", "fail", "unsupported", "info"
TIMER_FLOOR = 0.97  # the lab's TFLOPS over the reference timer's, at least (issue: ≥ 0.97×)
SEARCH_FLOOR = 0.90  # the bounded search's best, of the published maximum (issue 45: a search against a search)
SEARCH_SLACK_S = 2.0  # what a search may spend past its budget besides its last shape (allocation, progress)
TF32_SPEEDUP_FLOOR = 2.0  # the seed says "several times"
BACKWARD_TOLERANCE = 0.05
PLANNER_TOLERANCE_PCT = 5.0
ADAM_TOLERANCE = 0.05
SNAPSHOT_TOLERANCE = 0.01
TRACE_TOLERANCE = 0.02
HEALTH_BAD = ("below expected", "far below", "fail")
FREED_SLACK = 0.05  # of the tensor's size: what "did not go back to the driver" allows for bookkeeping


@dataclass(frozen=True)
class Claim:
    claim: str
    measured: str
    expected: str
    verdict: str  # pass | fail | unsupported | info

    def line(self) -> str:
        return f"[{self.verdict}] {self.claim}: {self.measured} (expected {self.expected})"

    def to_dict(self) -> dict:
        return asdict(self)


def _gib(n: float) -> str:
    return f"{n / 2**30:.3f} GiB"


def _on(run: dict) -> str:
    device = run.get("device") or {}
    return str(device.get("name") or device.get("label") or "this device")


def _missing(claim: str, expected: str, run: dict | None) -> Claim | None:
    """A run that is absent, failed or unsupported cannot be judged: say which."""
    if run is None:
        return Claim(claim, "not measured (its step did not run or printed no JSON)", expected, FAIL)
    status = run.get("status")
    if status == "unsupported":
        return Claim(claim, run.get("error") or f"unsupported on {_on(run)}", expected, UNSUPPORTED)
    if status != "ok":
        return Claim(claim, f"run {status}: {run.get('error')}", expected, FAIL)
    return None


# --- matmul --------------------------------------------------------------------------------------


def dtypes_measured(run: dict | None) -> Claim:
    """Every dtype measured or "unsupported on <GPU>: <reason>", and no figure above the datasheet."""
    claim = "matmul: every dtype measured or unsupported, none above the datasheet"
    expected = "each point ok or 'unsupported on …: reason'; TFLOPS ≤ datasheet peak"
    if missing := _missing(claim, expected, run):
        return missing
    assert run is not None
    by_dtype: dict[str, list[dict]] = {}
    for row in run["rows"]:
        by_dtype.setdefault(row["dtype"], []).append(row)
    said, bad = [], []
    for dtype, rows in by_dtype.items():
        ok = [r for r in rows if r.get("status") == "ok"]
        unsupported = [r for r in rows if r.get("status") == "unsupported"]
        odd = [r for r in rows if r not in ok and r not in unsupported]
        above = [r for r in ok if isinstance(r.get("peak_tflops"), (int, float)) and r["tflops"] > r["peak_tflops"]]
        unexplained = [r for r in unsupported if not str(r.get("reason") or "").startswith("unsupported on ")]
        if ok:
            best = max(r["tflops"] for r in ok)
            said.append(f"{dtype} {len(ok)}/{len(rows)} measured (best {best:,.4g} TFLOPS)")
        if unsupported:
            said.append(f"{dtype} {len(unsupported)} unsupported ({unsupported[0].get('reason')})")
        bad += [f"{dtype} {r.get('m')}: {r.get('status')} {r.get('reason') or ''}".strip() for r in odd]
        bad += [f"{dtype} {r['m']}: {r['tflops']:.1f} > peak {r['peak_tflops']:.1f} TFLOPS" for r in above]
        bad += [f"{dtype} {r.get('m')}: unsupported without 'unsupported on …'" for r in unexplained]
    measured = "; ".join(said) + (f" — WRONG: {'; '.join(bad)}" if bad else "")
    return Claim(claim, measured, expected, FAIL if bad or not by_dtype else PASS)


def _point(run: dict, dtype: str, size: int) -> dict | None:
    return next(
        (
            r
            for r in run.get("rows", [])
            if r.get("dtype") == dtype and r.get("m") == r.get("n") == r.get("k") == size and r.get("status") == "ok"
        ),
        None,
    )


def timer_agreement(reference: dict | None) -> Claim:
    """The lab's timer against the independent one, interleaved in one job: lab TFLOPS ≥ 0.97× the reference's."""
    claim = "matmul timer vs the reference timer"
    expected = f"lab TFLOPS ≥ {TIMER_FLOOR:g}× the reference's, same run"
    if missing := _missing(claim, expected, reference):
        return missing
    assert reference is not None
    rows = reference["rows"]
    lab = statistics.median(r["lab_median_ms"] for r in rows)
    ref = statistics.median(r["reference_median_ms"] for r in rows)
    row = rows[0]
    flops = 2 * row["m"] * row["n"] * row["k"]
    ratio = ref / lab  # TFLOPS ratio lab / reference
    measured = (
        f"{row['dtype']} {row['m']}³: lab {lab:.4g} ms ({flops / lab / 1e9:,.1f} TFLOPS), {row['tool']} {ref:.4g} ms "
        f"({flops / ref / 1e9:,.1f} TFLOPS): {ratio:.3f}×"
    )
    if (reference.get("device") or {}).get("kind") != "cuda":  # a CPU's timings move with whatever else runs
        return Claim(
            claim, f"{measured}; measured, not judged: CPU timings move with the machine's load", expected, INFO
        )
    return Claim(claim, measured, expected, PASS if ratio >= TIMER_FLOOR else FAIL)


def against_published(run: dict | None, dtype: str, size: int) -> Claim:
    """The dtype's figure at size³ beside the card's published best (mamf-finder's tables): shown, never judged —
    one fixed shape against the best of a shape search is not like for like (the search step judges the card)."""
    claim = f"matmul {dtype} {size}³ beside the published best for the card"
    expected = "shown, not judged: a fixed shape against the best of a shape search (the search step judges it)"
    if missing := _missing(claim, expected, run):
        return missing
    assert run is not None
    point = _point(run, dtype, size)
    if point is None:
        return Claim(claim, f"no ok {dtype} point at {size}³ in the run", expected, UNSUPPORTED)
    published = point.get("published_tflops")
    if not isinstance(published, (int, float)):
        return Claim(claim, f"{point['tflops']:,.1f} TFLOPS; no published figure for {_on(run)}", expected, INFO)
    share = point["tflops"] / published
    return Claim(claim, f"{point['tflops']:,.1f} TFLOPS = {share:.1%} of {published:g} published", expected, INFO)


def search_reaches_published(run: dict | None, dtype: str) -> Claim:
    """The bounded shape search's best point, recomputed from its rows, against the card's published maximum;
    and its budget kept: what it spent, less its last shape's time, within the budget (and a little slack)."""
    claim = f"bounded {dtype} shape search vs the published maximum for the card"
    expected = (
        f"≥ {SEARCH_FLOOR:.0%} of the published maximum (the best of a search against the best of a search), "
        f"no shape begun after the budget"
    )
    if missing := _missing(claim, expected, run):
        return missing
    assert run is not None
    search = ((run.get("meta") or {}).get("search") or {}).get(dtype)
    points = [r for r in run["rows"] if r.get("dtype") == dtype and r.get("status") == "ok"]
    if not search or not points:
        return Claim(claim, f"no {dtype} search in the run", expected, FAIL)
    best = max(points, key=lambda r: 2 * r["m"] * r["n"] * r["k"] / (r["median_ms"] * 1e9))
    tflops = 2 * best["m"] * best["n"] * best["k"] / (best["median_ms"] * 1e9)
    last = points[-1]
    late = search["spent_s"] - (last["t_end_s"] - last["t_start_s"]) - search["budget_s"]
    within = late <= SEARCH_SLACK_S
    said = (
        f"{tflops:,.1f} TFLOPS at {best['m']}×{best['n']}×{best['k']}; {search['started']} of {search['grid']} "
        f"shapes in {search['spent_s']:.1f} s (budget {search['budget_s']:g} s"
        + ("" if within else f", {late:.1f} s past it besides its last shape")
        + f"), from {search['start_from']}"
    )
    published = best.get("published_tflops")
    if not isinstance(published, (int, float)):
        return Claim(claim, f"{said}; no published figure for {_on(run)}", expected, INFO if within else FAIL)
    share = tflops / published
    verdict = PASS if share >= SEARCH_FLOOR and within else FAIL
    return Claim(claim, f"{said} = {share:.1%} of {published:g} published", expected, verdict)


def tf32_speedup(run: dict | None, size: int) -> Claim:
    """TF32 against fp32 at size³: the speed-up (seed: several times) and each one's error against fp64."""
    claim = f"TF32 vs fp32 at {size}³"
    expected = (
        f"TF32 ≥ {TF32_SPEEDUP_FLOOR:g}× faster (seed: 'several times'), its error against fp64 larger than fp32's"
    )
    if missing := _missing(claim, expected, run):
        return missing
    assert run is not None
    tf32 = next((r for r in run["rows"] if r.get("dtype") == "tf32" and r.get("m") == size), None)
    if tf32 is not None and tf32.get("status") == "unsupported":
        return Claim(claim, str(tf32.get("reason")), expected, UNSUPPORTED)
    fp32, tf32 = _point(run, "fp32", size), _point(run, "tf32", size)
    if fp32 is None or tf32 is None:
        return Claim(claim, f"fp32 and tf32 at {size}³ not both measured", expected, FAIL)
    speedup = fp32["median_ms"] / tf32["median_ms"]
    e32, etf = fp32.get("rel_error"), tf32.get("rel_error")
    errors = f"; error vs fp64: fp32 {e32:.2e}, tf32 {etf:.2e}" if e32 is not None and etf is not None else ""
    measured = f"fp32 {fp32['median_ms']:.4g} ms, tf32 {tf32['median_ms']:.4g} ms: {speedup:.2f}×{errors}"
    ok = speedup >= TF32_SPEEDUP_FLOOR and (e32 is None or etf is None or etf > e32)
    return Claim(claim, measured, expected, PASS if ok else FAIL)


# --- allocator -----------------------------------------------------------------------------------


def _step(run: dict, op: str, nth: int = 1) -> tuple[dict, dict]:
    """The nth row whose step command (``alloc c 1024``, ``free d``…) starts with ``op``, and the row before it."""
    rows = run["rows"]
    found = [i for i, r in enumerate(rows) if str(r.get("op", "")).startswith(op)]
    i = found[nth - 1]
    return rows[i - 1], rows[i]


def _cuda_only(names: tuple[str, ...], run: dict | None) -> list[Claim] | None:
    """The claims' answer when the run cannot be judged: missing, failed, or on a CPU (no caching allocator)."""
    if run is None or run.get("status") != "ok":
        return [c for name in names if (c := _missing(name, "see the seed", run))]
    if (run.get("device") or {}).get("kind") != "cuda":
        why = f"unsupported on {_on(run)}: a CPU has no caching allocator"
        return [Claim(n, why, "the CUDA caching allocator's counters", UNSUPPORTED) for n in names]
    return None


def lifecycle_claims(run: dict | None, size_mib: int) -> list[Claim]:
    """The seed's tensor-lifecycle claims, read off the allocator's and the driver's counters per step."""
    names = (
        "allocator: to('cpu') does not free device memory at once",
        "allocator: reassigning a tensor needs twice its memory",
    )
    if (unjudged := _cuda_only(names, run)) is not None:
        return unjudged
    assert run is not None
    size = size_mib * 2**20
    slack = FREED_SLACK * size
    before, after = _step(run, "to_cpu b")
    freed = before["allocated_bytes"] - after["allocated_bytes"]
    driver_drop = before["driver_used_bytes"] - after["driver_used_bytes"]
    kept = abs(after["reserved_bytes"] - before["reserved_bytes"]) <= slack and driver_drop <= slack
    to_cpu = Claim(
        names[0],
        f"allocated −{_gib(freed)}, reserved {_gib(before['reserved_bytes'])} → {_gib(after['reserved_bytes'])}, "
        f"driver used −{_gib(driver_drop)}",
        f"allocated −{_gib(size)}, reserved and driver used unchanged (±{FREED_SLACK:.0%} of the tensor)",
        PASS if kept and abs(freed - size) <= slack else FAIL,
    )
    before, after = _step(run, "alloc c", 2)
    transient = after["peak_allocated_bytes"] - before["allocated_bytes"]
    reassign = Claim(
        names[1],
        f"peak while reassigning c: allocated before + {_gib(transient)}",
        f"the new c ({_gib(size)}) is built while the old one lives: +{_gib(size)}, two c's at the peak",
        PASS if abs(transient - size) <= slack else FAIL,
    )
    return [to_cpu, reassign]


DEL_STEPS = "alloc x {mib},free x,empty_cache"  # the custom scenario the del claim reads


def delete_claim(run: dict | None, size_mib: int) -> list[Claim]:
    """``del`` returns nothing to the driver; ``empty_cache`` does (a custom scenario: alloc x, free x, empty_cache)."""
    name = ("allocator: del returns nothing to the driver until empty_cache",)
    if (unjudged := _cuda_only(name, run)) is not None:
        return unjudged
    assert run is not None
    size = size_mib * 2**20
    slack = FREED_SLACK * size
    held, freed = _step(run, "free x")
    _, cleared = _step(run, "empty_cache")
    kept = freed["driver_used_bytes"] >= held["driver_used_bytes"] - slack
    returned = held["driver_used_bytes"] - cleared["driver_used_bytes"]
    return [
        Claim(
            name[0],
            f"driver used {_gib(held['driver_used_bytes'])} with x, {_gib(freed['driver_used_bytes'])} after del, "
            f"{_gib(cleared['driver_used_bytes'])} after empty_cache (−{_gib(returned)})",
            f"del: unchanged; empty_cache: −{_gib(size)} (±{FREED_SLACK:.0%})",
            PASS if kept and abs(returned - size) <= slack else FAIL,
        )
    ]


def backward_peaks(run: dict | None) -> list[Claim]:
    """Backward peak of ``y = 5*x; y.mean().backward()`` is 4× size(x), of ``(5*x).mean().backward()`` 3× (±5%),
    recomputed from the rows: the highest ``max_memory_allocated`` of a form's steps over the allocated bytes at
    its peak reset, in units of x's bytes (the first tensor the form allocates)."""
    out = []
    for phase, form, factor in (("A", "y = 5*x; y.mean().backward()", 4.0), ("B", "(5*x).mean().backward()", 3.0)):
        claim = f"allocator: backward peak of {form}"
        expected = f"{factor:g}× size(x) ±{BACKWARD_TOLERANCE:.0%} (seed)"
        if missing := _missing(claim, expected, run):
            out.append(missing)
            continue
        assert run is not None
        rows = [r for r in run["rows"] if r["step"].split(". ", 1)[-1].startswith(f"{phase}:")]
        base = rows[0]["allocated_bytes"]
        x_bytes = rows[1]["allocated_bytes"] - base  # after "x = zeros(…, requires_grad)"
        peak = max(r["peak_allocated_bytes"] for r in rows) - base
        over = peak / x_bytes
        verdict = PASS if abs(over - factor) <= BACKWARD_TOLERANCE * factor else FAIL
        out.append(Claim(claim, f"{_gib(peak)} over x = {_gib(x_bytes)}: {over:.3f}×", expected, verdict))
    return out


# --- training memory -----------------------------------------------------------------------------


def planner_agreement(run: dict | None, label: str) -> Claim:
    """The planner's peak within 5% of the measured one."""
    claim = f"train memory {label}: planner vs measured peak"
    expected = f"within {PLANNER_TOLERANCE_PCT:g}%"
    if missing := _missing(claim, expected, run):
        return missing
    assert run is not None
    measured, estimated = run["meta"]["peak_measured_bytes"], run["meta"]["peak_estimated_bytes"]
    error = 100 * (estimated - measured) / measured
    verdict = PASS if abs(error) <= PLANNER_TOLERANCE_PCT else FAIL
    return Claim(claim, f"measured {_gib(measured)}, planned {_gib(estimated)} ({error:+.2f}%)", expected, verdict)


def adam_four_times(run: dict | None, label: str) -> Claim:
    """With Adam, weights + gradients + two moments = 4× the weights (seed), read where the model's state is
    largest on the timeline: the optimizer step. (At the run's peak the gradients may be gone: with small
    models and ``zero_grad(set_to_none=True)`` the peak can fall in the next forward's activations.)"""
    claim = f"train memory {label}: Adam ×4 of the weights"
    expected = f"max over the step of (weights + gradients + optimizer state) / weights = 4 ±{ADAM_TOLERANCE:.0%}"
    if missing := _missing(claim, expected, run):
        return missing
    assert run is not None
    rows = [r for r in run["rows"] if isinstance(r.get("parameters"), int)]
    top = max(rows, key=lambda r: r["parameters"] + r["gradients"] + r["optimizer_state"])
    weights = top["parameters"]
    over = (weights + top["gradients"] + top["optimizer_state"]) / weights
    return Claim(
        claim,
        f"weights {_gib(weights)}, gradients {_gib(top['gradients'])}, optimizer state "
        f"{_gib(top['optimizer_state'])} at {top['t_ms']:.1f} ms: {over:.3f}× (the run's peak is in its "
        f"{run['meta'].get('peak_phase')} phase)",
        expected,
        PASS if abs(over - 4) <= 4 * ADAM_TOLERANCE else FAIL,
    )


# --- imports of the lab's own recordings ---------------------------------------------------------


def snapshot_peak(imported: dict | None, step: dict | None) -> Claim:
    """A snapshot recorded by the lab and imported back: its peak against the recorded process's own allocator.

    A snapshot's events carry the sizes the program asked for, so its peak is in requested bytes; the truth
    for that is ``memory_stats()["requested_bytes.all.peak"]`` (±1%). ``max_memory_allocated`` counts the
    allocator's blocks (rounded up, unsplit remainders included) and is shown beside it, with the gap."""
    claim = "snapshot recorded by the lab, imported back: peak vs the allocator's own"
    expected = f"equal to requested_bytes.all.peak ±{SNAPSHOT_TOLERANCE:.0%}; ≤ max_memory_allocated"
    if step is not None and not step.get("cuda"):
        return Claim(claim, "unsupported on CPU: no CUDA allocator to record", expected, UNSUPPORTED)
    if imported is None or step is None or "peak_allocated_bytes" not in imported:
        error = (imported or {}).get("error") or "the recording or its import did not finish"
        return Claim(claim, f"not measured: {error}", expected, FAIL)
    peak, requested, blocks = imported["peak_allocated_bytes"], step["requested_peak"], step["max_memory_allocated"]
    off = (peak - requested) / requested
    return Claim(
        claim,
        f"snapshot {_gib(peak)}, requested_bytes.all.peak {_gib(requested)} ({off:+.3%}); max_memory_allocated "
        f"{_gib(blocks)} (blocks {(blocks - peak) / blocks:.2%} above the snapshot's peak)",
        expected,
        PASS if abs(off) <= SNAPSHOT_TOLERANCE and peak <= blocks else FAIL,
    )


def trace_kernel_time(imported: dict | None, bench: dict | None) -> Claim:
    """A profiler trace of the step benchmark imported back: its GPU time against the benchmark's own figure.

    The benchmark sums every GPU activity its ops launched (kernels, copies and memsets, per profiled step
    and scope); the import keeps kernels, memcpy and memset apart, so the like-for-like figure is their sum."""
    claim = "profiler trace imported back: GPU time vs the step benchmark's"
    expected = f"equal ±{TRACE_TOLERANCE:.0%}"
    if missing := _missing(claim, expected, bench):
        return missing
    assert bench is not None
    if (bench.get("device") or {}).get("kind") != "cuda":
        return Claim(claim, f"unsupported on {_on(bench)}: a CPU trace has no kernels", expected, UNSUPPORTED)
    if imported is None or "kernel_time_us" not in imported:
        return Claim(claim, f"not imported: {(imported or {}).get('error')}", expected, FAIL)
    meta = bench["meta"]
    own_ms = sum(meta["profiled_total_ms"].values()) * meta["profile_steps"]
    kernels, copies, memsets = (imported[k] / 1e3 for k in ("kernel_time_us", "memcpy_time_us", "memset_time_us"))
    trace_ms = kernels + copies + memsets
    off = (trace_ms - own_ms) / own_ms
    return Claim(
        claim,
        f"trace {trace_ms:.3f} ms ({kernels:.3f} kernels + {copies:.3f} memcpy + {memsets:.3f} memset), "
        f"step benchmark {own_ms:.3f} ms ({off:+.3%})",
        expected,
        PASS if abs(off) <= TRACE_TOLERANCE else FAIL,
    )


# --- soak and health -----------------------------------------------------------------------------


def soak(run: dict | None) -> Claim:
    """Burst against sustained, with the clocks, power and throttle reasons NVML gave (or why it gave none)."""
    claim = "soak: burst vs sustained"
    expected = f"sustained within the run's {((run or {}).get('meta') or {}).get('drop_threshold_pct', 10):g}% of burst"
    if missing := _missing(claim, expected, run):
        return missing
    assert run is not None
    meta = run["meta"]
    powers = [r["power_w"] for r in run["rows"] if isinstance(r.get("power_w"), (int, float))]
    nvml = (
        f"; SM clock {meta.get('burst_sm_clock_mhz')} → {meta.get('sustained_sm_clock_mhz')} MHz, power up to "
        f"{max(powers):.0f} W, slowdown reasons {meta.get('sustained_slowdown_reasons') or 'none'}"
        if powers
        else f"; clocks and power not readable here: {meta.get('clocks_note')}"
    )
    verdict = INFO if (run.get("device") or {}).get("kind") != "cuda" else FAIL if meta["drop_flagged"] else PASS
    return Claim(claim, f"{meta['drop_reason']}{nvml}", expected, verdict)


def health(bundle: dict | None) -> Claim:
    """The health check's verdict on the card, and why (its plain answer and every row judged below expected)."""
    claim = "health --quick"
    expected = "healthy: no figure below its reference, no check failed"
    if bundle is None:
        return Claim(claim, "not measured", expected, FAIL)
    bad = [
        f"{r['figure']} on {r['where']}: {r['verdict']} ({r['reason']})"
        for r in bundle.get("rows", [])
        if r.get("verdict") in HEALTH_BAD
    ]
    measured = f"{bundle.get('verdict')}: {bundle.get('answer')}" + (f" — {'; '.join(bad)}" if bad else "")
    return Claim(claim, measured, expected, PASS if bundle.get("verdict") == "healthy" else FAIL)


# --- the step you would really run (issue 44) ------------------------------------------------------------------

MFU_SMALL_FLOOR = 0.35  # GPT-2 124M (or the course's small), modern stack with compile, 64 × 1,024 tokens
MFU_LARGE_FLOOR = 0.45  # the 2.7B preset at context 2,048, the largest batch that fits, modern stack
BUSY_FLOOR = 0.90
FP8_SPEEDUP_FLOOR = 1.2
BF16_OVER_FP32_FLOOR = 4.0  # 2.7B eager, bf16 autocast against fp32 (the course's students see 4.3–4.8× on an H100)
REPEAT_TOLERANCE = 0.03


def _cuda(run: dict) -> bool:
    return (run.get("device") or {}).get("kind") == "cuda"


def _stack_median(run: dict, stack: str) -> float | None:
    """A stack's median step time, recomputed from the run's warm step samples."""
    steps = [
        r["ms"]
        for r in run["rows"]
        if r.get("kind") == "sample" and r.get("stack", "course") == stack and r["series"] == "warm"
        if r["phase"] == "step"
    ]
    return statistics.median(steps) if steps else None


def _summary(run: dict, stack: str) -> dict | None:
    return next((r for r in run["rows"] if r.get("kind") == "summary" and r.get("stack") == stack), None)


def step_mfu(run: dict | None, stack: str, floor: float, label: str) -> Claim:
    """MFU over the card's bf16 dense peak, recomputed from the model FLOPs per step and the warm samples' median,
    and the GPU's busy share of the profiled step."""
    claim = f"step {label}: MFU and busy, stack {stack}"
    expected = f"≥ {floor:.0%} MFU of the bf16 dense peak and GPU busy ≥ {BUSY_FLOOR:.0%}"
    if missing := _missing(claim, expected, run):
        return missing
    assert run is not None
    summary, median = _summary(run, stack), _stack_median(run, stack)
    if summary is None or median is None:
        return Claim(claim, f"no timed steps of stack {stack}", expected, FAIL)
    tflops = run["meta"]["flops"]["total"] / (median / 1e3) / 1e12
    busy = summary.get("busy")
    said = f"{median:.2f} ms a step, {tflops:,.1f} TFLOPS" + (f", busy {busy:.1%}" if busy is not None else "")
    peak = summary.get("peak_tflops")
    if not peak or not _cuda(run):
        return Claim(claim, f"{said}; no bf16 datasheet peak on {_on(run)}", expected, INFO)
    mfu = tflops / peak
    ok = mfu >= floor and busy is not None and busy >= BUSY_FLOOR
    return Claim(claim, f"{said}: MFU {mfu:.1%} of {peak:g}", expected, PASS if ok else FAIL)


def _tokens(run: dict, stack: str) -> float | None:
    median = _stack_median(run, stack)
    tokens = run["meta"].get("tokens_per_step")
    return tokens / (median / 1e3) if median and tokens else None


def fp8_speedup(bf16: dict | None, fp8: dict | None, stack: str = "modern") -> Claim:
    claim = "step 2.7B: Float8 against bf16, same stack and shape"
    expected = f"≥ {FP8_SPEEDUP_FLOOR:g}× the tokens/s"
    for run in (bf16, fp8):
        if missing := _missing(claim, expected, run):
            return missing
    assert bf16 is not None and fp8 is not None
    a, b = _tokens(bf16, stack), _tokens(fp8, stack)
    if not a or not b:
        return Claim(claim, "no timed steps", expected, FAIL)
    verdict = PASS if b / a >= FP8_SPEEDUP_FLOOR else FAIL
    return Claim(claim, f"bf16 {a:,.0f}, fp8 {b:,.0f} tokens/s: {b / a:.2f}×", expected, verdict)


def _config(run: dict, precision: str, stack: str) -> dict | None:
    return next(
        (
            r
            for r in run["rows"]
            if r.get("kind") in ("precision", "grid") and r["precision"] == precision and r.get("stack") == stack
        ),
        None,
    )


def bf16_over_fp32(sweep: dict | None, stack: str = "course") -> Claim:
    claim = "step 2.7B eager: bf16 autocast against fp32"
    expected = f"≥ {BF16_OVER_FP32_FLOOR:g}× the step speed"
    if missing := _missing(claim, expected, sweep):
        return missing
    assert sweep is not None
    fp32, bf16 = _config(sweep, "fp32", stack), _config(sweep, "bf16-autocast", stack)
    if not fp32 or not bf16 or fp32["status"] != "ok" or bf16["status"] != "ok":
        said = "; ".join(f"{r['precision']} {r['status']}: {r.get('reason')}" for r in (fp32, bf16) if r)
        return Claim(claim, said or "not in the sweep", expected, FAIL)
    ratio = fp32["step_ms_median"] / bf16["step_ms_median"]
    said = f"fp32 {fp32['step_ms_median']:.1f} ms, bf16 {bf16['step_ms_median']:.1f} ms a step: {ratio:.2f}×"
    verdict = INFO if not _cuda(sweep) else PASS if ratio >= BF16_OVER_FP32_FLOOR else FAIL
    return Claim(claim, said, expected, verdict)


def repeatable(single: dict | None, sweep: dict | None, precision: str, stacks: tuple[str, ...]) -> list[Claim]:
    """The same configurations timed twice, once alone and once in a sweep, minutes apart: medians within 3%."""
    out = []
    for stack in stacks:
        claim = f"step: {precision} {stack} alone and in a sweep"
        expected = f"medians within ±{REPEAT_TOLERANCE:.0%}"
        if missing := _missing(claim, expected, single) or _missing(claim, expected, sweep):
            out.append(missing)
            continue
        assert single is not None and sweep is not None
        alone, row = _stack_median(single, stack), _config(sweep, precision, stack)
        if alone is None or row is None or row["status"] != "ok":
            out.append(Claim(claim, "not timed in both", expected, FAIL))
            continue
        ratio = row["step_ms_median"] / alone
        said = f"alone {alone:.2f} ms, in the sweep {row['step_ms_median']:.2f} ms ({ratio - 1:+.1%})"
        ok = abs(ratio - 1) <= REPEAT_TOLERANCE
        verdict = INFO if not _cuda(single) else PASS if ok else FAIL  # a CPU's timings move with the machine's load
        out.append(Claim(claim, said, expected, verdict))
    return out


def step_planner(run: dict | None, stack: str, label: str) -> Claim:
    """The planner's peak for the stack against the allocator's max_memory_allocated over its timed steps."""
    claim = f"step {label}: planner vs measured peak, stack {stack}"
    expected = f"within {PLANNER_TOLERANCE_PCT:g}%"
    if missing := _missing(claim, expected, run):
        return missing
    assert run is not None
    summary = _summary(run, stack)
    measured = (summary or {}).get("peak_measured_bytes")
    if summary is None or not measured:
        return Claim(claim, f"no allocator peak on {_on(run)} (a CPU has none here)", expected, INFO)
    estimated = summary["peak_estimated_bytes"]
    error = 100 * (estimated - measured) / measured
    verdict = PASS if abs(error) <= PLANNER_TOLERANCE_PCT else FAIL
    return Claim(claim, f"measured {_gib(measured)}, planned {_gib(estimated)} ({error:+.2f}%)", expected, verdict)


HELD_BACK = ("idle", "host_gap", "step_stall", "op_pattern")  # kinds of finding that name what holds a step back
WRITTEN_OUT_ATTENTION = "attention kernels"  # the cause an unfused-attention finding carries


def own_step_findings(run: dict | None, course: str = "course", modern: str = "modern") -> Claim:
    """The lab reads its own profiled steps as it reads a user's trace: the course's step's findings name what holds
    it back (launch gaps, unfused element-wise kernels, written-out attention); today's stack's invent no written-out
    attention."""
    claim = "step: the lab's findings on its own traces"
    expected = f"course: a finding of {', '.join(HELD_BACK)}; modern: none about written-out attention"
    if missing := _missing(claim, expected, run):
        return missing
    assert run is not None
    in_course, in_modern = ((_summary(run, s) or {}).get("trace_findings") for s in (course, modern))
    if in_course is None or in_modern is None:
        return Claim(
            claim, f"no trace read back on {_on(run)} (a GPU's only)", expected, INFO if not _cuda(run) else FAIL
        )
    found = {course: in_course, modern: in_modern}
    said = "; ".join(f"{s}: " + (" | ".join(f["text"][:120] for f in f_) or "no finding") for s, f_ in found.items())
    named = any(f["kind"] in HELD_BACK for f in in_course)
    invented = any(f.get("cause") == WRITTEN_OUT_ATTENTION for f in in_modern)
    return Claim(claim, said, expected, PASS if named and not invented else FAIL)


def as_dicts(claims: list[Claim]) -> list[dict[str, Any]]:
    return [c.to_dict() for c in claims]

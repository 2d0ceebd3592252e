"""``train-memory``: every allocation of real training steps, attributed to categories and phases.

Recording starts before the model is built, so the trace holds every byte the step's tensors use:
on GPU the caching allocator's history (``torch.cuda.memory._record_memory_history``) with the
official ``max_memory_allocated`` as the measured peak; on CPU the profiler's allocation events
(``profile_memory=True``: every tensor storage through PyTorch's CPU allocator, with pointer, size
and running total) — the profiler's peak is the measured peak. Phases are marked from
``TrainStep``'s callbacks. Each allocation becomes a lifetime; it is a parameter, gradient or
optimizer state if its pointer is one at a phase mark, an activation if a forward allocation lives
into backward, a temporary if it dies inside its phase, and "other" otherwise (inputs, RoPE tables,
workspaces). The peak's phase is read off the trace, never assumed.
"""

from __future__ import annotations

import bisect
import time
from dataclasses import dataclass, field
from typing import Literal

from core.errors import ConfigError
from core.experiment import Context, Experiment, Output, Progress
from core.measure import history
from core.rows.train_memory import PhaseBand, TrainMemorySummary
from core.transformer.planner import CATEGORIES, EstimateConfig, MeasuredStep, need_bytes, plan
from core.transformer.presets import get_preset
from core.units import count_text

MAX_TIMELINE_POINTS = 1500
# Allocator events kept while recording (no stack traces, so each is small); a full buffer has lost the
# step's first allocations (the parameters), so such a run is refused rather than misattributed.
HISTORY_MAX_ENTRIES = 2_000_000


@dataclass(frozen=True)
class TrainMemoryConfig(MeasuredStep):
    warmup_steps: int = field(default=1, metadata={"help": "steps before recording (optimizer state appears here)"})
    steps: int = field(default=1, metadata={"help": "recorded steps"})
    seed: int = field(default=0, metadata={"help": "random seed for weights and tokens"})

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0 <= self.warmup_steps <= 20:
            raise ConfigError(f"warmup_steps must be between 0 and 20, got {self.warmup_steps}")
        if not 1 <= self.steps <= 10:
            raise ConfigError(f"steps must be between 1 and 10, got {self.steps}")

    def estimate_config(self, target: Literal["cpu", "cuda"]) -> EstimateConfig:
        return EstimateConfig(**self.setup(), target=target)


@dataclass
class Trace:
    """Allocator events and phase marks on one clock (nanoseconds)."""

    events: list[tuple[int, int, int]] = field(default_factory=list)  # (time_ns, ptr, +size or -size)
    marks: list[tuple[int, int, str]] = field(default_factory=list)  # (time_ns, step, phase); phase "end" closes
    tags: list[tuple[int, dict[str, set[int]]]] = field(default_factory=list)  # (time_ns, category → pointers)


def tensor_pointers(step) -> dict[str, set[int]]:
    """Pointers of the tensors whose category is known by construction. fp32 master weights count as optimizer
    state (12 bytes a parameter with Adam's moments, as mixed-precision accounting counts them), their fp32
    gradients as gradients."""
    weights = list(step.module.parameters())
    masters = step.master.masters if step.master else []
    params = {p.data_ptr() for p in weights}
    grads = {p.grad.data_ptr() for p in (*weights, *masters) if p.grad is not None}
    state = {m.data_ptr() for m in masters}
    if step.optimizer is not None:
        for per_param in step.optimizer.state.values():
            state |= {v.data_ptr() for v in per_param.values() if hasattr(v, "data_ptr")}
    return {"parameters": params, "gradients": grads, "optimizer_state": state}


def classify(trace: Trace) -> tuple[list[tuple[int, int, str]], dict]:
    """Turn the trace into (time_ns, delta, category) events; returns them and the lifetimes' count."""
    phase_times = [m[0] for m in trace.marks]

    def phase_at(t: int) -> tuple[int, str]:
        i = bisect.bisect_right(phase_times, t) - 1
        return (trace.marks[i][1], trace.marks[i][2]) if i >= 0 else (-1, "setup")

    tag_times = [t for t, _ in trace.tags]
    live: dict[int, tuple[int, int]] = {}  # ptr → (t0, size)
    lifetimes: list[tuple[int, int, int, int]] = []  # (t0, t1, ptr, size); t1 = None-ish (max) if alive
    end = 2**63
    for t, ptr, delta in trace.events:
        if delta > 0:
            live[ptr] = (t, delta)
        elif ptr in live:
            t0, size = live.pop(ptr)
            lifetimes.append((t0, t, ptr, size))
    lifetimes += [(t0, end, ptr, size) for ptr, (t0, size) in live.items()]

    backward_starts = {m[1]: m[0] for m in trace.marks if m[2] == "backward"}
    out: list[tuple[int, int, str]] = []
    for t0, t1, ptr, size in lifetimes:
        category = None
        lo, hi = bisect.bisect_left(tag_times, t0), bisect.bisect_left(tag_times, t1)
        for _, tags in trace.tags[lo:hi]:
            category = next((name for name, ptrs in tags.items() if ptr in ptrs), None)
            if category:
                break
        if category is None:
            step, phase = phase_at(t0)
            if phase == "forward" and step in backward_starts and t1 > backward_starts[step]:
                category = "activations"
            elif phase in ("forward", "backward", "optimizer", "zero_grad"):
                category = "temporaries"
            else:
                category = "other"
        out.append((t0, size, category))
        if t1 != end:
            out.append((t1, -size, category))
    out.sort(key=lambda e: (e[0], e[1] > 0))  # frees before allocations at the same instant
    return out, {"allocations": len(lifetimes)}


def timeline(trace: Trace, record_from_ns: int, record_to_ns: int) -> dict:
    """Category totals after every event; the peak (with its phase) inside the recorded window."""
    events, counts = classify(trace)
    totals: dict[str, int] = dict.fromkeys(CATEGORIES, 0)
    points = []
    peak_total, peak_point = -1, None
    phase_times = [m[0] for m in trace.marks]
    for t, delta, category in events:
        totals[category] += delta
        if record_from_ns <= t <= record_to_ns:
            total = sum(totals.values())
            point = (t, total, dict(totals))
            points.append(point)
            if total > peak_total:
                peak_total, peak_point = total, point
    if peak_point is None:
        raise RuntimeError("no allocation was recorded inside the measured steps")
    i = bisect.bisect_right(phase_times, peak_point[0]) - 1
    step, phase = trace.marks[i][1], trace.marks[i][2]
    return {
        "points": _thin(points, peak_point),
        "peak_bytes": peak_total,
        "peak_phase": phase,
        "peak_step": step,
        "peak_breakdown_bytes": peak_point[2],
        "peak_time_ns": peak_point[0],
        **counts,
    }


def _thin(points: list, keep: tuple) -> list:
    """At most MAX_TIMELINE_POINTS: the highest point of each bin (so no spike is lost) plus the peak."""
    from core.memory.series import thin_indices  # numpy: imported when a run needs it, not by --help

    kept = [points[i] for i in thin_indices([p[1] for p in points], MAX_TIMELINE_POINTS)]
    if keep not in kept:
        kept.append(keep)
        kept.sort(key=lambda p: p[0])
    return kept


class _Recorder:
    """Starts recording before the model exists; marks phases on the recorder's own clock."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.trace = Trace()
        self._range = None
        self._tags: list = []
        self._finished = False
        self.step = -1

    def __enter__(self):
        import torch

        if self.device.startswith("cuda"):
            history.start(torch, HISTORY_MAX_ENTRIES)
        else:
            from torch.profiler import ProfilerActivity, profile

            self._prof = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
            self._prof.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        """On error, stop recording; on success :meth:`finish` already has."""
        if exc[0] is not None and not self._finished:
            self._finished = True
            if self.device.startswith("cuda"):
                import torch

                history.stop(torch)
            else:
                self._prof.__exit__(*exc)

    def mark(self, phase: str, tags: dict | None = None) -> None:
        """GPU: wall clock (the allocator's trace uses it too); CPU: a profiler range read back later."""
        import torch

        if self.device.startswith("cuda"):
            t = time.time_ns()
            self.trace.marks.append((t, self.step, phase))
            if tags is not None:
                self.trace.tags.append((t, tags))
            return
        if self._range is not None:
            self._range.__exit__(None, None, None)
        self._range = torch.profiler.record_function(f"gpulab|{self.step}|{phase}|{len(self._tags)}")
        self._range.__enter__()
        self._tags.append(tags)

    def finish(self) -> Trace:
        import torch

        self._finished = True
        if self.device.startswith("cuda"):
            snapshot = torch.cuda.memory._snapshot()
            history.stop(torch)
            index = torch.device(self.device).index or 0
            # torch's _Snapshot/_TraceEntry TypedDicts lag the allocator: a snapshot taken while history is
            # recorded has device_traces, every entry a time_us, and alloc/free entries an addr.
            entries = snapshot["device_traces"][index]  # pyright: ignore[reportTypedDictNotRequiredAccess]
            if history.overflowed(entries, HISTORY_MAX_ENTRIES):
                raise RuntimeError(
                    f"the allocator history filled its {HISTORY_MAX_ENTRIES:,} entries, so the "
                    f"first allocations were overwritten; record fewer steps or a smaller batch"
                )
            for entry in entries:
                if entry["action"] == "alloc":
                    self.trace.events.append((entry["time_us"] * 1000, entry["addr"], entry["size"]))  # pyright: ignore[reportGeneralTypeIssues, reportTypedDictNotRequiredAccess]
                elif entry["action"] == "free_completed":
                    self.trace.events.append((entry["time_us"] * 1000, entry["addr"], -entry["size"]))  # pyright: ignore[reportGeneralTypeIssues, reportTypedDictNotRequiredAccess]
            self.trace.events.sort(key=lambda e: e[0])
            return self.trace
        if self._range is not None:
            self._range.__exit__(None, None, None)
        self._prof.__exit__(None, None, None)
        from torch._C._profiler import _EventType, _ExtraFields_Allocation

        profiler = self._prof.profiler
        assert profiler is not None and profiler.kineto_results is not None  # both set once the profile exits
        stack = list(profiler.kineto_results.experimental_event_tree())
        ranges = []
        while stack:
            ev = stack.pop()
            stack.extend(ev.children)
            if ev.tag == _EventType.Allocation:
                f = ev.extra_fields
                assert isinstance(f, _ExtraFields_Allocation)
                self.trace.events.append((ev.start_time_ns, f.ptr, f.alloc_size))
            elif ev.name.startswith("gpulab|"):
                _, step, phase, index = ev.name.split("|")
                ranges.append((ev.start_time_ns, int(step), phase, int(index)))
        self.trace.events.sort(key=lambda e: e[0])
        for t, step, phase, index in sorted(ranges):
            self.trace.marks.append((t, step, phase))
            tags = self._tags[index]
            if tags is not None:
                self.trace.tags.append((t, tags))
        return self.trace


def measure(cfg: TrainMemoryConfig, device: str) -> dict:
    """Run warm-up and recorded steps under the recorder; return the trace analysis and counters."""
    import torch

    from core.transformer.model import random_batch
    from core.transformer.training import build_step

    torch.manual_seed(cfg.seed)
    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.empty_cache()
    with _Recorder(device) as rec:
        step = build_step(cfg, device)
        gen = torch.Generator(device=device).manual_seed(cfg.seed)
        x, y = random_batch(cfg.batch, cfg.context, get_preset(cfg.model).vocab_size, device, gen)
        peak_counter = None

        def mark(phase: str) -> None:
            # Known tensors are tagged after backward (gradients exist) and at the end (state exists).
            tagged = phase in ("optimizer", "zero_grad", "end", "forward")
            if cuda and phase in ("forward", "end"):
                torch.cuda.synchronize(device)
            rec.mark(phase, tensor_pointers(step) if tagged else None)

        for i in range(cfg.warmup_steps + cfg.steps):
            rec.step = i
            if i == cfg.warmup_steps and cuda:
                torch.cuda.synchronize(device)
                torch.cuda.reset_peak_memory_stats(device)
            step.run(x, y, mark, forward_only=cfg.forward_only)
        if cuda:
            torch.cuda.synchronize(device)
            peak_counter = torch.cuda.max_memory_allocated(device)
        trace = rec.finish()
    first = next(t for t, s, p in trace.marks if s == cfg.warmup_steps)
    last = trace.marks[-1][0]
    result = timeline(trace, first, last)
    result["bands"] = _bands(trace, first)
    result["t0_ns"] = first
    result["peak_counter_bytes"] = peak_counter
    return result


def _bands(trace: Trace, first_ns: int) -> list[dict]:
    marks = [m for m in trace.marks if m[0] >= first_ns]
    return [
        {"step": s, "phase": p, "start_ms": (t - first_ns) / 1e6, "end_ms": (marks[i + 1][0] - first_ns) / 1e6}
        for i, (t, s, p) in enumerate(marks[:-1])
        if p != "end"
    ]


def run(cfg: TrainMemoryConfig, ctx: Context):
    from core.hardware.device import describe
    from core.transformer.training import check_precision

    device = describe(ctx.device)
    check_precision(cfg.precision, ctx, bool(device.get("bf16_supported", True)))
    target = "cuda" if ctx.is_cuda else "cpu"
    ctx.check_fits(
        need_bytes(cfg.estimate_config(target)),
        f"train-memory of {cfg.model} (batch {cfg.batch}, context {cfg.context}, {cfg.precision}) "
        f"by the memory planner",
    )
    yield Progress(0, 2, f"recording {cfg.warmup_steps} warm-up + {count_text(cfg.steps, 'step')} of {cfg.model}")
    try:
        result = measure(cfg, ctx.device)
    except Exception as exc:  # noqa: BLE001 - only the OOM is re-labelled
        if type(exc).__name__ == "OutOfMemoryError":
            raise ctx.unsupported(f"out of memory at batch {cfg.batch}: {str(exc).splitlines()[0]}") from None
        raise
    est = plan(cfg.estimate_config(target), device.get("total_memory_bytes"))
    measured = result["peak_counter_bytes"] if ctx.is_cuda else result["peak_bytes"]
    t0 = result["t0_ns"]
    rows = [{"t_ms": (t - t0) / 1e6, "total_bytes": total, **cats} for t, total, cats in result["points"]]
    summary = TrainMemorySummary(
        peak_measured_bytes=measured,
        peak_estimated_bytes=est.peak_estimated_bytes,
        error_pct=100.0 * (est.peak_estimated_bytes - measured) / measured,
        peak_phase=result["peak_phase"],
        peak_phase_estimated=est.peak_phase,
        peak_moment_estimated=est.peak_moment,
        peak_t_ms=(result["peak_time_ns"] - t0) / 1e6,
        breakdown_measured_bytes=result["peak_breakdown_bytes"],
        breakdown_estimated_bytes=dict(est.breakdown_bytes),
        trace_peak_bytes=result["peak_bytes"],
        bands=tuple(PhaseBand.from_row(band) for band in result["bands"]),
        params=est.params,
        allocations=result["allocations"],
        estimate=est,
        byte_columns=CATEGORIES,  # the rows' category columns are bytes
        method=(
            "CUDA caching-allocator history (_record_memory_history) + max_memory_allocated"
            if ctx.is_cuda
            else "CPU: torch.profiler profile_memory allocation events (tensor storages via PyTorch's CPU "
            "allocator; library-internal scratch buffers are not seen)"
        ),
    )
    yield Progress(2, 2, "done")
    return Output(rows=rows, meta=summary.to_meta())


EXPERIMENTS = [
    Experiment(
        name="train-memory",
        title="Training-step memory timeline",
        config_type=TrainMemoryConfig,
        run=run,
        description=(__doc__ or "").partition("\n")[0],
        fresh_process=True,
    )
]

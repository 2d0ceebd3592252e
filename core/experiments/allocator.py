"""``allocator``: watch PyTorch's caching allocator step by step — seed 001's experiments, replayed.

A scenario is a list of named steps (allocate, free, move to CPU and back, empty_cache, matmul,
backward). After every step the run records what the allocator and the driver say — allocated,
reserved, peak, the driver's used memory (what nvidia-smi shows), process RSS and the
``memory_stats()`` counters — plus, on request, the segment map and the allocation history as JSON.
The allocator reads ``PYTORCH_CUDA_ALLOC_CONF`` once, so every run gets its own fresh worker with the
setting from the config, and every row says which setting the child really saw.

On a CPU there is no caching allocator: the lifecycle and custom scenarios run with RSS and the
bytes of the live tensors, which show that CPU memory goes back at once.

The step language and its interpreter are :mod:`core.memory.steps`; the ``PYTORCH_CUDA_ALLOC_CONF``
checks :mod:`core.memory.alloc_conf`. This module holds the config, the scenarios, the recorder and the run.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Literal

from core.errors import ConfigError
from core.experiment import Context, Experiment, Output, Progress
from core.hardware import memory
from core.measure import history
from core.memory.alloc_conf import ASYNC_BACKEND, ENV_KEYS, parse_alloc_conf, seen_setting, settings_not_applied
from core.memory.segments import segment_view
from core.memory.steps import MAX_SIZE_MIB, Step, StepOutOfMemory, Workspace, parse_step, validate_steps
from core.rows.allocator import AllocatorStep, BackwardPeak, HistoryEvent, Segment
from core.text import first_line
from core.units import MIB, bytes_text

MAX_HISTORY_ENTRIES = 100_000
SEED_BACKWARD_CLAIMS = {"y = 5*x; y.mean().backward()": 4.0, "(5*x).mean().backward()": 3.0}

Scenario = Literal["lifecycle", "backward-peak", "fragmentation", "custom"]
SCENARIOS: tuple[str, ...] = ("lifecycle", "backward-peak", "fragmentation", "custom")
GPU_ONLY_SCENARIOS = ("backward-peak", "fragmentation")


@dataclass(frozen=True)
class AllocatorConfig:
    scenario: Scenario = field(default="lifecycle", metadata={"help": "scripted scenario"})
    size_mib: int = field(
        default=1024, metadata={"help": "tensor size in MiB for the built-in scenarios (the seed used 1 GiB)"}
    )
    steps: tuple[str, ...] = field(
        default=(), metadata={"help": "custom scenario steps, e.g. 'alloc a 256,alloc b 256,free a,empty_cache'"}
    )
    alloc_conf: str = field(
        default="", metadata={"help": "PYTORCH_CUDA_ALLOC_CONF for this run's fresh worker ('' = PyTorch's default)"}
    )
    segment_map: bool = field(default=True, metadata={"help": "record the segment map after every step (GPU)"})
    history_entries: int = field(
        default=0, metadata={"help": "record allocator history with this max_entries (0 = off; GPU)"}
    )

    def __post_init__(self) -> None:
        if self.scenario not in SCENARIOS:
            raise ConfigError(f"scenario must be one of {', '.join(SCENARIOS)}, got {self.scenario!r}")
        if not 1 <= self.size_mib <= MAX_SIZE_MIB:
            raise ConfigError(f"size_mib must be between 1 and {MAX_SIZE_MIB}, got {self.size_mib}")
        if self.scenario == "fragmentation" and (self.size_mib < 16 or self.size_mib % 8):
            raise ConfigError(
                f"fragmentation needs size_mib ≥ 16 and a multiple of 8 (eight equal pieces), got {self.size_mib}"
            )
        if self.steps and self.scenario != "custom":
            raise ConfigError("steps are only for the custom scenario")
        if not 0 <= self.history_entries <= MAX_HISTORY_ENTRIES:
            raise ConfigError(
                f"history_entries must be between 0 and {MAX_HISTORY_ENTRIES}, got {self.history_entries}"
            )
        parse_alloc_conf(self.alloc_conf)
        validate_steps(scenario_steps(self))


def scenario_steps(cfg: AllocatorConfig) -> list[Step]:
    """The steps a config runs; built-in scenarios carry the seed's code as their labels."""
    s = cfg.size_mib
    if cfg.scenario == "custom":
        return [parse_step(text, i) for i, text in enumerate(cfg.steps, 1)]
    if cfg.scenario == "lifecycle":
        return [
            Step("alloc", ("a", s), f"a = zeros({s} MiB)"),
            Step("alloc", ("b", s), f"b = zeros({s} MiB)"),
            Step("to_cpu", ("b",), "b = b.to('cpu')"),
            Step("alloc", ("c", s), f"c = zeros({s} MiB)"),
            Step("alloc", ("c", s), f"c = zeros({s} MiB) again"),
            Step("alloc", ("d", s), f"d = zeros({s} MiB)"),
            Step("free", ("d",), "del d"),
            Step("alloc_cpu", ("e", s), f"e = zeros({s} MiB, device='cpu')"),
            Step("to_device", ("e",), "e = e.to(device)"),
            Step("empty_cache", (), "empty_cache()"),
        ]
    if cfg.scenario == "backward-peak":
        return [
            Step("reset_peak", (), "A: reset peak"),
            Step("alloc_grad", ("x", s), f"A: x = zeros({s} MiB, requires_grad)"),
            Step("scale", ("y", "x"), "A: y = 5*x"),
            Step("backward", ("y",), "A: y.mean().backward()"),
            Step("free", ("y",), "A: del y"),
            Step("free", ("x",), "A: del x (and x.grad)"),
            Step("reset_peak", (), "B: reset peak"),
            Step("alloc_grad", ("x", s), f"B: x = zeros({s} MiB, requires_grad)"),
            Step("scale_backward", ("x",), "B: (5*x).mean().backward()"),
            Step("free", ("x",), "B: del x (and x.grad)"),
        ]
    piece = s // 8
    steps = [
        Step("alloc", ("big", s), f"big = zeros({s} MiB)"),
        Step("free", ("big",), "del big (segment stays cached)"),
    ]
    steps += [Step("alloc", (f"p{i}", piece), f"p{i} = zeros({piece} MiB)") for i in range(8)]
    steps += [Step("free", (f"p{i}",), f"del p{i}") for i in (0, 2, 4, 6)]
    steps += [
        Step("alloc", ("q", 2 * piece), f"q = zeros({2 * piece} MiB): no hole fits"),
        Step("empty_cache", (), "empty_cache()"),
    ]
    return steps


# The autograd arithmetic behind the backward-peak forms, in units of size(x): x, y = 5*x, the
# gradient of y (MeanBackward materialises grad/numel), and x.grad (MulBackward: grad_y * 5).
BACKWARD_FORMS = (
    {"form": "y = 5*x; y.mean().backward()", "phase": "A", "tensors": ("x", "y", "grad of y", "x.grad")},
    {"form": "(5*x).mean().backward()", "phase": "B", "tensors": ("x", "grad of 5*x", "x.grad")},
)

LIFECYCLE_SEED_CLAIMS = (  # what seed 001 read from nvidia-smi after each step (1 unit = the tensor size)
    "host +1 GB, device +1.7 GB (the 0.7 is PyTorch's own set-up)",
    "host unchanged, device +1 GB",
    "host +1 GB, device only −0.1 GB: copied, not freed",
    "host unchanged, device +0.1 GB: b's old place is re-used",
    "host unchanged, device +1 GB: the new c is built before the old one goes",
    "host unchanged, device unchanged: d lands in old c's place",
    "host unchanged, device unchanged: del frees nothing to the driver",
    "host +1 GB, device unchanged",
    "host −1 GB at once, device unchanged: e re-uses d's place",
    "(not in the seed) cached segments go back to the driver",
)


def _host_guard(nbytes: int, what: str) -> None:
    """Refuse a CPU allocation the host cannot give: RAM available less the lab's reserve, within the job's
    memory cap (:func:`core.hardware.memory.budget`).

    On a CPU an over-large request does not raise: the OS kills the process (or a neighbour). So
    the step stops here, honestly labelled, instead of being attempted.
    """
    room = memory.budget("cpu")
    if nbytes > room.bytes:
        raise StepOutOfMemory(
            f"out of memory (host): {what} needs {bytes_text(nbytes)} but {room.source} "
            f"(the OS would kill the process instead of raising)"
        )


def check_size(size_mib: int, free_bytes: int | None) -> None:
    """The page's cap: one tensor may not be larger than the device's free memory."""
    if free_bytes is not None and size_mib * MIB > free_bytes:
        raise ConfigError(
            f"size {size_mib} MiB is more than the {free_bytes // MIB} MiB free on this device "
            f"(the limit for one tensor)"
        )


def _max_rss_bytes() -> int:
    """The process's RSS high-water mark (Linux reports KiB): it catches a step's transient peak."""
    import resource
    import sys

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


ASYNC_NOTE = (
    "backend:cudaMallocAsync keeps no block list, so torch refuses memory snapshots with it ('Calling "
    "snapshot with backend:cudaMallocAsync is not meaningful'): no segment map, fragmentation numbers or "
    "allocation history in this run; allocated/reserved/peak and the driver's numbers are measured"
)


def _setting_text(env: dict[str, str | None]) -> str:
    value = env.get("PYTORCH_ALLOC_CONF") or env.get("PYTORCH_CUDA_ALLOC_CONF")
    return value or "default"


class _Recorder:
    """Reads every counter after a step; CUDA-only fields are None on a CPU (not zero)."""

    def __init__(self, torch, ctx: Context, cfg: AllocatorConfig) -> None:
        import psutil

        self.torch, self.ctx, self.cfg = torch, ctx, cfg
        self.process = psutil.Process()
        self.setting = _setting_text(seen_setting())
        self._last_trace_us = -1
        self._trace_budget = cfg.history_entries
        # What the allocator itself says it runs with (the variable alone can be silently ignored).
        self.backend = torch.cuda.memory.get_allocator_backend() if ctx.is_cuda else None
        self.snapshots = self.backend != ASYNC_BACKEND
        self.reported_settings: dict | None = None

    def settings_report(self) -> dict:
        """For the run's meta: the backend and settings the allocator reported, and what it ignored."""
        if not self.ctx.is_cuda:
            return {}
        report = {
            "allocator_backend": self.backend,
            "allocator_settings_reported": self.reported_settings,
            "alloc_conf_not_applied": settings_not_applied(
                parse_alloc_conf(self.cfg.alloc_conf), self.backend, self.reported_settings
            ),
        }
        if not self.snapshots:
            report["snapshot_note"] = ASYNC_NOTE
        return report

    def start_history(self) -> None:
        if self.ctx.is_cuda and self.cfg.history_entries and self.snapshots:
            history.start(self.torch, self.cfg.history_entries)

    def stop_history(self) -> None:
        if self.ctx.is_cuda and self.cfg.history_entries and self.snapshots:
            history.stop(self.torch)

    def row(self, index: int, step: Step | None, ws: Workspace, status: str = "ok", note: str = "") -> AllocatorStep:
        device_bytes, host_bytes = ws.live_bytes()
        return AllocatorStep(
            index=index,
            step=f"{index}. {step.title}" if step else "0. start",
            op=step.text if step else "",
            status=status,
            note=note,
            alloc_conf_seen=self.setting,
            rss_bytes=self.process.memory_info().rss,
            max_rss_bytes=_max_rss_bytes(),
            live_device_bytes=device_bytes,
            live_host_bytes=host_bytes,
            **(self._cuda_fields() if self.ctx.is_cuda else {}),  # a CPU's are None: not measured
        )

    def _cuda_fields(self) -> dict:
        cuda, dev = self.torch.cuda, self.torch.device(self.ctx.device)
        cuda.synchronize(dev)
        free, total = cuda.mem_get_info(dev)
        stats = cuda.memory_stats(dev)
        out = {
            "allocated_bytes": cuda.memory_allocated(dev),
            "reserved_bytes": cuda.memory_reserved(dev),
            "peak_allocated_bytes": cuda.max_memory_allocated(dev),
            "driver_used_bytes": total - free,
            "driver_total_bytes": total,
            "segments": stats.get("segment.all.current"),
            "alloc_count": stats.get("allocation.all.allocated"),
            "free_count": stats.get("allocation.all.freed"),
            "inactive_split_bytes": stats.get("inactive_split_bytes.all.current"),
            "alloc_retries": stats.get("num_alloc_retries"),
            "ooms": stats.get("num_ooms"),
            "device_alloc_count": stats.get("num_device_alloc"),
            "device_free_count": stats.get("num_device_free"),
        }
        if not self.snapshots:
            return out | dict.fromkeys(
                ("largest_free_block_bytes", "free_in_reserved_bytes", "fragmentation_ratio", "segment_map", "trace")
            )
        snapshot = cuda.memory._snapshot()
        if self.reported_settings is None:
            self.reported_settings = snapshot.get("allocator_settings")
        segments = [s for s in snapshot.get("segments", []) if s.get("device", dev.index or 0) == (dev.index or 0)]
        compact, numbers = segment_view(segments)
        out.update(numbers)
        out["segment_map"] = tuple(map(Segment.from_dict, compact)) if self.cfg.segment_map else None
        out["trace"] = self._new_trace(snapshot) if self.cfg.history_entries else None
        return out

    def _new_trace(self, snapshot: dict) -> tuple[HistoryEvent, ...]:
        """History entries since the previous step as [time_us, action, size], within the run's budget."""
        traces = snapshot.get("device_traces") or [[]]
        index = self.torch.device(self.ctx.device).index or 0
        fresh = [e for e in (traces[index] if index < len(traces) else []) if e.get("time_us", 0) > self._last_trace_us]
        if fresh:
            self._last_trace_us = max(e.get("time_us", 0) for e in fresh)
        kept = fresh[: max(0, self._trace_budget)]
        self._trace_budget -= len(kept)
        return tuple(HistoryEvent(e.get("time_us", 0), e.get("action", ""), e.get("size", 0)) for e in kept)


def _is_oom(exc: BaseException) -> bool:
    """The lab's own host refusal, or any allocation failure torch or a CUDA library reports."""
    return isinstance(exc, StepOutOfMemory) or memory.allocation_failure(exc) is not None


def _backward_summary(rows: list[AllocatorStep], x_bytes: int) -> list[BackwardPeak]:
    """Peak over each form (allocated at its reset → highest peak) as a multiple of size(x)."""
    out = []
    for form in BACKWARD_FORMS:
        phase = [r for r in rows if r.step.split(". ", 1)[-1].startswith(form["phase"] + ":")]
        if not phase or phase[0].allocated_bytes is None:
            continue
        peak = max(r.peak_allocated_bytes or 0 for r in phase) - phase[0].allocated_bytes
        out.append(
            BackwardPeak(
                form=form["form"],
                x_bytes=x_bytes,
                peak_bytes=peak,
                peak_over_x=peak / x_bytes,
                seed_claim_over_x=SEED_BACKWARD_CLAIMS[form["form"]],
                autograd_count_over_x=len(form["tensors"]),
                autograd_tensors=", ".join(form["tensors"]),
            )
        )
    return out


def run(cfg: AllocatorConfig, ctx: Context):
    import torch

    if not ctx.is_cuda and cfg.scenario in GPU_ONLY_SCENARIOS:
        raise ctx.unsupported(
            f"the {cfg.scenario} scenario reads the CUDA caching allocator's counters "
            f"(memory_allocated, max_memory_allocated, memory_snapshot); a CPU has none — "
            f"run lifecycle or custom here"
        )
    steps = scenario_steps(cfg)
    ctx.check_fits(validate_steps(steps) * MIB, f"the {cfg.scenario} scenario (its tensors at their largest)")
    recorder = _Recorder(torch, ctx, cfg)
    ws = Workspace(torch, ctx.device, _host_guard)
    if ctx.is_cuda:
        torch.cuda.init()  # the context exists before the first row, so step 1 shows only its tensor
        torch.cuda.reset_peak_memory_stats(ctx.device)
    recorder.start_history()
    total = len(steps)
    baseline = "baseline" + (" (CUDA context created)" if ctx.is_cuda else "")
    rows = [recorder.row(0, None, ws, note=baseline + ("" if recorder.snapshots else f"; {ASYNC_NOTE}"))]
    yield Progress(0, total, "baseline", rows=(rows[0].to_row(),))
    try:
        for i, step in enumerate(steps, 1):
            try:
                note = ws.run(step)
            except BaseException as exc:  # noqa: BLE001 - only out-of-memory is turned into a stop
                if not _is_oom(exc):
                    raise
                first = first_line(exc, limit=10_000)
                row = recorder.row(i, step, ws, status="oom", note=first)
                yield Progress(i, total, f"out of memory at step {i}", rows=(row.to_row(),))
                raise StepOutOfMemory(
                    f"out of memory at step {i}/{total} '{step.title}', the scenario stopped there — {first}"
                ) from None
            row = recorder.row(i, step, ws, note=note)
            if cfg.scenario == "lifecycle":
                row = dataclasses.replace(row, seed_claim=LIFECYCLE_SEED_CLAIMS[i - 1])
            rows.append(row)
            yield Progress(i, total, step.title, rows=(row.to_row(),))
    finally:
        recorder.stop_history()
        ws.tensors.clear()
    meta: dict = {
        "scenario": cfg.scenario,
        "steps": [s.text for s in steps],
        "alloc_conf_requested": cfg.alloc_conf,
        "alloc_conf_seen": recorder.setting,
        "alloc_conf_env": seen_setting(),
        "pid": os.getpid(),
        "planned_peak_device_mib_estimate": validate_steps(steps),
        **recorder.settings_report(),
    }
    if cfg.scenario == "backward-peak":
        meta["backward_peak"] = [b.to_dict() for b in _backward_summary(rows, cfg.size_mib * MIB)]
    return Output(rows=[r.to_row() for r in rows], meta=meta)


def worker_env(cfg: AllocatorConfig) -> dict[str, str]:
    """Both names torch reads, set to the run's setting ('' = default, overriding the parent's)."""
    return {key: cfg.alloc_conf for key in ENV_KEYS}


EXPERIMENTS = [
    Experiment(
        name="allocator",
        title="Allocator lab",
        config_type=AllocatorConfig,
        run=run,
        description=(__doc__ or "").partition("\n")[0],
        fresh_process=True,
        worker_env=worker_env,
    )
]

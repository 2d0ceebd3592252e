"""``interconnect``: host↔GPU copies, the GPU×GPU peer matrix and collectives (algbw, busbw) through torchrun.

Three parts, each optional:

* **copy** — host→device and device→host bandwidth per GPU, pinned against pageable host memory;
* **peer** — a copy between every ordered pair of GPUs, with whether peer access is possible
  (``torch.cuda.can_device_access_peer``), as CUDA's p2pBandwidthLatencyTest;
* **collectives** — all_reduce, all_gather, reduce_scatter, broadcast and all_to_all over message
  sizes (1 KiB…1 GiB on GPUs), NCCL between the GPUs or Gloo between CPU processes, with nccl-tests'
  algbw and busbw. The ranks are real processes started by torch's elastic launcher (what torchrun
  runs), one per GPU or 2…N on the CPU; see :mod:`core.distributed`.

A GPU run uses every GPU of the box, so it runs on cuda:0 and holds the lab's lock of every GPU
(jobs on any of them wait). What the device cannot run is a row with the reason, never a gap.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Literal

import torch

from core.distributed.collectives import (
    COLLECTIVES,
    CPU_SIZES,
    GPU_SIZES,
    MAX_BYTES,
    PROCESS_OVERHEAD_BYTES,
    buffer_bytes,
    host_bytes_needed,
    resolve_backend,
    row_text,
)
from core.experiment import ConfigError, Context, Experiment, Output, Progress, check_choices, config_to_dict
from core.measure.timing import TimingPlan
from core.units import bytes_text, exact_size_text, parse_size

PARTS = ("copy", "peer", "collectives")
Backend = Literal["auto", "nccl", "gloo"]
MAX_WORLD = 64
DIRECTIONS = ("h2d", "d2h")


@dataclass(frozen=True)
class InterconnectConfig:
    parts: tuple[str, ...] = field(
        default=PARTS, metadata={"help": "what to measure: copy (host↔GPU), peer (GPU×GPU matrix), collectives"}
    )
    backend: Backend = field(
        default="auto",
        metadata={
            "help": "collectives between GPUs (nccl) or CPU processes (gloo); auto: NCCL when the job runs on a GPU"
        },
    )
    world_size: int = field(
        default=0,
        metadata={"help": "ranks on this box: 0 = one per GPU for NCCL, 2 for Gloo (torchrun by hand sets its own)"},
    )
    collectives: tuple[str, ...] = field(default=COLLECTIVES, metadata={"help": "collectives to time"})
    sizes: tuple[str, ...] = field(
        default=(),
        metadata={
            "help": "message sizes (bytes, KiB, MiB, GiB), e.g. 1KiB,1MiB,1GiB; empty = GPU 1 KiB…1 GiB, "
            "CPU 1 KiB…16 MiB, ×4 steps"
        },
    )
    copy_sizes: tuple[str, ...] = field(default=("1MiB", "64MiB", "256MiB"), metadata={"help": "host↔GPU copy sizes"})
    peer_size: str = field(default="256MiB", metadata={"help": "bytes per GPU→GPU copy of the peer matrix"})
    warmup_ms: float = field(default=20.0, metadata={"help": "time-based warm-up per point"})
    rep_ms: float = field(default=100.0, metadata={"help": "timed calls per point fill about this long"})
    min_reps: int = field(default=10, metadata={"help": "timed calls per point, at least"})
    max_reps: int = field(default=200, metadata={"help": "timed calls per point, at most"})
    timeout_s: float = field(
        default=120.0, metadata={"help": "a collective that waits longer for a rank ends the job, naming that rank"}
    )
    seed: int = field(default=0, metadata={"help": "random seed of the inputs"})

    def __post_init__(self) -> None:
        check_choices("parts", self.parts, PARTS)
        check_choices("collectives", self.collectives, COLLECTIVES)
        for name in ("sizes", "copy_sizes"):
            for text in getattr(self, name):
                _size(name, text)
        _size("peer_size", self.peer_size)
        if not 0 <= self.world_size <= MAX_WORLD:
            raise ConfigError(f"world_size must be 0 (automatic) or 1…{MAX_WORLD}, got {self.world_size}")
        if not 0 <= self.warmup_ms <= 60_000 or not 0 < self.rep_ms <= 600_000:
            raise ConfigError("warmup_ms must be 0…60000 and rep_ms 0…600000 (exclusive of 0)")
        if not 1 <= self.min_reps <= self.max_reps <= 100_000:
            raise ConfigError("need 1 ≤ min_reps ≤ max_reps ≤ 100000")
        if not 1 <= self.timeout_s <= 3600:
            raise ConfigError(f"timeout_s must be 1…3600, got {self.timeout_s:g}")
        if self.backend == "gloo" and "collectives" in self.parts:
            check_host_memory(self, self.world_size or 2)

    @property
    def plan(self) -> TimingPlan:
        return TimingPlan(self.warmup_ms, self.rep_ms, self.min_reps, self.max_reps)


def _size(name: str, text: str) -> int:
    try:
        nbytes = parse_size(text)
    except ValueError as exc:
        raise ConfigError(f"{name}: {exc}") from None
    if not 4 <= nbytes <= MAX_BYTES:
        raise ConfigError(f"{name}: {text} is outside 4 B…{exact_size_text(MAX_BYTES)}")
    return nbytes


def sizes_for(cfg: InterconnectConfig, is_cuda: bool) -> tuple[int, ...]:
    """Message sizes in bytes, the device's defaults where the config gives none."""
    return tuple(parse_size(s) for s in cfg.sizes) or (GPU_SIZES if is_cuda else CPU_SIZES)


def check_host_memory(cfg: InterconnectConfig, world: int) -> None:
    """Gloo ranks on one box share its RAM: refuse sizes whose buffers × world size do not fit."""
    from core.hardware.memory import available_ram

    largest = max(sizes_for(cfg, False))
    per_rank = max(buffer_bytes(c, largest, world) for c in cfg.collectives)
    need = host_bytes_needed(per_rank, world)
    available = available_ram()
    if available and need > 0.8 * available:
        raise ConfigError(
            f"sizes: {exact_size_text(largest)} with {world} Gloo ranks needs {bytes_text(need)} of host memory "
            f"({bytes_text(per_rank)} of buffers per rank — the message, the result and a check copy — plus "
            f"{exact_size_text(PROCESS_OVERHEAD_BYTES)} per process); {bytes_text(available)} is available: "
            f"choose smaller sizes or fewer ranks"
        )


# --- what runs where -------------------------------------------------------------------------------------


def _gpu_count() -> int:
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def _hold_gpus(indices: list[int], stack: ExitStack, total: int) -> Iterator[Progress]:
    """Take the lab's lock of every other GPU the run uses, in index order (this worker holds cuda:0)."""
    from core.worker import try_lock

    for i in indices:
        while (fd := try_lock(f"cuda:{i}")) is None:
            yield Progress(0, total, f"waiting for cuda:{i}: another GPU Lab job is running on it")
            time.sleep(0.5)
        stack.callback(os.close, fd)


def _not_measured(kind: str, reason: str) -> dict:
    return {"kind": kind, "status": "unsupported", "reason": reason}


def _plan_points(cfg: InterconnectConfig, ctx: Context, gpus: int) -> dict[str, int]:
    counts = {
        "copy": gpus * len(cfg.copy_sizes) * 4 if ctx.is_cuda else 1,
        "peer": gpus * gpus if ctx.is_cuda and gpus > 1 else 1,
        "collectives": len(cfg.collectives) * len(sizes_for(cfg, ctx.is_cuda)),
    }
    return {part: counts[part] for part in cfg.parts}


def run(cfg: InterconnectConfig, ctx: Context):
    from core.distributed.launch import run_ranks
    from core.distributed.rank import backend_problem
    from core.measure.copies import host_copy, peer_copy

    backend = resolve_backend(cfg.backend, ctx.is_cuda)
    gpus = _gpu_count()
    if "collectives" in cfg.parts:
        problem = backend_problem(backend)
        if problem:
            raise ctx.unsupported(problem)
        if backend == "nccl" and not ctx.is_cuda:
            raise ConfigError("backend nccl runs on the GPUs: choose device cuda:0 (or auto)")
    if ctx.is_cuda and ctx.device != "cuda:0":
        raise ConfigError(
            f"interconnect uses every GPU of the box from cuda:0 up; run it on cuda:0 (or auto), not {ctx.device}"
        )
    world = cfg.world_size or (gpus if backend == "nccl" else 2)
    if backend == "nccl" and world > gpus:
        raise ConfigError(f"world_size {world}: NCCL runs one rank per GPU and this box has {gpus}")
    if backend == "gloo" and cfg.backend == "auto" and "collectives" in cfg.parts:
        check_host_memory(cfg, world)  # an explicit gloo was checked when the config was made
    counts = _plan_points(cfg, ctx, gpus)
    total = sum(counts.values())
    rows: list[dict] = []
    done = [0]  # finished points (a collective point brings one row per rank besides its own)
    meta: dict = {"parts": list(cfg.parts), "gpus": gpus, "backend": backend, "world_size": world, "points": counts}

    def add(new: list[dict], message: str) -> Progress:
        rows.extend(new)
        done[0] += 1
        return Progress(done[0], total, message, rows=tuple(new))

    with ExitStack() as locks:
        if ctx.is_cuda:
            yield from _hold_gpus(list(range(1, gpus)), locks, total)
        if "copy" in cfg.parts:
            if not ctx.is_cuda:
                yield add(
                    [
                        _not_measured(
                            "host_copy",
                            ctx.unsupported("host↔GPU copies need the job on a CUDA GPU (device cuda:0)").args[0],
                        )
                    ],
                    "host copies: unsupported",
                )
            for gpu in range(gpus if ctx.is_cuda else 0):
                for text in cfg.copy_sizes:
                    for direction in DIRECTIONS:
                        for pinned in (True, False):
                            row = host_copy(gpu, parse_size(text), direction, pinned, cfg.plan)
                            yield add(
                                [row],
                                f"cuda:{gpu} {direction} {row['memory']} {exact_size_text(row['bytes'])}: "
                                f"{row['gbs']:.1f} GB/s",
                            )
            meta["copy_timer"] = "CUDA events per call (pinned copies are asynchronous, pageable ones staged)"
        if "peer" in cfg.parts:
            if not ctx.is_cuda or gpus < 2:
                why = (
                    "needs at least 2 CUDA GPUs and the job runs on the CPU"
                    if not ctx.is_cuda
                    else f"needs at least 2 CUDA GPUs; this box has {gpus}"
                )
                yield add(
                    [_not_measured("peer", ctx.unsupported(f"the peer matrix {why}").args[0])],
                    "peer matrix: unsupported",
                )
            else:
                nbytes = parse_size(cfg.peer_size)
                for src in range(gpus):
                    for dst in range(gpus):
                        row = peer_copy(src, dst, nbytes, cfg.plan)
                        yield add([row], f"cuda:{src} → cuda:{dst}: {row['gbs']:.1f} GB/s ({row['path']})")
            if ctx.is_cuda:
                torch.cuda.empty_cache()  # the ranks need the memory
        if "collectives" in cfg.parts:
            events = run_ranks(config_to_dict(cfg) | {"backend": backend, "world_size": world}, world, cfg.timeout_s)
            try:
                while True:
                    try:
                        event = next(events)
                    except StopIteration as stop:
                        meta.update(stop.value or {})
                        break
                    if event.get("type") == "step":
                        yield Progress(done[0], total, f"{event['label']} on {world} ranks ({backend})")
                    elif event.get("type") == "rows":
                        yield add(event["rows"], row_text(event["rows"][0]))
            finally:
                events.close()  # a cancelled job stops its ranks
    return Output(rows=rows, meta=meta)


EXPERIMENTS = [
    Experiment(
        name="interconnect",
        title="Interconnect",
        config_type=InterconnectConfig,
        run=run,
        description=__doc__.splitlines()[0],
        fresh_process=True,
    )
]

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

from core.distributed.config import InterconnectConfig, check_host_memory, sizes_for
from core.errors import ConfigError
from core.experiment import Context, Experiment, Output, Progress, config_to_dict
from core.rows.interconnect import CollectivePoint, HostCopy, PeerCopy, unsupported_row
from core.units import exact_size_text, parse_size

DIRECTIONS = ("h2d", "d2h")


# --- what runs where -------------------------------------------------------------------------------------


def _gpu_count() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def _hold_gpus(indices: list[int], stack: ExitStack, total: int) -> Iterator[Progress]:
    """Take the lab's lock of every other GPU the run uses, in index order (this worker holds cuda:0)."""
    from core.locks import try_lock

    for i in indices:
        while (fd := try_lock(f"cuda:{i}")) is None:
            yield Progress(0, total, f"waiting for cuda:{i}: another GPU Lab job is running on it")
            time.sleep(0.5)
        stack.callback(os.close, fd)


def _plan_points(cfg: InterconnectConfig, ctx: Context, gpus: int) -> dict[str, int]:
    counts = {
        "copy": gpus * len(cfg.copy_sizes) * 4 if ctx.is_cuda else 1,
        "peer": gpus * gpus if ctx.is_cuda and gpus > 1 else 1,
        "collectives": len(cfg.collectives) * len(sizes_for(cfg, ctx.is_cuda)),
    }
    return {part: counts[part] for part in cfg.parts}


def _world(cfg: InterconnectConfig, ctx: Context, backend: str, gpus: int) -> int:
    """The number of ranks, after refusing what this box cannot run (before anything runs)."""
    from core.distributed.rank import backend_problem

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
    return world


@dataclass
class _Tally:
    """The run's rows and finished points (a collective point brings one row per rank besides its own)."""

    total: int
    rows: list[dict] = field(default_factory=list)
    done: int = 0

    def add(self, new: list[dict], message: str) -> Progress:
        self.rows.extend(new)
        self.done += 1
        return Progress(self.done, self.total, message, rows=tuple(new))


def _copies(cfg: InterconnectConfig, ctx: Context, gpus: int, tally: _Tally) -> Iterator[Progress]:
    """Host→device and device→host, pinned and pageable, per GPU and size."""
    from core.measure.copies import host_copy

    if not ctx.is_cuda:
        reason = ctx.unsupported("host↔GPU copies need the job on a CUDA GPU (device cuda:0)").args[0]
        yield tally.add([unsupported_row(HostCopy, reason)], "host copies: unsupported")
    for gpu in range(gpus if ctx.is_cuda else 0):
        for text in cfg.copy_sizes:
            for direction in DIRECTIONS:
                for pinned in (True, False):
                    c = HostCopy.from_row(host_copy(gpu, parse_size(text), direction, pinned, cfg.plan))
                    said = f"cuda:{gpu} {direction} {c.memory} {exact_size_text(c.nbytes)}: {c.gbs or 0:.1f} GB/s"
                    yield tally.add([c.to_row()], said)


def _peers(cfg: InterconnectConfig, ctx: Context, gpus: int, tally: _Tally) -> Iterator[Progress]:
    """A copy between every ordered pair of GPUs."""
    from core.measure.copies import peer_copy

    if not ctx.is_cuda or gpus < 2:
        why = (
            "needs at least 2 CUDA GPUs and the job runs on the CPU"
            if not ctx.is_cuda
            else f"needs at least 2 CUDA GPUs; this box has {gpus}"
        )
        reason = ctx.unsupported(f"the peer matrix {why}").args[0]
        yield tally.add([unsupported_row(PeerCopy, reason)], "peer matrix: unsupported")
    else:
        nbytes = parse_size(cfg.peer_size)
        for src in range(gpus):
            for dst in range(gpus):
                c = PeerCopy.from_row(peer_copy(src, dst, nbytes, cfg.plan))
                yield tally.add([c.to_row()], f"cuda:{src} → cuda:{dst}: {c.gbs or 0:.1f} GB/s ({c.path})")
    if ctx.is_cuda:
        import torch

        torch.cuda.empty_cache()  # the ranks need the memory


def _collectives(cfg: InterconnectConfig, backend: str, world: int, tally: _Tally):
    """The collectives over ``world`` ranks started by the elastic launcher; returns the launcher's meta."""
    from core.distributed.events import RankRows, RankStep
    from core.distributed.launch import run_ranks

    events = run_ranks(config_to_dict(cfg) | {"backend": backend, "world_size": world}, world, cfg.timeout_s)
    try:
        while True:
            try:
                event = next(events)
            except StopIteration as stop:
                return stop.value or {}
            if isinstance(event, RankStep):
                yield Progress(tally.done, tally.total, f"{event.label} on {world} ranks ({backend})")
            elif isinstance(event, RankRows):
                yield tally.add(event.rows, CollectivePoint.from_row(event.rows[0]).text())
    finally:
        events.close()  # a cancelled job stops its ranks


def run(cfg: InterconnectConfig, ctx: Context):
    from core.distributed.collectives import resolve_backend

    backend = resolve_backend(cfg.backend, ctx.is_cuda)
    gpus = _gpu_count()
    world = _world(cfg, ctx, backend, gpus)
    counts = _plan_points(cfg, ctx, gpus)
    tally = _Tally(sum(counts.values()))
    meta: dict = {"parts": list(cfg.parts), "gpus": gpus, "backend": backend, "world_size": world, "points": counts}
    with ExitStack() as locks:
        if ctx.is_cuda:
            yield from _hold_gpus(list(range(1, gpus)), locks, tally.total)
        if "copy" in cfg.parts:
            yield from _copies(cfg, ctx, gpus, tally)
            meta["copy_timer"] = "CUDA events per call (pinned copies are asynchronous, pageable ones staged)"
        if "peer" in cfg.parts:
            yield from _peers(cfg, ctx, gpus, tally)
        if "collectives" in cfg.parts:
            meta.update((yield from _collectives(cfg, backend, world, tally)))
    return Output(rows=tally.rows, meta=meta)


EXPERIMENTS = [
    Experiment(
        name="interconnect",
        title="Interconnect",
        config_type=InterconnectConfig,
        run=run,
        description=(__doc__ or "").partition("\n")[0],
        fresh_process=True,
    )
]

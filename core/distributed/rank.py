"""The program every rank of an interconnect job runs: ``python -m core.distributed.rank`` under the lab's launcher.

Two ways in, one measurement:

* **The lab starts it** (:mod:`core.distributed.launch`, from a worker) with ``--events FILE --config
  JSON``: this module's :func:`main`. Every rank appends JSON lines to FILE: rank 0 its rows as each
  point finishes and its metadata at the end, any rank the error that stopped it. The worker turns
  them into progress and the stored run.
* **A user starts it with torchrun on every box** of a multi-box job: ``torchrun … -m core.cli.rank``
  with the interconnect options, which runs :func:`run_rank` here with a sink that stores and prints
  the run (:mod:`core.cli.rank`).

A rank that raises (a peer died, a collective timed out) reads the other ranks' progress from the
rendezvous store first, so its error names the ranks that stopped responding. Every rank dies with
the launcher that started it (``PR_SET_PDEATHSIG``, asked for by :mod:`core.distributed.rank_entry` or
:mod:`core.cli.rank` before torch is imported): no rank outlives a killed job.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import socket
import sys
import threading
import time
from datetime import timedelta

import torch
import torch.cuda.nccl  # torch.cuda does not import its nccl submodule itself
import torch.distributed as dist

from core.distributed.collectives import (
    Comm,
    buffer_bytes,
    host_bytes_needed,
    make_point,
    measure,
    not_measured_row,
    point_rows,
    resolve_backend,
    unsupported_reason,
)
from core.distributed.config import InterconnectConfig, sizes_for
from core.distributed.events import RankAlive, RankDone, RankError, RankRows, RankStart, RankStep
from core.errors import ConfigError
from core.experiment import config_from_dict
from core.hardware.device import cuda_unavailable_reason
from core.hardware.memory import available_ram
from core.jsonable import json_ready
from core.protocol import Message
from core.units import bytes_text, exact_size_text

HEARTBEAT_S = 5.0
PEER_ERROR_GRACE_S = 2.0  # let the other waiting ranks post their own errors before judging who stalled


# --- where this rank sits -----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class RankEnv:
    """What torchrun tells each rank (its environment variables)."""

    rank: int
    world: int
    local_rank: int
    local_world: int
    group_rank: int  # the node's rank: distinct values = nodes
    run_id: str
    master_addr: str
    master_port: int

    @classmethod
    def from_environ(cls, environ=os.environ) -> RankEnv:
        missing = [k for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT") if k not in environ]
        if missing:
            raise ConfigError(
                f"no torchrun environment ({', '.join(missing)} unset): start this program with "
                f"torchrun … -m core.cli.rank, or run python -m core interconnect"
            )
        return cls(
            rank=int(environ["RANK"]),
            world=int(environ["WORLD_SIZE"]),
            local_rank=int(environ["LOCAL_RANK"]),
            local_world=int(environ.get("LOCAL_WORLD_SIZE", environ["WORLD_SIZE"])),
            group_rank=int(environ.get("GROUP_RANK", 0)),
            run_id=environ.get("TORCHELASTIC_RUN_ID", "none"),
            master_addr=environ["MASTER_ADDR"],
            master_port=int(environ["MASTER_PORT"]),
        )


def backend_problem(backend: str) -> str | None:
    """Why this process cannot use ``backend``, or None."""
    if not dist.is_available():
        return f"this PyTorch ({torch.__version__}) was built without torch.distributed"
    if backend == "nccl":
        if not torch.cuda.is_available():
            return (
                f"NCCL runs collectives between CUDA GPUs and {cuda_unavailable_reason()}; Gloo runs them "
                f"between CPU processes (--backend gloo)"
            )
        if not dist.is_nccl_available():
            return f"this PyTorch ({torch.__version__}) was built without NCCL"
    if backend == "gloo" and not dist.is_gloo_available():
        return f"this PyTorch ({torch.__version__}) was built without Gloo"
    return None


def job_store(env: RankEnv, prefix: str, timeout_s: float):
    """This job's keys (under ``prefix/<run id>/``) in the rendezvous store torchrun or the launcher serves."""
    # Public (documented) classes that torch.distributed imports from torch._C without re-exporting them.
    base = dist.TCPStore(  # pyright: ignore[reportPrivateImportUsage]
        env.master_addr,
        env.master_port,
        is_master=False,
        wait_for_workers=False,
        timeout=timedelta(seconds=timeout_s),
    )
    return dist.PrefixStore(f"{prefix}/{env.run_id}/", base)  # pyright: ignore[reportPrivateImportUsage]


class Progress:
    """Each rank's position in the rendezvous store (``gpulab/<run>/step/<rank>``, ``…/error/<rank>``)."""

    def __init__(self, env: RankEnv, timeout_s: float) -> None:
        self.env = env
        self.store = job_store(env, "gpulab", timeout_s)
        self.step = -1
        self.label = "start-up"

    def begin(self, step: int, label: str) -> None:
        self.step, self.label = step, label
        self.store.set(f"step/{self.env.rank}", json.dumps({"step": step, "done": False}))

    def done(self, step: int) -> None:
        self.store.set(f"step/{self.env.rank}", json.dumps({"step": step, "done": True}))

    def error(self, message: str) -> None:
        self.store.set(f"error/{self.env.rank}", message)

    def stalled(self) -> list[int]:
        """Ranks that reported no error and did not finish the step this rank is stuck in."""
        out = []
        for q in range(self.env.world):
            if q == self.env.rank or self.store.check([f"error/{q}"]):
                continue
            state = json.loads(self.store.get(f"step/{q}")) if self.store.check([f"step/{q}"]) else {"step": -1}
            if state["step"] < self.step or (state["step"] == self.step and not state.get("done")):
                out.append(q)
        return out


# --- what rank 0 reports, and where ---------------------------------------------------------------------


def failure_text(event: RankError) -> str:
    """A rank's error event in words, naming the ranks that stopped responding where it knows them."""
    if event.unsupported:
        return event.message
    where = f" during {event.step}" if event.step else ""
    if event.stalled:
        who = ", ".join(map(str, event.stalled))
        return (
            f"rank{'s' if len(event.stalled) > 1 else ''} {who} stopped responding{where} (no error reported: "
            f"died or hung); rank {event.rank} gave up: {event.message}"
        )
    return f"rank {event.rank} failed{where}: {event.message}"


class FileSink:
    """The lab's launcher reads these lines (one ``os.write`` each on an O_APPEND file: lines never interleave).

    Rank 0 also writes an ``alive`` line every :data:`HEARTBEAT_S` from a thread, so the launcher's
    watchdog tells a long point from a frozen job.
    """

    def __init__(self, path: str, rank: int) -> None:
        self.rank = rank
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        if rank == 0:
            threading.Thread(target=self._beat, daemon=True, name="gpulab-heartbeat").start()

    def _beat(self) -> None:
        while True:
            time.sleep(HEARTBEAT_S)
            self.emit(RankAlive())

    def emit(self, event: Message) -> None:
        os.write(self._fd, (event.to_json() + "\n").encode())

    def start(self, meta: dict, total: int) -> None:
        if self.rank == 0:
            self.emit(RankStart(total, json_ready(meta)))

    def step(self, index: int, total: int, label: str) -> None:
        if self.rank == 0:
            self.emit(RankStep(index, total, label))

    def rows(self, index: int, total: int, rows: list[dict]) -> None:
        if self.rank == 0:
            self.emit(RankRows(index, total, json_ready(rows)))

    def done(self, meta: dict) -> None:
        if self.rank == 0:
            self.emit(RankDone(json_ready(meta)))

    def error(self, event: RankError) -> None:
        self.emit(event)


# --- the measurement ----------------------------------------------------------------------------------


def _memory_problem(point, comm: Comm, env: RankEnv) -> str | None:
    """Every rank's free memory against what the point needs; the same verdict on every rank."""
    need = buffer_bytes(point.collective, point.nbytes, env.world)
    if comm.is_cuda:
        free = torch.cuda.mem_get_info(comm.device)[0]
    else:  # the box's ranks share its RAM
        need = host_bytes_needed(need, env.local_world)
        free = available_ram() or float("inf")
    table = comm.all_floats([float(need), float(min(free, 2.0**62))])
    short = [r for r in range(env.world) if table[r, 0] > 0.9 * table[r, 1]]
    if not short:
        return None
    r = short[0]
    where = "its GPU" if comm.is_cuda else "its box (shared by the ranks there)"
    return f"needs {bytes_text(float(table[r, 0]))} on {where}; rank {r} has {bytes_text(float(table[r, 1]))} free"


def measure_all(cfg, env: RankEnv, sink, progress: Progress, backend: str, device: str) -> None:
    """Every (collective, size) point in order; rank 0 reports rows as they finish."""
    comm = Comm(env.rank, env.world, device)
    me = {
        "rank": env.rank,
        "host": socket.gethostname(),
        "group_rank": env.group_rank,
        "local_rank": env.local_rank,
        "device": device,
        "pid": os.getpid(),
    }
    if device.startswith("cuda"):
        me["device_name"] = torch.cuda.get_device_name(device)
    ranks: list = [None] * env.world
    dist.all_gather_object(ranks, me)
    sizes = sizes_for(cfg, device.startswith("cuda"))
    points = [make_point(c, s, env.world) for c in cfg.collectives for s in sizes]
    meta = {
        "backend": backend,
        "world_size": env.world,
        "nodes": len({r["group_rank"] for r in ranks}),
        "hosts": sorted({r["host"] for r in ranks}),
        "ranks": ranks,
        "collectives": list(cfg.collectives),
        "sizes_bytes": [p.nbytes for p in points[: len(sizes)]],
        "rendezvous_id": env.run_id,
        "timer": "CUDA events per call" if comm.is_cuda else "time.perf_counter_ns per call",
        "time_per_call": "the slowest rank's median; call_max_median_ms: median over calls of the slowest rank "
        "of each call",
        "busbw": "nccl-tests: all_reduce 2(n−1)/n, all_gather/reduce_scatter/all_to_all (n−1)/n, broadcast 1",
        "inputs": "fresh integer-valued float32 in ±1…±8 per point; the last timed call's output is checked "
        "value for value",
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "torch_threads": torch.get_num_threads(),
    }
    if backend == "nccl":
        meta["nccl_version"] = ".".join(map(str, torch.cuda.nccl.version()))
    sink.start(meta, len(points))
    for i, point in enumerate(points):
        progress.begin(i, point.label)
        sink.step(i, len(points), point.label)
        reason = _memory_problem(point, comm, env)
        if reason:
            rows = [
                not_measured_row(
                    point, backend, "unsupported", f"unsupported at {exact_size_text(point.nbytes)}: {reason}"
                )
            ]
        else:
            try:
                rows = point_rows(measure(point, comm, cfg.plan, cfg.seed * 1000 + i), backend, ranks)
            except (RuntimeError, NotImplementedError) as exc:
                why = unsupported_reason(exc)
                if why is None:
                    raise
                rows = [not_measured_row(point, backend, "unsupported", f"unsupported on {backend}: {why}")]
        progress.done(i)
        sink.rows(i, len(points), rows)
    sink.done(meta)


def run_rank(cfg, env: RankEnv, sink) -> int:
    """Join the job, measure, leave; on failure report it (naming stalled ranks) and re-raise."""
    backend = resolve_backend(cfg.backend, torch.cuda.is_available())
    problem = backend_problem(backend)
    if problem:
        sink.error(RankError(env.rank, f"unsupported: {problem}", unsupported=True))
        return 3
    device = f"cuda:{env.local_rank}" if backend == "nccl" else "cpu"
    if backend == "nccl":
        torch.cuda.set_device(device)
    dist.init_process_group(
        backend, timeout=timedelta(seconds=cfg.timeout_s), device_id=torch.device(device) if backend == "nccl" else None
    )
    progress = Progress(env, cfg.timeout_s)
    try:
        measure_all(cfg, env, sink, progress, backend, device)
    except BaseException as exc:
        if signal.getsignal(signal.SIGTERM) is terminated:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)  # let the report finish; the launcher SIGKILLs later
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:400]
        stalled: list[int] = []
        try:
            progress.error(first)
            time.sleep(PEER_ERROR_GRACE_S)
            stalled = progress.stalled()
        except BaseException:  # noqa: BLE001 - the store went away with the launcher
            pass
        sink.error(
            RankError(
                env.rank,
                first,
                stalled=stalled,
                step=progress.label,
                exception=type(exc).__name__,
                timeout_s=cfg.timeout_s,
            )
        )
        raise
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    return 0


# --- command line (the lab's launcher) ---------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m core.distributed.rank",
        description="One rank of an interconnect job started by the lab's launcher (by hand: torchrun … -m core.cli.rank).",
    )
    parser.add_argument("--events", required=True, help="the JSON-lines file every rank appends its events to")
    parser.add_argument("--config", required=True, help="the interconnect config as JSON")
    return parser


def terminated(signum, frame) -> None:
    """SIGTERM handler of a rank started by hand: torchrun stops the others when one fails."""
    raise SystemExit(
        f"stopped by the launcher ({signal.Signals(signum).name}): another rank failed or the job was cancelled"
    )


def main(argv: list[str] | None = None) -> int:
    """The lab's rank; :mod:`core.distributed.rank_entry` has made it die with its launcher before torch."""
    args = _parser().parse_args(argv)
    try:
        env = RankEnv.from_environ()
        cfg = config_from_dict(InterconnectConfig, json.loads(args.config))
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return run_rank(cfg, env, FileSink(args.events, env.rank))


if __name__ == "__main__":
    from torch.distributed.elastic.multiprocessing.errors import record

    sys.exit(record(main)())

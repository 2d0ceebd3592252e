"""One node of a cluster health check under torchrun: run the check here, send the rows to rank 0 through the
rendezvous store; rank 0 gathers every node's rows and stores ONE run (:mod:`core.health.fleet`).

Each node writes under ``gpulab-health/<run>/`` in torchrun's store (the same store the interconnect ranks
use): ``host/<node>``, ``step/<node>`` (what it is doing), ``rows/<node>`` (every row so far, after each
part), ``done/<node>`` and a heartbeat counter ``alive/<node>``. Rank 0 keeps what it read: a node whose
heartbeat stops for ``stale_s`` seconds, or that ends with an error, is failed and named, with the rows it
sent; if the store itself goes (its host's launcher ended), every unfinished node is failed the same way.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from datetime import timedelta

import torch.distributed as dist

from core.distributed.rank import RankEnv
from core.hardware.device import host_name
from core.health.fleet import NodeResult

HEARTBEAT_S = 2.0
POLL_S = 0.5


class Exchange:
    """This job's keys in torchrun's store."""

    def __init__(self, env: RankEnv, timeout_s: float = 60.0) -> None:
        self.env = env
        # Public (documented) classes that torch.distributed imports from torch._C without re-exporting them.
        base = dist.TCPStore(  # pyright: ignore[reportPrivateImportUsage]
            env.master_addr,
            env.master_port,
            is_master=False,
            wait_for_workers=False,
            timeout=timedelta(seconds=timeout_s),
        )
        self.store = dist.PrefixStore(f"gpulab-health/{env.run_id}/", base)  # pyright: ignore[reportPrivateImportUsage]

    def post(self, key: str, value) -> None:
        self.store.set(key, json.dumps(value, allow_nan=False))

    def read(self, key: str):
        return json.loads(self.store.get(key)) if self.store.check([key]) else None

    def beat(self, node: int) -> int:
        return int(self.store.add(f"alive/{node}", 1))

    def beats(self, node: int) -> int:
        return int(self.store.add(f"alive/{node}", 0))


class Heartbeat:
    """Tells rank 0 this node is alive, every :data:`HEARTBEAT_S`, until stopped."""

    def __init__(self, exchange: Exchange, node: int) -> None:
        self.exchange, self.node = exchange, node
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="health-heartbeat")

    def _loop(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            try:
                self.exchange.beat(self.node)
            except Exception:  # noqa: BLE001 - the store went away; rank 0 judges by what it has
                return

    def __enter__(self) -> Heartbeat:
        self.exchange.beat(self.node)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()


def nodes_of(env: RankEnv) -> int:
    return max(1, env.world // max(1, env.local_world))


def gather(
    exchange: Exchange, env: RankEnv, own: NodeResult, stale_s: float, on_progress: Callable[[str], None]
) -> list[NodeResult]:
    """Rank 0: every node's result, waiting for each until it is done, failed, or silent for ``stale_s``."""
    results = {n: NodeResult(n) for n in range(nodes_of(env))} | {own.node: own}
    seen = {n: (-1, time.monotonic()) for n in results}
    while True:
        waiting = [r for r in results.values() if r.status == "running"]
        if not waiting:
            return list(results.values())
        for r in waiting:
            try:
                r.host = (exchange.read(f"host/{r.node}") or {}).get("host", r.host)
                r.step = exchange.read(f"step/{r.node}") or r.step
                r.rows = exchange.read(f"rows/{r.node}") or r.rows
                done = exchange.read(f"done/{r.node}")
                beats = exchange.beats(r.node)
            except Exception as exc:  # noqa: BLE001 - the store is gone: keep what was read
                for w in waiting:
                    w.status, w.error = "failed", f"the rendezvous store stopped answering ({type(exc).__name__})"
                break
            if done is not None:
                r.status, r.error = done["status"], done.get("error") or ""
                r.rows, r.device, r.versions = done["rows"], done.get("device") or {}, done.get("versions") or {}
                continue
            last, since = seen[r.node]
            if beats != last:
                seen[r.node] = (beats, time.monotonic())
            elif time.monotonic() - since > stale_s:
                r.status, r.error = "failed", f"stopped responding (no heartbeat for {stale_s:g} s)"
        on_progress(f"waiting for {sum(r.status == 'running' for r in results.values())} node(s)")
        time.sleep(POLL_S)


def announce(exchange: Exchange, node: int) -> None:
    exchange.post(f"host/{node}", {"host": host_name()})


def finish(exchange: Exchange, result: NodeResult) -> None:
    exchange.post(
        f"done/{result.node}",
        {
            "status": result.status,
            "error": result.error,
            "rows": result.rows,
            "device": result.device,
            "versions": result.versions,
        },
    )

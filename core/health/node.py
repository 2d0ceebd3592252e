"""One node of a cluster health check under torchrun: run the check here, send the rows to rank 0 through the
rendezvous store; rank 0 gathers every node's rows and stores ONE run (:mod:`core.health.fleet`).

Each node writes under ``gpulab-health/<run>/`` in torchrun's store (the same store the interconnect ranks
use): ``host/<node>``, ``step/<node>`` (what it is doing), ``rows/<node>`` (every row so far, after each
part), ``done/<node>`` and a heartbeat counter ``alive/<node>``. Every record but the counter is sealed with the job's
secret and the nonce rank 0 draws for this run and hands out first, sealed, under ``run``
(:mod:`core.distributed.job_secret`): whoever else reaches the store can read them but not forge them, nor replay
those of an earlier run with the same job id and secret, and rank 0 fails and names a node whose record it cannot
verify (or that is stale), keeping only what it verified before. Rank 0 reads them from the start and keeps
what it read (:class:`Fleet`): a node whose heartbeat stops for ``stale_s`` seconds, or that ends with an
error, is failed and named, with the rows it sent; if the store itself goes (its host's launcher ended), every
unfinished node is failed the same way.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from core.distributed.job_secret import Sealer, Stale, Unverified, new_nonce
from core.distributed.rank import RankEnv, job_store
from core.hardware.device import host_name
from core.health.fleet import NodeResult
from core.units import count_text

HEARTBEAT_S = 2.0
POLL_S = 0.5


RUN_KEY = "run"  # rank 0's nonce for this run, sealed with the job's secret alone


class Exchange:
    """This run's keys in torchrun's store, sealed with the job's secret and the run's nonce: rank 0 draws it and
    never reads it back; every other node reads it (waiting for it up to ``timeout_s``) before it seals anything. A
    nonce planted by a replay makes that node's records stale to rank 0 (named), never accepted."""

    def __init__(self, env: RankEnv, secret: bytes, timeout_s: float = 60.0) -> None:
        self.env = env
        self.store = job_store(env, "gpulab-health", timeout_s)
        handed = Sealer(secret, env.run_id)
        if env.rank == 0:
            nonce = new_nonce()
            self.store.set(RUN_KEY, handed.seal(RUN_KEY, nonce))
        else:
            nonce = handed.open(RUN_KEY, self.store.get(RUN_KEY))
            if not isinstance(nonce, str) or not nonce:
                raise Unverified(RUN_KEY, "not a run's nonce")
        self.sealer = Sealer(secret, env.run_id, nonce)

    def post(self, key: str, value) -> None:
        self.store.set(key, self.sealer.seal(key, value))

    def read(self, key: str):
        """The verified value under ``key``, None where there is none; :class:`Unverified` for a forged one."""
        return self.sealer.open(key, self.store.get(key)) if self.store.check([key]) else None

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


class Fleet:
    """Rank 0's view of the other nodes, kept as it is read: what a node sent stays whatever happens later (the
    node dies, or the store goes with its host's launcher). Read in the background while rank 0 runs its own
    check, then until every node is done, failed or silent for ``stale_s``."""

    def __init__(self, exchange: Exchange, env: RankEnv, stale_s: float) -> None:
        self.exchange, self.stale_s = exchange, stale_s
        self.others = {n: NodeResult(n) for n in range(nodes_of(env)) if n != env.group_rank}
        self.seen = {n: (-1, time.monotonic()) for n in self.others}
        self._lock = threading.Lock()

    def running(self) -> list[NodeResult]:
        return [r for r in self.others.values() if r.status == "running"]

    def poll(self, judge_silence: bool) -> None:
        """One reading of every node still running; a node silent too long is failed when ``judge_silence``."""
        with self._lock:
            for r in self.running():
                try:
                    done, beats = self._read(r)
                except Unverified as exc:  # what it sent before was verified and stays; the forged record does not
                    kind = exc.key.split("/")[0]
                    why = "was sealed for another run of this job (replayed)" if isinstance(exc, Stale) else ""
                    r.status, r.error = "failed", f"node {r.node}'s {kind} {why or 'failed authentication'}; not stored"
                    continue
                except Exception as exc:  # noqa: BLE001 - the store is gone: keep what was read
                    for w in self.running():
                        w.status, w.error = "failed", f"the rendezvous store stopped answering ({type(exc).__name__})"
                    return
                if done is not None:
                    r.status, r.error = done["status"], done.get("error") or ""
                    r.rows, r.device, r.versions = done["rows"], done.get("device") or {}, done.get("versions") or {}
                    continue
                last, since = self.seen[r.node]
                if beats != last:
                    self.seen[r.node] = (beats, time.monotonic())
                elif judge_silence and time.monotonic() - since > self.stale_s:
                    r.status, r.error = "failed", f"stopped responding (no heartbeat for {self.stale_s:g} s)"

    def _read(self, r: NodeResult) -> tuple[dict | None, int]:
        """Node ``r``'s verified records into ``r``; its ``done`` record and heartbeat count."""
        r.host = (self.exchange.read(f"host/{r.node}") or {}).get("host", r.host)
        r.step = self.exchange.read(f"step/{r.node}") or r.step
        r.rows = self.exchange.read(f"rows/{r.node}") or r.rows
        return self.exchange.read(f"done/{r.node}"), self.exchange.beats(r.node)

    def watch(self, stop: threading.Event) -> threading.Thread:
        """Read in the background until ``stop`` (while rank 0 runs its own check)."""

        def loop() -> None:
            while not stop.wait(POLL_S):
                self.poll(judge_silence=False)

        thread = threading.Thread(target=loop, daemon=True, name="health-fleet-watch")
        thread.start()
        return thread

    def gather(
        self, own: NodeResult, on_progress: Callable[[str], None], stopping: threading.Event
    ) -> list[NodeResult]:
        """Every node's result with rank 0's own; ``stopping`` (the job is being ended): one last reading, then the
        nodes still running are failed as they stand."""
        said = -1
        while True:
            self.poll(judge_silence=True)
            if stopping.is_set():
                for w in self.running():
                    w.status, w.error = "failed", "the job was ended (SIGTERM) before this node answered"
            left = len(self.running())
            if not left:
                return sorted([own, *self.others.values()], key=lambda n: n.node)
            if left != said:
                on_progress(f"waiting for {count_text(left, 'node')}")
                said = left
            stopping.wait(POLL_S)


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

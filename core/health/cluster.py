"""A node's part of a cluster health check (:mod:`core.cli.health_node`): check, send, and on rank 0 gather,
judge the fleet and store one run."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sys
import threading
import time

from core.distributed.job_secret import Unverified
from core.hardware.device import host_name
from core.hardware.health_reference import THRESHOLD_REASON
from core.hardware.identity import box_identity
from core.health.check import HealthReport, run_health, table
from core.health.config import HealthConfig
from core.health.fleet import NodeResult, fleet_rows
from core.health.node import Exchange, Fleet, Heartbeat, announce, finish
from core.health.verdict import overall, summary
from core.health.words import answer
from core.jsonable import json_ready
from core.result import DeviceInfo, RunResult, new_run_id, now_iso
from core.rows.health import HealthRow, HealthSummary, health_rows
from core.text import terminal_text
from core.units import count_text


def _say(env, message: str) -> None:
    print(f"[node {env.group_rank}] {terminal_text(message)}", file=sys.stderr, flush=True)


class Stopped(Exception):
    """SIGTERM: torchrun's launcher is ending the job (its store went away, or it was stopped)."""


def run_node(cfg: HealthConfig, env, args, secret: bytes) -> int:
    from core.jobs import JobManager
    from core.store import RunStore

    store = RunStore(args.db)
    try:
        exchange = Exchange(env, secret)
    except Unverified as exc:  # the run's nonce in the store is not rank 0's: nothing this node sends would count
        _say(env, f"error: the run's nonce in the rendezvous store cannot be trusted ({exc}); this node stops")
        return 2
    node = env.group_rank
    announce(exchange, node)
    own = NodeResult(node, host_name())
    started, t0 = now_iso(), time.monotonic()
    stopping, phase = threading.Event(), ["check"]
    _stop_on_sigterm(stopping, phase)
    manager = JobManager(store=None if args.no_save else store)
    fleet, watching = (Fleet(exchange, env, args.stale_s), threading.Event()) if env.rank == 0 else (None, None)
    if fleet is not None and watching is not None:
        fleet.watch(watching)  # what the other nodes send is kept from the start
    with Heartbeat(exchange, node):
        report = _own_check(cfg, manager, store, exchange, env, own, phase)
        try:
            finish(exchange, own)
        except Exception as exc:  # noqa: BLE001 - the store is gone: rank 0 judges by what it has
            _say(env, f"could not send the result: {exc}")
        if env.rank != 0:
            _say(
                env,
                f"sent {count_text(len(own.rows), 'row')} to rank 0: {report.verdict if own.status == 'ok' else own.error}",
            )
            return 0
        run_id = new_run_id()
        if not args.no_save:  # rank 0's own rows are kept even if it is killed while it waits for the others
            waiting = cluster_run(cfg, [own], started, time.monotonic() - t0, args.name, run_id)
            waiting.status, waiting.error, waiting.finished_at = "running", None, None
            store.save(waiting, owner_pid=os.getpid())
        assert fleet is not None and watching is not None  # rank 0
        watching.set()
        nodes = fleet.gather(own, lambda message: _say(env, message), stopping)
    run = cluster_run(cfg, nodes, started, time.monotonic() - t0, args.name, run_id)
    if not args.no_save:
        store.save(run)
    _print_run(run, args.json)
    # The verdict is in the stored and printed run, not the exit code: torchrun takes a non-zero exit for a
    # crashed worker, and the other nodes' launchers then wait out their exit barrier (5 minutes).
    _say(env, f"verdict: {HealthSummary.from_run(run).verdict} (run {run.id})")
    return 0


def _stop_on_sigterm(stopping: threading.Event, phase: list[str]) -> None:
    """On SIGTERM the node stops: while its own check runs, that check ends (:class:`Stopped`) and what it
    measured is sent on; later, rank 0 stops waiting for the others (``stopping``)."""

    def on_term(signum, frame) -> None:
        stopping.set()
        if phase[0] == "check":  # the node's own check ends, what it measured is sent on
            raise Stopped("stopped by SIGTERM: torchrun's launcher ended the job")

    signal.signal(signal.SIGTERM, on_term)


def _own_check(
    cfg: HealthConfig, manager, store, exchange: Exchange, env, own: NodeResult, phase: list[str]
) -> HealthReport:
    """The node's own health check, its steps and rows posted to rank 0 as they come; a check that fails is the
    node's status and error in ``own``, with the rows it had sent, not an exit. Returns the node's report."""
    node = env.group_rank

    def progress(done: int, total: int, message: str) -> None:
        exchange.post(f"step/{node}", message)
        _say(env, f"[{done}/{total}] {message}")

    def send(rows: list[HealthRow]) -> None:
        own.rows = json_ready([r.to_row() for r in rows])
        exchange.post(f"rows/{node}", own.rows)

    report = HealthReport(config=cfg)
    try:
        report = run_health(cfg, manager, store=store, on_progress=progress, on_rows=send)
        own.status = "ok"
        own.rows = json_ready([r.to_row() for r in report.rows])
    except Exception as exc:  # noqa: BLE001 - the node's failure is a row of the cluster's run, with its rows
        own.status, own.error = "failed", f"{type(exc).__name__}: {exc}"
    finally:
        phase[0] = "report"
        manager.shutdown()
    own.device, own.versions = report.device, report.versions
    return report


def _print_run(run: RunResult, as_json: bool) -> None:
    """Rank 0's answer on its standard output: the run as JSON, or the answer in words and the fleet's table."""
    if as_json:
        print(json.dumps(json_ready(run.to_dict()), indent=2, allow_nan=False))
    else:
        print(
            "\n".join(
                terminal_text(line)
                for line in f"{HealthSummary.from_run(run).answer}\n\n{table(health_rows(run))}".splitlines()
            )
        )


def cluster_run(
    cfg: HealthConfig, nodes: list[NodeResult], started: str, wall_s: float, name: str, run_id: str
) -> RunResult:
    """The cluster's one run: every node's rows against the fleet, the nodes and their status in meta."""
    rows = fleet_rows(nodes)
    first = next((n for n in sorted(nodes, key=lambda n: n.node) if n.device), None)
    device = dict(first.device) if first else {"kind": "unknown", "name": "cluster"}
    failed = [n for n in nodes if n.status != "ok"]
    device["label"] = f"torchrun health — {count_text(len(nodes), 'node')}, rank 0: {DeviceInfo.of(device).shown}"
    verdict = overall(rows)
    return RunResult(
        experiment="health",
        config=dataclasses.asdict(cfg) | {"nodes": len(nodes)},
        device=device,
        versions=first.versions if first else {},
        started_at=started,
        finished_at=now_iso(),
        status="error" if failed else "ok",
        error=("failed node(s): " + ", ".join(f"{n.name}: {n.error}" for n in failed)) if failed else None,
        rows=[r.to_row() for r in rows],
        meta={
            "verdict": verdict,
            "summary": summary(rows),
            "answer": f"{count_text(len(nodes), 'node')}: " + answer(rows, device),
            "nodes": [dataclasses.asdict(n.summary()) for n in sorted(nodes, key=lambda n: n.node)],
            "failed_nodes": [n.name for n in failed],
            "box": box_identity(device),
            "thresholds": THRESHOLD_REASON,
            "wall_s": wall_s,
        },
        name=name or "health (cluster)",
        id=run_id,
    )

"""A node's part of a cluster health check (:mod:`core.cli.health_node`): check, send, and on rank 0 gather,
judge the fleet and store one run."""

from __future__ import annotations

import dataclasses
import json
import sys
import time

from core.hardware.device import host_name
from core.hardware.health_reference import THRESHOLD_REASON
from core.hardware.identity import box_identity
from core.health.check import HealthConfig, HealthReport, answer, run_health, table
from core.health.fleet import NodeResult, fleet_rows
from core.health.node import Exchange, Heartbeat, announce, finish, gather
from core.health.verdict import overall, summary
from core.jsonable import json_ready
from core.result import RunResult, now_iso
from core.text import terminal


def _say(env, message: str) -> None:
    print(f"[node {env.group_rank}] {terminal(message)}", file=sys.stderr, flush=True)


def run_node(cfg: HealthConfig, env, args) -> int:
    from core.jobs import JobManager
    from core.store import RunStore

    store = RunStore(args.db)
    exchange = Exchange(env)
    node = env.group_rank
    announce(exchange, node)
    own = NodeResult(node, host_name())
    started, t0 = now_iso(), time.monotonic()

    def progress(done: int, total: int, message: str) -> None:
        exchange.post(f"step/{node}", message)
        _say(env, f"[{done}/{total}] {message}")

    def send(rows: list[dict]) -> None:
        own.rows = json_ready(rows)
        exchange.post(f"rows/{node}", own.rows)

    manager = JobManager(store=None if args.no_save else store)
    report = HealthReport(config=cfg)
    with Heartbeat(exchange, node):
        try:
            report = run_health(cfg, manager, store=store, on_progress=progress, on_rows=send)
            own.status = "ok"
            own.rows = json_ready(report.rows)
        except Exception as exc:  # noqa: BLE001 - the node's failure is a row of the cluster's run, with its rows
            own.status, own.error = "failed", f"{type(exc).__name__}: {exc}"
        finally:
            manager.shutdown()
        own.device, own.versions = report.device, report.versions
        finish(exchange, own)
        if env.rank != 0:
            _say(env, f"sent {len(own.rows)} row(s) to rank 0: {report.verdict if own.status == 'ok' else own.error}")
            return 0
        nodes = gather(exchange, env, own, args.stale_s, lambda message: _say(env, message))
    run = cluster_run(cfg, nodes, started, time.monotonic() - t0, args.name)
    if not args.no_save:
        store.save(run)
    if args.json:
        print(json.dumps(json_ready(run.to_dict()), indent=2, allow_nan=False))
    else:
        print("\n".join(terminal(line) for line in f"{run.meta['answer']}\n\n{table(run.rows)}".splitlines()))
    # The verdict is in the stored and printed run, not the exit code: torchrun takes a non-zero exit for a
    # crashed worker, and the other nodes' launchers then wait out their exit barrier (5 minutes).
    _say(env, f"verdict: {run.meta['verdict']} (run {run.id})")
    return 0


def cluster_run(cfg: HealthConfig, nodes: list[NodeResult], started: str, wall_s: float, name: str) -> RunResult:
    """The cluster's one run: every node's rows against the fleet, the nodes and their status in meta."""

    rows = fleet_rows(nodes)
    first = next((n for n in sorted(nodes, key=lambda n: n.node) if n.device), None)
    device = dict(first.device) if first else {"kind": "unknown", "name": "cluster"}
    failed = [n for n in nodes if n.status != "ok"]
    device["label"] = f"torchrun health — {len(nodes)} node(s), rank 0: {device.get('label') or device.get('name')}"
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
        rows=rows,
        meta={
            "verdict": verdict,
            "summary": summary(rows),
            "answer": f"{len(nodes)} node(s): " + answer(rows, device),
            "nodes": [n.summary() for n in sorted(nodes, key=lambda n: n.node)],
            "failed_nodes": [n.name for n in failed],
            "box": box_identity(device),
            "thresholds": THRESHOLD_REASON,
            "wall_s": wall_s,
        },
        name=name or "health (cluster)",
    )

"""The cluster's store is reachable by others and holds no secret: what a third process writes there is refused
and the node named, never stored as that node's rows; the launchers' stores listen on the loopback address given."""

import json
import os
import subprocess
import sys
import threading
import time
from datetime import timedelta

import psutil
import pytest
import torch.distributed as dist

from core.distributed.bound_store import bound_tcp_store
from core.distributed.job_secret import SECRET_ENV
from core.distributed.rank import RankEnv
from core.health.cluster import cluster_run
from core.health.config import HealthConfig
from core.health.node import Exchange, Fleet
from core.store import RunStore
from tests.conftest import ROOT
from tests.core.health.test_cluster import _node_process, node, torchrun

pytestmark = pytest.mark.usefixtures("job_secret")

FORGED_ROWS = [{"figure": "matmul bf16 sustained", "where": f"cuda:{i}", "measured": 999.0, "verdict": "ok"} for i in
               range(8)]  # fmt: skip
# An attacker on the job's network, started before the nodes so its own start (torch's import: seconds on a loaded
# box) cannot let node 1 finish first: it says "ready", reads the store's address and the run from its input, and
# holds its argument (JSON) as ``given``; what it then writes follows.
ATTACKER = """
import json, sys, time
from datetime import timedelta
import torch.distributed as dist
print("ready", flush=True)
host, port, run_id = sys.stdin.readline().split()
given = json.loads(sys.argv[1])
store = dist.PrefixStore(f"gpulab-health/{run_id}/", dist.TCPStore(host, int(port), is_master=False,
                         timeout=timedelta(seconds=60)))
"""
FORGER = (
    ATTACKER
    + """
done = {"status": "ok", "error": "", "rows": given, "device": {}, "versions": {}}
while True:  # as the issue's attacker did: node 1's done record, with forged rows and no valid seal
    store.set("done/1", json.dumps({"payload": json.dumps(done), "mac": "0" * 64}))
    time.sleep(0.02)
"""
)


def _env(port: int, rank: int) -> RankEnv:
    return RankEnv(rank, 2, 0, 1, rank, "job-forgery", "127.0.0.1", port)


def test_a_forged_row_written_straight_to_the_store_is_refused_and_the_node_named():
    server = bound_tcp_store("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=30))
    secret = os.urandom(32)
    rank0, node1 = Exchange(_env(server.port, 0), secret), Exchange(_env(server.port, 1), secret)
    genuine = node(1, "b", [755.0]).rows
    node1.post("host/1", {"host": "b"})
    node1.post("rows/1", genuine)
    fleet = Fleet(rank0, _env(server.port, 0), stale_s=60)
    fleet.poll(judge_silence=False)
    assert fleet.others[1].rows == genuine and fleet.others[1].status == "running"
    forger = dist.PrefixStore(  # pyright: ignore[reportPrivateImportUsage]
        "gpulab-health/job-forgery/",
        dist.TCPStore("127.0.0.1", server.port, is_master=False, timeout=timedelta(seconds=30)),  # pyright: ignore[reportPrivateImportUsage]
    )
    forger.set("rows/1", json.dumps(FORGED_ROWS))  # no seal at all
    fleet.poll(judge_silence=False)
    refused = fleet.others[1]
    assert refused.status == "failed" and refused.error == "node 1's rows failed authentication; not stored"
    assert refused.rows == genuine  # what it sent before, verified, is kept; the forged rows are not
    run = cluster_run(HealthConfig(), [node(0, "a", [760.0]), refused], "2024-01-01T00:00:00", 1.0, "", "r1")
    assert run.status == "error" and run.meta["failed_nodes"] == ["node 1 (b)"]
    assert not [r for r in run.rows if r.get("measured") == 999.0]
    named = [r for r in run.rows if r["verdict"] == "fail" and r["figure"].startswith("node 1 (b)")]
    assert named and "failed authentication" in named[0]["reason"]


def _finished(db) -> bool:
    return db.exists() and any(r.status != "running" for r in RunStore(db).list(experiment="health"))


def _listening(pids: list[int]) -> set[str]:
    found = set()
    for pid in pids:
        try:
            found |= {c.laddr.ip for c in psutil.Process(pid).net_connections(kind="tcp") if c.status == "LISTEN"}
        except psutil.Error:
            continue
    return found


def test_a_third_process_forging_node_1s_done_record_is_refused_and_the_stores_stay_on_loopback(tmp_path):
    db = tmp_path / "cluster.sqlite"
    command = torchrun("gpulab-health-forged", db, "--stale-s", "30")
    errs = [open(tmp_path / f"node{i}.err", "w") for i in range(2)]
    forger = subprocess.Popen([sys.executable, "-c", FORGER, json.dumps(FORGED_ROWS)], cwd=ROOT, text=True,
                              env={k: v for k, v in os.environ.items() if k != SECRET_ENV}, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)  # fmt: skip
    assert forger.stdin is not None and forger.stdout is not None
    nodes: list[subprocess.Popen] = []
    listening: set[str] = set()
    told = False
    try:
        assert forger.stdout.readline().strip() == "ready"  # torch imported: it writes once it hears the address
        nodes += [subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=e, text=True) for e in errs]
        deadline = time.monotonic() + 180
        while not told and time.monotonic() < deadline:
            listening |= _listening([n.pid for n in nodes])
            try:
                victim = _node_process(db, group_rank="1").environ()
            except AssertionError:  # not started yet
                time.sleep(0.2)
                continue
            forger.stdin.write(f"{victim['MASTER_ADDR']} {victim['MASTER_PORT']} {victim['TORCHELASTIC_RUN_ID']}\n")
            forger.stdin.flush()
            told = True
        stop = threading.Event()
        threading.Thread(target=lambda: [listening.update(_listening([n.pid for n in nodes])) for _ in iter(lambda: stop.wait(0.5), True)], daemon=True).start()  # fmt: skip
        while time.monotonic() < deadline + 120 and not _finished(db) and any(n.poll() is None for n in nodes):
            time.sleep(0.2)
        stop.set()
    finally:
        for proc in [*nodes, forger]:
            proc.kill()
            proc.wait(timeout=60)
        for e in errs:
            e.close()
    assert told
    (run,) = RunStore(db).list(experiment="health")
    assert run.status == "error" and any(n.startswith("node 1 (") for n in run.meta["failed_nodes"])
    assert "node 1's done failed authentication; not stored" in (run.error or "")
    assert not [r for r in run.rows if r.get("measured") == 999.0]
    assert listening == {"127.0.0.1"}  # both stores, on the loopback address given, nowhere else

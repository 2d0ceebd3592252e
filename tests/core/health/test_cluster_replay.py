"""Sealed cluster records are bound to one run (issue 48, item 10): records a node sealed in one run of a job, with
the job's id and secret, are refused as stale in a later run with the same id and secret, and the node named; the
run never stores them as that node's figures."""

import json
import os
import re
import subprocess
import sys
import time
from datetime import timedelta

import pytest

from core.distributed.bound_store import bound_tcp_store
from core.distributed.job_secret import Sealer, Stale, Unverified, new_secret, secret_from_environ
from core.distributed.rank import RankEnv
from core.health.node import Exchange, Fleet, announce, finish
from core.store import RunStore
from tests.conftest import ROOT
from tests.core.health.test_cluster import _node_process, _ours, node, torchrun
from tests.core.health.test_cluster_forgery import ATTACKER

pytestmark = pytest.mark.usefixtures("job_secret")

JOB = "gpulab-health-replayed"  # the --rdzv-id of both runs, as a fixed id in a recipe would make it
CAPTURED = 999.0  # the figure node 1 sent in the first run
# The attacker of test_cluster_forgery, given what it captured from the first run: it writes it into the second
# run's store again and again.
REPLAYER = (
    ATTACKER
    + """
while True:
    for key, record in given.items():
        store.set(key, record)
    time.sleep(0.02)
"""
)


def _env(port: int, rank: int, job: str = JOB) -> RankEnv:
    return RankEnv(rank, 2, 0, 1, rank, job, "127.0.0.1", port)


def _first_run(secret: bytes) -> dict[str, str]:
    """Node 1's records of a first run of the job, exactly as its store held them: a healthy done, 999 TFLOPS."""
    server = bound_tcp_store("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=30))
    Exchange(_env(server.port, 0), secret)  # rank 0 hands out the first run's nonce
    node1 = Exchange(_env(server.port, 1), secret)
    sent = node(1, "b", [CAPTURED])
    sent.status = "ok"
    announce(node1, 1)
    node1.post("step/1", "soak")
    node1.post("rows/1", sent.rows)
    finish(node1, sent)
    return {key: node1.store.get(key).decode() for key in ("host/1", "step/1", "rows/1", "done/1")}


def test_a_record_sealed_for_another_run_is_stale_and_a_forged_one_is_not():
    secret = new_secret()
    first = Sealer(secret, JOB, "aa" * 16).seal("rows/1", [{"measured": CAPTURED}])
    assert Sealer(secret, JOB, "aa" * 16).open("rows/1", first) == [{"measured": CAPTURED}]
    with pytest.raises(Stale, match="rows/1: sealed for another run of this job"):
        Sealer(secret, JOB, "bb" * 16).open("rows/1", first)
    claimed = json.dumps(json.loads(first) | {"run": "cc" * 16})  # another run named, the seal left as it was
    with pytest.raises(Unverified, match="does not match the job's secret") as refused:
        Sealer(secret, JOB, "bb" * 16).open("rows/1", claimed)
    assert not isinstance(refused.value, Stale)


def test_rank_0_refuses_a_replayed_record_in_process():
    secret = secret_from_environ()
    captured = _first_run(secret)
    server = bound_tcp_store("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=30))
    rank0 = Exchange(_env(server.port, 0), secret)
    for key, record in captured.items():
        rank0.store.set(key, record)
    fleet = Fleet(rank0, _env(server.port, 0), stale_s=60)
    fleet.poll(judge_silence=False)
    refused = fleet.others[1]
    assert refused.status == "failed"
    assert refused.error == "node 1's host was sealed for another run of this job (replayed); not stored"
    assert refused.rows == []


def test_a_later_run_with_the_same_id_and_secret_refuses_the_first_runs_records(tmp_path):
    """The issue's replay in a real two-node torchrun job: node 1's records of a first run with the same --rdzv-id
    and secret, written into the second run's store by a third process, are refused and node 1 named."""
    captured = _first_run(secret_from_environ())
    db = tmp_path / "cluster.sqlite"
    command = torchrun(JOB, db, "--stale-s", "30")
    errs = [open(tmp_path / f"node{i}.err", "w") for i in range(2)]
    replayer = subprocess.Popen([sys.executable, "-c", REPLAYER, json.dumps(captured)], cwd=ROOT, text=True,
                                env={k: v for k, v in os.environ.items() if k != "GPULAB_JOB_SECRET"},
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)  # fmt: skip
    assert replayer.stdin is not None and replayer.stdout is not None
    nodes: list[subprocess.Popen] = []
    told = False
    try:
        assert replayer.stdout.readline().strip() == "ready"
        nodes += [subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=e, text=True) for e in errs]
        deadline = time.monotonic() + 180
        while not told and time.monotonic() < deadline:
            try:
                victim = _node_process(db, group_rank="1").environ()
            except AssertionError:  # not started yet
                time.sleep(0.2)
                continue
            replayer.stdin.write(f"{victim['MASTER_ADDR']} {victim['MASTER_PORT']} {victim['TORCHELASTIC_RUN_ID']}\n")
            replayer.stdin.flush()
            told = True
        while (
            time.monotonic() < deadline + 120
            and not (db.exists() and any(r.status != "running" for r in RunStore(db).list(experiment="health")))
            and any(n.poll() is None for n in nodes)
        ):
            time.sleep(0.2)
    finally:
        for proc in [*nodes, replayer]:
            proc.kill()
            proc.wait(timeout=60)
        for e in errs:
            e.close()
    assert told
    (run,) = RunStore(db).list(experiment="health")
    assert run.status == "error" and any(n.startswith("node 1 (") for n in run.meta["failed_nodes"])
    assert re.search(r"node 1's (host|step|rows|done) was sealed for another run of this job \(replayed\)", run.error)
    assert not [r for r in run.rows if r.get("measured") == CAPTURED]
    deadline = time.monotonic() + 30
    while _ours(os.environ["GPULAB_LOCK_DIR"]) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _ours(os.environ["GPULAB_LOCK_DIR"]) == []

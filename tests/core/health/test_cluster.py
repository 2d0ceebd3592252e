"""Health on every node: two "nodes" on this machine through torchrun's rendezvous store one run; a node killed
mid-run keeps its rows, is named, and leaves no process behind. The fleet rule on hand-made node rows."""

import json
import os
import re
import subprocess
import time

import psutil
import pytest

from core.health.figures import Figure
from core.health.fleet import NodeResult, fleet_rows
from core.health.verdict import figure_row, overall
from core.store import RunStore
from tests.conftest import ROOT, two_node_torchrun
from tests.core.health.test_verdict import gpu


def node(index, host, values, status="ok"):
    device = gpu("NVIDIA H100 80GB HBM3", host=host)
    rows = [figure_row(Figure("matmul bf16 sustained", f"cuda:{i}", v, "TFLOPS", device, "matmul bf16")).to_row()
            for i, v in enumerate(values)]  # fmt: skip
    return NodeResult(index, host, status, rows)


def wait_until_past_soak(folder, nodes: tuple[int, ...], seconds: float = 180) -> None:
    """Until each of ``nodes`` has reported its second part (so its soak rows are sent) in either launcher's
    stderr (``folder/node{0,1}.err``), or ``seconds`` pass."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not all(
        any(f"[node {node}] [1/2]" in (folder / f"node{i}.err").read_text() for i in range(2)) for node in nodes
    ):
        time.sleep(0.2)


def wait_for_stored_run(db, seconds: float) -> None:
    """Until rank 0 has stored the health run as finished (not "running"), or ``seconds`` pass."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not (
        db.exists() and [r for r in RunStore(db).list(experiment="health") if r.status != "running"]
    ):
        time.sleep(0.2)


def test_the_fleet_flags_a_gpu_more_than_10_percent_below_the_median_and_names_a_failed_node():
    nodes = [node(0, "a", [760.0, 750.0]), node(1, "b", [755.0, 660.0]), node(2, "c", [], status="failed")]
    nodes[2].error, nodes[2].step = "stopped responding (no heartbeat for 5 s)", "soak"
    rows = fleet_rows(nodes)
    gpu_rows = [r for r in rows if r.figure == "matmul bf16 sustained"]
    # median of 760, 750, 755, 660 = 752.5; 660 / 752.5 = 87.7 % < 90 %: the outlier, though it passes its
    # reference (660 / 794.5 = 83 %: below expected anyway); 750 / 752.5 = 99.7 %: not an outlier
    assert [(r.node, r.where, r.outlier) for r in gpu_rows] == [
        ("node 0 (a)", "cuda:0", False),
        ("node 0 (a)", "cuda:1", False),
        ("node 1 (b)", "cuda:0", False),
        ("node 1 (b)", "cuda:1", True),
    ]
    assert gpu_rows[3].fleet.median == pytest.approx(752.5)
    assert "fleet median 752.5" in gpu_rows[3].reason
    (failed,) = [r for r in rows if r.verdict == "fail"]
    assert failed.figure == "node 2 (c)" and "(no heartbeat for 5 s) during soak; it sent no rows" in failed.reason
    assert overall(rows) == "failed"


LAUNCHER = "core.distributed.torchrun"
pytestmark = pytest.mark.usefixtures("job_secret")


def torchrun(run_id, db, *extra):
    """Two nodes' launchers on this box through the lab's torchrun (its stores listen on the address given)."""
    command = two_node_torchrun(
        run_id,
        "core.cli.health_node",
        *("--device", "cpu", "--parts", "soak,collectives", "--quick", "--soak-s", "2", "--db", str(db), *extra),
    )
    return [LAUNCHER if part == "torch.distributed.run" else part for part in command]


def test_two_nodes_through_torchrun_store_one_run_with_a_row_per_node(tmp_path):
    db = tmp_path / "cluster.sqlite"
    command = torchrun("gpulab-health-test", db, "--json")
    nodes = [subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in
             range(2)]  # fmt: skip
    outs = [n.communicate(timeout=300) for n in nodes]
    assert sorted(n.returncode for n in nodes) == [0, 0], [o[1][-1500:] for o in outs]
    printed = [json.loads(o[0]) for o in outs if o[0].strip()]
    assert len(printed) == 1  # rank 0 alone reports
    runs = [r for r in RunStore(db).list(experiment="health")]
    assert [r.id for r in runs] == [printed[0]["id"]]
    run = runs[0]
    assert run.status == "ok" and run.meta["verdict"] == "healthy"
    assert [n["status"] for n in run.meta["nodes"]] == ["ok", "ok"]
    reduce = [r for r in run.rows if r["figure"] == "all_reduce busbw"]
    assert sorted(r["node"].split(" (")[0] for r in reduce) == ["node 0", "node 1"]
    assert all(r["measured"] > 0 and r["verdict"] == "no reference" for r in reduce)
    assert run.device["label"].startswith("torchrun health — 2 nodes")


def _ours(lock_dir):
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if proc.status() != psutil.STATUS_ZOMBIE and proc.environ().get("GPULAB_LOCK_DIR") == lock_dir:
                found.append(proc)
        except psutil.Error:
            continue
    return found


def _node_process(db, group_rank: str) -> psutil.Process:
    """The check's own process of one node (not its torchrun launcher), found by its database and GROUP_RANK."""
    for p in psutil.process_iter(["cmdline"]):
        try:
            cmdline = p.info["cmdline"] or []
            if (
                "core.cli.health_node" in cmdline
                and "torch.distributed.run" not in cmdline
                and LAUNCHER not in cmdline
                and str(db) in cmdline
                and p.environ().get("GROUP_RANK") == group_rank
            ):
                return p
        except psutil.Error:  # a process that ended meanwhile
            continue
    raise AssertionError(f"no running check process for node {group_rank}")


def test_a_node_killed_mid_run_keeps_its_rows_is_named_and_leaves_no_process(tmp_path):
    db = tmp_path / "cluster.sqlite"
    command = torchrun("gpulab-health-kill", db, "--stale-s", "5")
    errs = [open(tmp_path / f"node{i}.err", "w") for i in range(2)]
    nodes = [subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=e, text=True) for e in errs]
    try:
        # a node has sent its soak rows once it reports the next part: both have, on a loaded machine too
        wait_until_past_soak(tmp_path, (0, 1))
        victim = _node_process(db, group_rank="1")
        victim.kill()
        # rank 0 stores its own rows at once (status running), the whole run once node 1 has been silent for
        # 5 s; its launcher may then wait out torchrun's exit barrier for the failed node (minutes): torchrun's
        wait_for_stored_run(db, 180)
    finally:
        for n in nodes:
            n.kill()
            n.wait(timeout=60)
        for e in errs:
            e.close()
    (run,) = RunStore(db).list(experiment="health")
    # node 0 may be ended too: when the killed node's launcher hosted torchrun's store, node 0's launcher stops
    # it with SIGTERM, and it stores what it has
    assert run.status == "error" and any(n.startswith("node 1 (") for n in run.meta["failed_nodes"])
    (named,) = [r for r in run.rows if r["verdict"] == "fail" and r["figure"].startswith("node 1 (")]
    assert re.search(r"\d+ rows? it sent (is|are) kept", named["reason"]), named["reason"]
    kept = [r for r in run.rows if r.get("node", "").startswith("node 1") and r["verdict"] != "fail"]
    assert kept and all(r["figure"].startswith("matmul fp32") for r in kept)  # the soak's, sent before the kill
    assert [r for r in run.rows if r.get("node", "").startswith("node 0") and r["figure"].startswith("matmul fp32")]
    deadline = time.monotonic() + 30
    while _ours(os.environ["GPULAB_LOCK_DIR"]) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _ours(os.environ["GPULAB_LOCK_DIR"]) == []


def test_rank_0_stopped_by_sigterm_stores_what_every_node_sent(tmp_path):
    """torchrun's launcher ends rank 0 with SIGTERM (its store went away, or the job was stopped): rank 0 still
    stores the run, with the rows each node had sent and every unfinished node named."""
    db = tmp_path / "cluster.sqlite"
    command = torchrun("gpulab-health-term", db, "--stale-s", "30")
    errs = [open(tmp_path / f"node{i}.err", "w") for i in range(2)]
    nodes = [subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=e, text=True) for e in errs]
    try:
        wait_until_past_soak(tmp_path, (0,))
        _node_process(db, group_rank="0").terminate()
        wait_for_stored_run(db, 120)
    finally:
        for n in nodes:
            n.kill()
            n.wait(timeout=60)
        for e in errs:
            e.close()
    (run,) = RunStore(db).list(experiment="health")
    assert run.status == "error" and "stopped by SIGTERM" in run.error
    assert [r for r in run.rows if r.get("node", "").startswith("node 0") and r["verdict"] != "fail"]  # its soak rows
    assert {r["figure"].split(" (")[0] for r in run.rows if r["verdict"] == "fail"} >= {"node 0"}

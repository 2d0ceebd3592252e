"""An interconnect run's rows (:mod:`core.rows.interconnect`): stored rows of every kind round-trip with their keys in
their order, the engine writes them so, a row missing keys reads with defaults, the named tables split a run once,
and the charts, the page's words and the CLI's line read the fields."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from core.distributed.collectives import Measured, make_point, not_measured_row, point_rows
from core.rows.interconnect import (
    CollectivePoint,
    HostCopy,
    InterconnectMeta,
    InterconnectTables,
    PeerCopy,
    RankPoint,
    unsupported_row,
)
from tests.factories import make_run

# rows of a CPU run stored before the rows had a type (`interconnect --device cpu --collectives all_reduce,broadcast
# --sizes 1KiB,64KiB`, 2 gloo ranks), the samples cut to three
HOST_SKIPPED = {
    "kind": "host_copy",
    "status": "unsupported",
    "reason": "unsupported on Intel(R) Xeon(R) Processor: host↔GPU copies need the job on a CUDA GPU (device cuda:0)",
}
PEER_SKIPPED = {
    "kind": "peer",
    "status": "unsupported",
    "reason": "unsupported on Intel(R) Xeon(R) Processor: the peer matrix needs at least 2 CUDA GPUs and the job "
    "runs on the CPU",
}
COLLECTIVE = {
    "collective": "all_reduce",
    "backend": "gloo",
    "bytes": 1024,
    "size": "1 KiB",
    "world_size": 2,
    "dtype": "float32",
    "elements": 256,
    "kind": "collective",
    "status": "ok",
    "reason": None,
    "median_ms": 0.530431,
    "mean_ms": 3.8735199999999996,
    "std_ms": 5.85312875096277,
    "min_ms": 0.458127,
    "max_ms": 10.632002,
    "p20_ms": 0.4870486,
    "p80_ms": 6.591373600000001,
    "reps": 3,
    "algbw_gbs": 0.0019305055699987367,
    "busbw_gbs": 0.0019305055699987367,
    "busbw_factor": 1.0,
    "algbw_gbs_p20": 0.00015535456827997122,
    "algbw_gbs_p80": 0.002102459590274975,
    "busbw_gbs_p20": 0.00015535456827997122,
    "busbw_gbs_p80": 0.002102459590274975,
    "check": "ok",
    "slowest_rank": 1,
    "call_max_median_ms": 0.530431,
    "nodes": 1,
    "samples_ms": [10.632002, 0.458127, 0.530431],
}
RANK = {
    "collective": "all_reduce",
    "backend": "gloo",
    "bytes": 1024,
    "size": "1 KiB",
    "world_size": 2,
    "dtype": "float32",
    "elements": 256,
    "kind": "rank",
    "rank": 0,
    "host": "vm",
    "group_rank": 0,
    "local_rank": 0,
    "device": "cpu",
    "median_ms": 0.422953,
    "p20_ms": 0.3125728,
    "p80_ms": 0.5348494,
    "min_ms": 0.238986,
    "max_ms": 0.609447,
    "check": "ok",
    "samples_ms": [0.609447, 0.422953, 0.238986],
}
# a host copy of the H200 example's interconnect run (examples/nvidia-h200-2026-11-26.json), samples cut to three
HOST_COPY = {
    "kind": "host_copy",
    "gpu": 0,
    "direction": "h2d",
    "memory": "pinned",
    "bytes": 67108864,
    "status": "ok",
    "reason": None,
    "median_ms": 1.2200799584388733,
    "p20_ms": 1.2156160116195678,
    "p80_ms": 1.2231808423995971,
    "min_ms": 1.2119040489196777,
    "max_ms": 1.2436800003051758,
    "reps": 24,
    "gbs": 55.003660650132865,
    "gbs_p20": 54.86422095063881,
    "gbs_p80": 55.20564335985564,
    "samples_ms": [1.2295680046081543, 1.2155200242996216, 1.2119040489196777],
}
# a cell of the peer matrix as core.measure.copies.peer_copy writes it
PEER = {
    "kind": "peer",
    "src": 0,
    "dst": 1,
    "peer_access": True,
    "path": "peer-to-peer",
    "bytes": 268435456,
    **{k: HOST_COPY[k] for k in ("status", "reason", "median_ms", "p20_ms", "p80_ms", "min_ms", "max_ms", "reps")},
    "gbs": 300.0,
    **{k: HOST_COPY[k] for k in ("gbs_p20", "gbs_p80", "samples_ms")},
}
# a point the ranks did not run, as core.distributed.collectives.not_measured_row wrote it
SKIPPED = {
    "kind": "collective",
    "collective": "broadcast",
    "backend": "nccl",
    "bytes": 1073741824,
    "size": "1 GiB",
    "world_size": 2,
    "dtype": "float32",
    "elements": 268435456,
    "status": "unsupported",
    "reason": "no NCCL on this box",
    "median_ms": None,
    "algbw_gbs": None,
    "busbw_gbs": None,
    "busbw_factor": 1.0,
}
CLASSES = {"host_copy": HostCopy, "peer": PeerCopy, "collective": CollectivePoint, "rank": RankPoint}


@pytest.mark.parametrize("row", [HOST_SKIPPED, PEER_SKIPPED, COLLECTIVE, RANK, HOST_COPY, PEER, SKIPPED])
def test_a_stored_row_round_trips_with_its_keys_in_order(row):
    back = CLASSES[row["kind"]].from_row(row).to_row()
    assert back == row and list(back) == list(row)
    assert CLASSES[row["kind"]].from_row(row | {"gpu_index": 3}).to_row()["gpu_index"] == 3  # others' keys kept


def test_the_engine_writes_the_stored_keys_in_their_order():
    point = make_point("all_reduce", 1024, 2)
    samples = torch.tensor([[0.6, 0.4, 0.2], [10.6, 0.5, 0.5]], dtype=torch.float64)
    ranks = [{"host": "vm", "group_rank": 0, "local_rank": r, "device": "cpu"} for r in range(2)]
    job, *own = point_rows(Measured(point, samples, [0, 0], [0.0, 0.0]), "gloo", ranks)
    assert list(job) == list(COLLECTIVE) and [list(r) for r in own] == [list(RANK)] * 2
    skipped = not_measured_row(make_point("broadcast", 2**30, 2), "nccl", "unsupported", "no NCCL on this box")
    assert skipped == SKIPPED and list(skipped) == list(SKIPPED)
    assert unsupported_row(HostCopy, HOST_SKIPPED["reason"]) == HOST_SKIPPED


def test_a_row_missing_keys_reads_with_defaults():
    old = {k: v for k, v in COLLECTIVE.items() if k not in ("call_max_median_ms", "nodes", "samples_ms")}
    p = CollectivePoint.from_row(old)
    assert (p.call_max_median_ms, p.nodes, p.samples_ms, p.busbw_gbs) == (None, None, (), COLLECTIVE["busbw_gbs"])
    r = RankPoint.from_row({"kind": "rank", "rank": 1})
    assert (r.rank, r.host, r.median_ms, r.check) == (1, None, None, None)


def test_the_tables_split_the_kinds_once_and_say_what_did_not_run():
    broken = HOST_COPY | {"status": "error", "reason": "the copy's destination differs from its source"}
    rows = [HOST_COPY, broken, broken, PEER, COLLECTIVE, RANK, SKIPPED, SKIPPED, {"kind": "later", "x": 1}]
    t = InterconnectTables.from_rows(rows)
    assert [len(x) for x in (t.host_copies, t.peers, t.collectives, t.ranks)] == [3, 1, 3, 1]
    # each reason once per kind, in the order the engine measures
    assert [(r.what, r.reason) for r in t.not_measured()] == [
        ("host↔GPU copies", "the copy's destination differs from its source"),
        ("broadcast 1 GiB", "no NCCL on this box"),
    ]
    better = COLLECTIVE | {"bytes": 65536, "size": "64 KiB", "busbw_gbs": 0.5}
    best = InterconnectTables.from_rows([COLLECTIVE, better, better | {"size": "equal"}]).best_busbw()
    assert [(p.collective, p.size) for p in best] == [("all_reduce", "64 KiB")]  # the first of equals


def test_the_cli_line_reads_the_fields():
    p = CollectivePoint.from_row(COLLECTIVE)
    assert p.text() == "all_reduce 1 KiB: 0.530 ms, busbw 0.00 GB/s"
    faster = dataclasses.replace(p, median_ms=0.25, busbw_gbs=4.5, algbw_gbs=4.5)
    assert faster.text(full=True) == "all_reduce 1 KiB: 0.250 ms, algbw 4.50 GB/s, busbw 4.50 GB/s"


def test_the_charts_read_the_fields():
    pytest.importorskip("plotly")
    from render.plots.interconnect import figures

    meta = {"backend": "gloo", "world_size": 2, "nodes": 2, "hosts": ["a", "b"]}
    charts = {c.name: c for c in figures(make_run("interconnect", [PEER, COLLECTIVE], meta))}
    heat = charts["interconnect-peer-matrix"].figure.data[0]
    assert heat.text[0][1] == "300<br>P2P" and heat.text[0][0] == ""
    moved = PEER | {"peer_access": False, "gbs": 12.0}
    heat = {c.name: c for c in figures(make_run("interconnect", [moved], meta))}["interconnect-peer-matrix"]
    assert heat.figure.data[0].text[0][1] == "12<br>via host"
    assert "on 2 nodes (a, b)" in charts["interconnect-bandwidth"].figure.layout.title.text
    assert InterconnectMeta.from_meta(meta).hosts == ("a", "b")

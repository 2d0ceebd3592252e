"""Which rank the others wait for: collectives matched across a job's ranks, on three rank traces built here with
their waits worked out by hand (no public multi-rank trace records the collectives' figures: the two real recsys
ranks here do not, and they match nothing), and a file whose time origin differs from the others'."""

import json

import pytest

pytest.importorskip("msgspec")

from render import trace_view
from tests.core.workload.test_hostile_files import bounded_cli
from tests.core.workload.test_ranks import RANK0, RANK1, imported
from tests.factories import make_run

# Three all-reduces (starts in µs; every rank's kernel ends 10 µs after the last start):
#   call 1: rank 0 at 1000, rank 1 at 1010, rank 2 at 1040 → rank 2 last; waits 40, 30, 0
#   call 2: 2000, 2050, 2020 → rank 1 last; waits 50, 0, 30
#   call 3: 3000, 3005, 3100 → rank 2 last; waits 100, 95, 0
# waited: rank 0 190, rank 1 125, rank 2 30 = 345 µs; rank 2 arrives last at 2 of 3.
# Communication (each rank's collective kernels, none overlapping): rank 0 50 + 60 + 110 + its unmatched 5 µs
# broadcast = 225, rank 1 40 + 10 + 105 = 155, rank 2 10 + 40 + 10 = 60: 440 µs; the waits are 345 / 440 = 78.4 %.
STARTS = {0: (1000, 2000, 3000), 1: (1010, 2050, 3005), 2: (1040, 2020, 3100)}
LAST = (1040, 2050, 3100)


def rank_trace(rank: int) -> dict:
    def kernel(name, ts, dur, **args):
        return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur,
                "args": {"device": 0, "stream": 7, **args}}  # fmt: skip

    figures = {"Collective name": "allreduce", "In msg nelems": 1024, "Out msg nelems": 1024, "dtype": "Float",
               "Group size": 3, "Process Group Name": "0"}  # fmt: skip
    events = [kernel("sm90_xmma_gemm_bf16", 500, 100 + 10 * rank)]
    events += [kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", t, last + 10 - t, **figures)
               for t, last in zip(STARTS[rank], LAST)]  # fmt: skip
    if rank == 0:  # a broadcast no other rank made: matched with nothing
        events.append(kernel("ncclDevKernel_Broadcast_RING_LL", 4000, 5, **{**figures, "Collective name": "broadcast"}))
    if rank == 1:  # an earlier event: this file's time origin is 0, the others' 500
        events.append({"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": 1, "tid": 1, "ts": 0.5, "dur": 1})
    return {"distributedInfo": {"rank": rank, "world_size": 3, "backend": "nccl"}, "traceEvents": events}


@pytest.fixture
def three_files(tmp_path):
    paths = []
    for rank in range(3):
        path = tmp_path / f"rank-{rank}.json"
        path.write_text(json.dumps(rank_trace(rank)))
        paths.append(path)
    return paths


@pytest.fixture
def three_ranks(three_files):
    return imported(*three_files)


def test_each_rank_s_wait_for_the_last_to_arrive_by_hand(three_ranks):
    rows, meta = three_ranks
    got = {r["rank"]: (r["collectives"], r["waited_us"], r["last_arrivals"]) for r in rows if r["kind"] == "arrival"}
    assert got == {0: (3, 190.0, 0), 1: (3, 125.0, 1), 2: (3, 30.0, 2)}
    assert meta["arrivals"] == {"matched": 3, "last_rank": 2, "last_arrivals": 2, "waited_us": 345.0}
    found = next(f for f in meta["findings"] if f["kind"] == "arrival")
    assert found["text"].startswith(
        "rank 2 arrives last at 2 of 3 collectives matched across the ranks; the ranks waited 345.0 µs in all for "
        "the last to arrive (78.4% of their communication time): waiting for a peer, not moving data"
    )
    assert found["value"] == pytest.approx(100 * 345 / 440)


def test_ranks_without_the_collectives_figures_match_nothing_and_claim_nothing():
    rows, meta = imported(RANK0, RANK1)  # the real recsys ranks: NCCL kernels without Collective name or sizes
    assert meta["arrivals"]["matched"] == 0
    assert not [r for r in rows if r["kind"] == "arrival"]
    assert not [f for f in meta["findings"] if f["kind"] == "arrival"]


def test_the_page_s_table_and_the_text_say_the_same(three_ranks, three_files, data_dir):
    rows, meta = three_ranks
    table = trace_view.arrivals_ms(make_run("profiler-trace-ranks", rows, meta))
    assert table.to_dict("list") == {
        "rank": [0, 1, 2],
        "collectives matched": [3, 3, 3],
        "waited ms": [0.19, 0.125, 0.03],
        "arrived last": [0, 1, 2],
    }
    out = bounded_cli("trace", *map(str, three_files), "--no-save")
    assert out.code == 0, out.stderr[-2000:]
    assert (
        "collectives matched across the ranks: 3; rank 2 arrived last at 2; each rank's wait for the last to arrive: "
        "rank 0 190.0 µs, rank 1 125.0 µs, rank 2 30.0 µs"
    ) in out.stdout

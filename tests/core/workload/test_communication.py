"""Communication and the figures built on it, each against hand arithmetic on a hand-made trace: custom
all-reduce, NVSHMEM and DeepEP kernels read as communication; unions of activities recorded before the trace's
origin (its first timed event in file order); exposed communication within the span; the straggler named by its
compute, with where its extra time goes by kernel group."""

from __future__ import annotations

import json
import random
from decimal import Decimal

import numpy as np
import pytest

pytest.importorskip("msgspec")  # reading a trace decodes it with msgspec (core/workload/trace/file.py)

from core.workload.findings import ranked, ranks_findings
from core.workload.trace.file import COMM, COMPUTE
from core.workload.trace.intervals import merged
from core.workload.trace.ranks import combine, read_rank
from core.workload.trace.timeline import analyse_trace, read_trace, union_us

EPOCH = Decimal("1700000000000000")  # an epoch µs, as Kineto writes times


def event(name, ts, dur, stream=7, cat="kernel", corr=None):
    args = {"device": 0, "stream": stream} | ({"correlation": corr} if corr is not None else {})
    return {"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": stream, "ts": ts, "dur": dur, "args": args}


def write(path, events, **top):
    """JSON with times as the decimals given (a Decimal is written as its digits, not through a float)."""
    text = json.dumps({"traceEvents": events, **top}, default=str)
    for e in events:  # the decimals went out as strings: write them back as JSON numbers
        for key in ("ts", "dur"):
            if isinstance(e[key], Decimal):
                text = text.replace(f'"{key}": "{e[key]}"', f'"{key}": {e[key]}', 1)
    path.write_text(text)
    return path


CUSTOM_COLLECTIVES = [
    "void c10d::symmetric_memory::all_reduce_two_shot<c10::BFloat16, 8>(c10::BFloat16**, unsigned long)",
    "void c10d::symmetric_memory::all_reduce_one_shot<float, 4>(float**, unsigned long)",
    "void tensorrt_llm::kernels::lamport_initialize_kernel<float>(float*, int)",
    "void c10d::symmetric_memory::multimem_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16*, unsigned long)",
    "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 4>(vllm::RankData*, vllm::RankSignals, int)",
    "void sglang::cross_device_reduce_2stage<half, 8>(sglang::RankData*, sglang::RankSignals, int)",
    "nvshmemi_proxy_progress_kernel",
    "void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*, int*, int)",
    "void deep_ep::internode_ll::combine<false, 7168>(void*, void*, int)",
]


@pytest.mark.parametrize("name", CUSTOM_COLLECTIVES)
def test_custom_collectives_are_communication(tmp_path, name):
    # A GEMM [0, 10] on stream 7 and the collective [5, 25] on stream 9. By hand: compute 10, communication
    # 20, overlap [5, 10] = 5, exposed 20 − 5 = 15, busy = span = 25.
    trace = read_trace(write(tmp_path / "t.json", [event("ampere_sgemm_128x64_tn", 0, 10), event(name, 5, 20, 9)]))
    assert trace.activities.kind.tolist() == [COMPUTE, COMM]
    tables, m = analyse_trace(trace)
    got = {k: m[k] for k in ("compute_union_us", "communication_union_us", "compute_and_communication_us")}
    assert got == {"compute_union_us": 10.0, "communication_union_us": 20.0, "compute_and_communication_us": 5.0}
    assert (m["exposed_communication_us"], m["busy_us"], m["span_us"]) == (15.0, 25.0, 25.0)
    groups = {r.group: r.total_us for r in tables.groups if r.count}
    assert groups == {"matmul": 10.0, "communication": 20.0}


def test_activities_before_the_origin_give_true_unions(tmp_path):
    """The file's first timed event is a graph launch at EPOCH + 1000.5 µs, so the origin is EPOCH + 1000 and
    the activities recorded before it sit at negative times; times have sub-µs digits and one kernel overlaps an
    earlier one on its stream (a CUDA graph's replay), all as Kineto writes them."""
    at = {  # name: (start after EPOCH, duration), µs
        "gemm A": ("100.250", "10.500"),  # [-899.750, -889.250]
        "gemm B": ("105.125", "2.000"),  # [-894.875, -892.875], inside A on the same stream
        "vllm::cross_device_reduce_1stage": ("108.000", "4.250"),  # [-892.000, -887.750], stream 9
        "Memcpy DtoD": ("200.125", "1.375"),  # [-799.875, -798.500]
        "Memset": ("200.500", "0.250"),  # [-799.500, -799.250], inside the copy
        "gemm C": ("1001.750", "3.125"),  # [1.750, 4.875], after the origin
    }
    cats = {"Memcpy DtoD": "gpu_memcpy", "Memset": "gpu_memset"}
    streams = {"vllm::cross_device_reduce_1stage": 9}
    launch = {"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch", "ts": EPOCH + Decimal("1000.5"), "dur": 2}
    events = [launch] + [
        event(name, EPOCH + Decimal(ts), Decimal(dur), streams.get(name, 7), cats.get(name, "kernel"))
        for name, (ts, dur) in at.items()
    ]
    trace = read_trace(write(tmp_path / "rank-0.json", events))
    assert trace.origin_us == EPOCH + 1000 and trace.activities.start.min() == -899.75
    _, m = analyse_trace(trace)
    expected = {
        "span_us": Decimal("4.875") + Decimal("899.750"),  # 904.625
        "compute_union_us": Decimal("10.500") + Decimal("3.125"),  # A ∪ B ∪ C: 13.625
        "compute_kernel_time_us": Decimal("10.500") + Decimal("2.000") + Decimal("3.125"),  # 15.625
        "communication_union_us": Decimal("4.250"),
        "compute_and_communication_us": Decimal("-889.250") - Decimal("-892.000"),  # 2.750
        "exposed_communication_us": Decimal("-887.750") - Decimal("-889.250"),  # past A's end: 1.500
        "copy_union_us": Decimal("1.375"),  # the set lies inside the copy
        "memcpy_time_us": Decimal("1.375"),
        "memset_time_us": Decimal("0.250"),
        "busy_us": Decimal("-887.750") - Decimal("-899.750") + Decimal("1.375") + Decimal("3.125"),  # 16.5
    }
    assert {k: m[k] for k in expected} == {k: float(v) for k, v in expected.items()}
    assert m["idle_us"] == float(expected["span_us"] - expected["busy_us"])  # 888.125
    row = read_rank(tmp_path / "rank-0.json").row  # the rank's figures are the same unions
    assert (row.compute_us, row.communication_us, row.busy_us) == (13.625, 4.25, 16.5)


def brute_union(spans: list[tuple[int, int]]) -> int:
    """The union's length on a grid of whole µs: the cells any interval covers, counted."""
    return len({t for s, e in spans for t in range(s, e)})


def test_unions_of_random_intervals_with_negative_times_match_counted_cells():
    rng = random.Random(7)
    for _ in range(300):
        spans = [(s, s + rng.randint(0, 30)) for s in (rng.randint(-100, 50) for _ in range(rng.randint(1, 12)))]
        start, end = (np.array(x, dtype=float) for x in zip(*spans))
        assert union_us(start, end) == brute_union(spans), spans
        g_start, g_end = merged(start, end)
        assert (g_start[1:] > g_end[:-1]).all() and (g_end >= g_start).all()


def test_exposed_communication_never_exceeds_the_span(tmp_path):
    # Collectives at negative times: before the fix each merged interval ending before the origin was taken to end
    # at 0, so its length grew by the distance to the origin and the exposed share passed 100% of the span.
    kernels = [event("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 10 * i, 1, stream=9) for i in range(50)]
    kernels += [event("ampere_sgemm_128x64_tn", 10 * i + 5, 1) for i in range(50)]
    launch = {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 600, "dur": 1}
    _, m = analyse_trace(read_trace(write(tmp_path / "t.json", [launch, *kernels])))
    # by hand: span [−600, −104] = 496; 50 collectives of 1 µs, none overlapped by compute: exposed 50
    assert (m["span_us"], m["communication_union_us"], m["exposed_communication_us"]) == (496.0, 50.0, 50.0)
    assert m["busy_us"] == 100.0 and m["idle_us"] == 396.0


MS = 1000.0  # µs


def rank_trace(tmp_path, rank: int, embedding_ms: float, gemm_ms: float, wait_ms: float):
    """One rank of a 3-rank job on one stream: an embedding lookup, a GEMM, then vLLM's custom all-reduce that
    spins until every rank arrives (every rank ends at 110 ms)."""
    names = {
        "void split_embedding_codegen_forward_unweighted_kernel<float, float, float>": embedding_ms,
        "ampere_sgemm_128x64_tn": gemm_ms,
        "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 4>(vllm::RankData*, vllm::RankSignals, int)": wait_ms,
    }
    events, t = [], 0.0
    for name, ms in names.items():
        events.append(event(name, t, ms * MS))
        t += ms * MS
    info = {"rank": rank, "world_size": 3, "backend": "nccl"}
    return read_rank(write(tmp_path / f"rank-{rank}.json", events, distributedInfo=info))


def test_the_straggler_is_the_rank_that_computes_longest_not_the_one_that_waits(tmp_path):
    # compute (embedding + GEMM), ms: rank 0 70 + 30 = 100, rank 1 20 + 40 = 60, rank 2 40 + 40 = 80; the wait
    # in the all-reduce (10, 50, 30 ms) made each rank's "compute" 110 ms when it counted as compute.
    ranks = [
        rank_trace(tmp_path, 0, 70, 30, 10),
        rank_trace(tmp_path, 1, 20, 40, 50),
        rank_trace(tmp_path, 2, 40, 40, 30),
    ]
    tables, meta = combine(ranks)
    rows = tables.rows()
    by_rank = {r["rank"]: r for r in rows if r["kind"] == "rank"}
    assert [by_rank[r]["compute_us"] for r in range(3)] == [100 * MS, 60 * MS, 80 * MS]
    assert [by_rank[r]["exposed_communication_us"] for r in range(3)] == [10 * MS, 50 * MS, 30 * MS]
    s = meta["straggler"]
    # against the other ranks: the median of 60 and 80 = 70; margin 30 ms = 42.9 %
    assert (s["rank"], s["median_compute_us"], s["margin_us"]) == (0, 70 * MS, 30 * MS)
    assert s["margin_pct"] == pytest.approx(100 * 30 / 70)
    # by group (summed durations): embedding 70 against the median of the others' 20, 40 = 30 → +40 ms;
    # matmul 30 against the median of 40, 40 = 40 → −10 ms; communication is no compute group
    assert s["groups"] == [
        {"group": "embedding", "kernel_time_us": 70 * MS, "median_kernel_time_us": 30 * MS, "extra_us": 40 * MS},
        {"group": "matmul", "kernel_time_us": 30 * MS, "median_kernel_time_us": 40 * MS, "extra_us": -10 * MS},
    ]
    found = ranked(ranks_findings(meta, tables))
    # rank 0 also starts the one matched all-reduce last: the others wait 40 + 20 ms of their 90 ms of communication
    assert found[0].text == (
        "rank 0 holds the job back: it arrives last at 1 of 1 collectives matched across the ranks (1 by kernel name "
        "and stream order) (the ranks waited 60.0 ms in all for the last to arrive, 66.7% of their communication); "
        "its compute is +42.9% over the other ranks' median (100.0 ms against 70.0 ms); by kernel group, embedding "
        "+40.0 of +30.0 ms (summed durations against the other ranks' median)"
    )
    # rank 1 waits 50 of its 110 ms in the all-reduce, exposed: 45.5% of its span
    exposed = next(f for f in found if f.kind == "exposed_communication")
    # and 40 of the 50 ms waited for rank 0, whose all-reduce began at 100 ms (its own at 60 ms)
    assert exposed.text.startswith("rank 1: exposed communication 45.5% of the span")
    assert exposed.text.endswith(
        "; its collectives waited 40.0 ms in all for the last rank to arrive (rank 0 arrives last most often)"
    )
    assert exposed.value == pytest.approx(100 * 50 / 110)


def test_a_union_never_exceeds_the_sum_of_its_parts(tmp_path):
    # Three disjoint kernels with nanosecond digits (origin 0: the launch call is the first timed event). Their
    # union and their sum are both 1.997 + 2.869 + 1.165 = 6.031 µs; added as floats in start order and in file
    # order they differ in the last bit, the union above the sum.
    at = [("2.541", "1.997"), ("6.737", "2.869"), ("5.020", "1.165")]
    launch = {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 0, "dur": Decimal("0.5")}
    kernels = [event("ampere_sgemm_128x64_tn", Decimal(ts), Decimal(dur)) for ts, dur in at]
    kernels += [event("Memcpy HtoD", Decimal(ts) + 10, Decimal(dur), cat="gpu_memcpy") for ts, dur in at]
    _, m = analyse_trace(read_trace(write(tmp_path / "t.json", [launch, *kernels])))
    assert m["compute_union_us"] == m["compute_kernel_time_us"] == float(Decimal("6.031"))
    assert m["copy_union_us"] == m["memcpy_time_us"] == float(Decimal("6.031"))
    assert m["busy_us"] == float(Decimal("12.062")) and m["span_us"] == float(Decimal("19.606") - Decimal("2.541"))

"""Each collective a trace recorded with its figures, as nccl-tests prints them: on a real A100 DDP trace against a
computation from the file's own kernel events (plain JSON, nccl-tests' size rule and factors written out here),
and on a hand-made trace for the rules a real file does not exercise (all_gather's output, a group of four, a
collective or a dtype nccl-tests has no figure for, malformed figures)."""

import gzip
import json
import statistics

import pytest

pytest.importorskip("msgspec")

from core.experiment import config_from_dict, drive
from core.experiments.profiler_trace import ProfilerTraceConfig, run
from core.rows.trace import TraceTables
from core.workload.trace.collective_calls import collective_rows
from core.workload.trace.file import read_trace
from core.workload.trace.text import collective_lines
from tests.conftest import ROOT

DDP_A100 = ROOT / "examples" / "traces" / "resnet50_ddp_a100.json.gz"  # HTA's nccl_data.json.gz (examples/README.md)
B200_ALLGATHER = ROOT / "tests" / "data" / "workload" / "tracelens_b200_allgather_trimmed.json.gz"  # its README


def test_a_real_ddp_trace_s_collectives_against_its_own_kernel_events():
    events = json.load(gzip.open(DDP_A100))["traceEvents"]
    calls: dict[tuple, list[float]] = {}
    for e in events:
        args = e.get("args") or {}
        if e.get("ph") == "X" and e.get("cat") == "kernel" and "Collective name" in args:
            key = (args["Collective name"], args["dtype"], args["Group size"], args["In msg nelems"])
            calls.setdefault(key, []).append(float(e["dur"]))
    # every call here is an all_reduce or a broadcast of 2 ranks: the size is the input buffer, the bus factor
    # 2(2 − 1)/2 = 1 for all_reduce and 1 for broadcast; Float is 4 bytes, Long 8
    width = {"Float": 4, "Long": 8}
    names = {"allreduce": "all_reduce", "broadcast": "broadcast"}
    want = {}
    for (name, dtype, group, elements), durations in calls.items():
        median = statistics.median(durations)
        nbytes = elements * width[dtype]
        algbw = nbytes / (median * 1e-6) / 1e9
        want[(names[name], dtype, group, nbytes)] = (len(durations), sum(durations), median, algbw, algbw * 1.0)
    assert len(want) == 7 and sum(n for n, *_ in want.values()) == 21
    trace = read_trace(DDP_A100)
    got = {
        (r.collective, r.dtype, r.group_size, r.bytes): (r.calls, r.total_us, r.median_us, r.algbw_gbs, r.busbw_gbs)
        for r in collective_rows(trace, 0)
    }
    assert got.keys() == want.keys()
    for key, figures in want.items():
        assert got[key] == pytest.approx(figures, rel=1e-9)  # times since the origin, as floats
    # the largest by time first: 8,196,000 B of Float all-reduced three times, 11.8 ms in all
    first = collective_rows(trace, 0)[0]
    assert (first.collective, first.bytes, first.calls) == ("all_reduce", 2_049_000 * 4, 3)


def test_a_real_all_gather_of_eight_b200s_by_hand():
    """TraceLens' B200 trace (rank 0 of 8, trimmed to its one collective): `_allgather_base` of 25,136 bf16 in and
    201,088 out (8 × 25,136) in 21.953 µs. nccl-tests counts the output: 201,088 × 2 = 402,176 B; algbw =
    402,176 B / 21.953 µs = 18.32 GB/s; busbw × (8 − 1)/8 = 16.03 GB/s."""
    (row,) = collective_rows(read_trace(B200_ALLGATHER), 0)
    assert (row.collective, row.dtype, row.group_size, row.bytes, row.calls) == (
        "all_gather", "BFloat16", 8, 402_176, 1,
    )  # fmt: skip
    assert row.median_us == pytest.approx(21.953, abs=1e-9)
    assert row.algbw_gbs == pytest.approx(402_176 / 21.953e-6 / 1e9, rel=1e-9)
    assert row.busbw_gbs == pytest.approx(402_176 / 21.953e-6 / 1e9 * 7 / 8, rel=1e-9)
    assert round(row.algbw_gbs or 0.0, 2) == 18.32 and round(row.busbw_gbs or 0.0, 2) == 16.03


def test_the_import_stores_them_and_the_cli_text_lists_them():
    cfg = config_from_dict(ProfilerTraceConfig, {"path": str(DDP_A100)})
    out, _ = drive(run(cfg, None))  # type: ignore[arg-type]  # the experiment reads no context
    stored = TraceTables.from_rows(out.rows).collectives
    assert len(stored) == 7 and stored == collective_rows(read_trace(DDP_A100), out.meta["device"])
    text = "\n".join(collective_lines(stored))
    assert (
        "all_reduce     8,196,000 B (7.8 MiB) Float ×3 in a group of 2: median 3.3 ms" in text
    )  # 8196000 / 2²⁰ = 7.82


def kernel(ts: int, dur: int, args: dict) -> dict:
    return {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)", "pid": 0,
            "tid": 7, "ts": ts, "dur": dur, "args": {"device": 0, "stream": 7, **args}}  # fmt: skip


def figures(name, dtype, group, sent, got) -> dict:
    return {"Collective name": name, "dtype": dtype, "Group size": group, "In msg nelems": sent, "Out msg nelems": got}


def test_sizes_factors_and_what_has_no_figure_by_hand(tmp_path):
    events = [
        # all_gather of 4 ranks, 1,024 bf16 in, 4,096 out: 8,192 B (the output), 10 µs → algbw 0.8192 GB/s,
        # busbw × 3/4 = 0.6144
        kernel(0, 10, figures("_allgather_base", "BFloat16", 4, 1024, 4096)),
        # reduce_scatter of 4: the input, 4,096 fp32 = 16,384 B; median of 20 and 40 µs = 30 → 0.546133… GB/s, × 3/4
        kernel(100, 20, figures("reduce_scatter_tensor", "Float", 4, 4096, 1024)),
        kernel(200, 40, figures("reduce_scatter_tensor", "Float", 4, 4096, 1024)),
        # a send nccl-tests has no figure for, and a dtype of unknown width: calls and time, no bandwidth
        kernel(300, 5, figures("send", "Float", 2, 10, 10)),
        kernel(400, 6, figures("allreduce", "Quaternion", 2, 10, 10)),
        # malformed figures: not a collective call at all
        kernel(500, 7, figures("allreduce", "Float", 2, "many", 10)),
        kernel(600, 7, figures("allreduce", "Float", 0, 10, 10)),
        kernel(700, 7, figures("x" * 65, "Float", 2, 10, 10)),
        kernel(800, 7, figures(["allreduce"], "Float", 2, 10, 10)),
    ]
    path = tmp_path / "calls.json"
    path.write_text(json.dumps({"traceEvents": events}))
    rows = {(r.collective, r.dtype): r for r in collective_rows(read_trace(path), 0)}
    assert set(rows) == {("all_gather", "BFloat16"), ("reduce_scatter", "Float"), ("send", "Float"),
                         ("all_reduce", "Quaternion")}  # fmt: skip
    gather, scatter = rows[("all_gather", "BFloat16")], rows[("reduce_scatter", "Float")]
    assert (gather.bytes, gather.algbw_gbs, gather.busbw_gbs) == pytest.approx((8192, 0.8192, 0.6144))
    assert (scatter.bytes, scatter.calls, scatter.median_us, scatter.total_us) == (16384, 2, 30.0, 60.0)
    assert scatter.algbw_gbs == pytest.approx(16384 / 30e-6 / 1e9)
    assert scatter.busbw_gbs == pytest.approx(16384 / 30e-6 / 1e9 * 0.75)
    for unrated in (rows[("send", "Float")], rows[("all_reduce", "Quaternion")]):
        assert unrated.bytes is None and unrated.algbw_gbs is None and unrated.busbw_gbs is None
        assert unrated.calls == 1

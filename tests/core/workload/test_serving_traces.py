"""Two serving traces recorded on MI300X-class GPUs (tests/data/workload/README.md): a vLLM decode step of a
mixture-of-experts model through HIP graphs, and an SGLang decode step. Every expected figure is computed here
from the file's own events."""

import gzip
import json

import pytest

pytest.importorskip("msgspec")

from core.rows.trace import TraceTables
from core.workload.trace.file import read_trace
from core.workload.trace.host_gaps import host_gaps
from core.workload.trace.op_flops import reference
from core.workload.trace.ops import GRAPH_OP, NO_OP, op_breakdown
from core.workload.trace.text import report_lines
from core.workload.trace.timeline import analyse_trace
from tests.core.workload.traces import DATA, SGLANG, VLLM_MOE, trace_events


def test_a_trace_whose_gpus_have_empty_names_names_no_gpu():
    """vLLM's ROCm trace lists eight GPUs, each named "": no name is taken from that (its datasheet comes from the
    properties it lists, tests/core/workload/test_op_flops.py)."""
    with gzip.open(VLLM_MOE) as f:
        assert {d["name"] for d in json.load(f)["deviceProperties"]} == {""}
    trace = read_trace(VLLM_MOE)
    tables, meta = analyse_trace(trace)
    rows = tables.rows()
    assert trace.gpu_names == {} and meta["device_name"] is None
    assert "(the file names no GPU; the file has GPU 2)" in report_lines(meta, TraceTables.from_rows(rows))[0]
    assert reference(trace, meta["device"])[1].startswith("AMD Instinct MI300X (the trace names no GPU;")


def test_triton_moe_gemms_are_matmul():
    """triton_kernels' ``_matmul_ogs_…`` GEMMs (65.7% of this step's kernel time) were "other"."""
    kernels = [e for e in trace_events(VLLM_MOE) if e.get("cat") == "kernel"]
    moe = sum(e["dur"] for e in kernels if e["name"].startswith("_matmul_ogs_"))
    _, meta = analyse_trace(read_trace(VLLM_MOE))
    rule = next(r for r in meta["rules"] if r["rule"].startswith("Triton MoE GEMMs"))
    assert rule["group"] == "matmul" and rule["count"] == 48 and rule["us"] == pytest.approx(moe, rel=1e-9)
    other = sum(r["us"] for r in meta["rules"] if r["group"] == "other")
    assert other < 0.05 * sum(e["dur"] for e in kernels)


@pytest.mark.parametrize("path", sorted(DATA.glob("*.json*")), ids=lambda p: p.name)
def test_no_operator_holds_more_of_the_gaps_than_its_cause(path):
    """A bound any file must keep: an operator's time in the gaps is at most its cause's."""
    trace = read_trace(path)
    _, meta = analyse_trace(trace)
    if not meta.get("gpu_activities"):
        return
    summary, _ = host_gaps(trace, meta["device"])
    for cause in summary.get("causes", []):
        for op in cause["top_ops"]:
            assert op["time_us"] <= cause["time_us"] + 1e-6, (cause["cause"], op)


def test_an_operator_that_calls_itself_counts_its_time_once():
    """SGLang's ``populate_from_forward_batch``: ``aten::copy_`` inside ``aten::copy_`` around one 463 ms
    ``hipMemcpyWithStream`` device→host copy. The two calls hold the outer one's time at most — they were
    summed (926.1 ms, twice the GPU's 464 ms of idle)."""
    events = trace_events(SGLANG)
    copies = sorted((e for e in events if e["name"] == "aten::copy_" and e["dur"] > 1000), key=lambda e: e["ts"])
    outer, inner = copies
    assert outer["ts"] <= inner["ts"] and inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"]
    memcpy = next(e for e in events if e["name"] == "hipMemcpyWithStream")
    trace = read_trace(SGLANG)
    _, meta = analyse_trace(trace)
    summary, _ = host_gaps(trace, meta["device"])
    cause = summary["causes"][0]
    assert cause["cause"] == "device→host copy" and cause["share"] > 0.99
    copy = next(o for o in cause["top_ops"] if o["op"] == "aten::copy_")
    assert copy["count"] == 2 and memcpy["dur"] * 0.999 <= copy["time_us"] <= outer["dur"]


def test_a_graph_s_replayed_kernels_are_said_to_be_its_replay():
    """vLLM's decode step: one ``hipGraphLaunch`` replays 421 kernels (their correlation id is the launch's), no
    operator around it; they read "no launch call in the trace, or none around it" while the launch is there."""
    events = trace_events(VLLM_MOE)
    (launch,) = [e for e in events if e["name"] == "hipGraphLaunch"]
    replayed = [
        e for e in events if e.get("cat") == "kernel" and e["args"]["correlation"] == launch["args"]["correlation"]
    ]
    trace = read_trace(VLLM_MOE)
    _, meta = analyse_trace(trace)
    rows = {r["op"]: r for r in op_breakdown(trace, meta["device"])["ops"]}
    graph = rows[GRAPH_OP]
    assert graph["kernels"] == len(replayed) == 421 and graph["calls"] == 0
    assert graph["gpu_time_us"] == pytest.approx(sum(e["dur"] for e in replayed), rel=1e-9)
    assert NO_OP not in rows  # every other activity has its operator

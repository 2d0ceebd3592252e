"""Profiler traces: real GPU traces against HolisticTraceAnalysis, a hand-made trace against hand arithmetic,
and refusals. The real files and the HTA figures are described in tests/data/workload/README.md."""

import gzip
import json
import shutil

import pytest

from core.intake import InputRefused
from core.workload.trace import analyse_trace, read_trace, union_us
from tests.conftest import ROOT

DATA = ROOT / "tests" / "data" / "workload"
V100 = DATA / "kineto_v100_trace.json"
A100 = DATA / "hta_a100_backward_excerpt.json"
# HolisticTraceAnalysis 0.5.0 on kineto_v100_trace.json (README): temporal breakdown and kernel breakdown.
HTA_V100 = {
    "kernel_time_us": 48.0,
    "idle_us": 11_896.0,
    "span_us": 11_946.0,
    "compute_union_us": 48.0,
    "memory_us": 2.0,
}


def by_kind(rows, kind):
    return [r for r in rows if r["kind"] == kind]


def test_real_v100_trace_agrees_with_holistic_trace_analysis():
    rows, m = analyse_trace(read_trace(V100))
    assert m["device_name"] == "Tesla V100-DGXS-32GB" and m["kernel_count"] == 30
    assert m["kernel_time_us"] == pytest.approx(HTA_V100["kernel_time_us"], rel=0.01)
    assert m["idle_us"] == pytest.approx(HTA_V100["idle_us"], rel=0.01)
    assert m["span_us"] == pytest.approx(HTA_V100["span_us"], rel=0.01)
    assert m["compute_union_us"] == pytest.approx(HTA_V100["compute_union_us"], rel=0.01)
    assert m["memcpy_time_us"] == pytest.approx(HTA_V100["memory_us"], rel=0.01)
    steps = by_kind(rows, "step")
    assert [s["step"] for s in steps] == [2] and steps[0]["kernel_time_us"] == 48.0
    assert m["step_basis"].startswith("CPU ProfilerStep spans")
    groups = {g["group"]: g for g in by_kind(rows, "group")}
    assert sum(g["total_us"] for g in groups.values()) == 48.0 + 2.0  # every kernel and copy in one group
    assert groups["matmul"]["count"] == 5  # 2 volta_sgemm, 2 gemmSN_TN, 1 gemmSN_NN
    assert groups["memcpy"]["count"] == 2


def test_holistic_trace_analysis_itself_where_installed(tmp_path):
    hta = pytest.importorskip(
        "hta.trace_analysis",
        reason="HolisticTraceAnalysis is not installed (pip install HolisticTraceAnalysis==0.5.0 to compare live)",
    )
    shutil.copy(V100, tmp_path / "rank-0.json")
    t = hta.TraceAnalysis(trace_dir=str(tmp_path))
    temporal = t.get_temporal_breakdown(visualize=False).iloc[0]
    _, kernels = t.get_gpu_kernel_breakdown(visualize=False, include_memory_kernels=False)
    _, m = analyse_trace(read_trace(V100))
    assert m["kernel_time_us"] == pytest.approx(float(kernels["sum (us)"].sum()), rel=0.01)
    assert m["idle_us"] == pytest.approx(float(temporal["idle_time(us)"]), rel=0.01)


def test_real_a100_excerpt():
    rows, m = analyse_trace(read_trace(A100))
    assert m["kernel_time_us"] == 45.0 and m["busy_us"] == 45.0 and m["idle_us"] == 0.0
    assert [k["group"] for k in by_kind(rows, "kernel")] == ["matmul"]  # a cutlass tensor-op GEMM
    assert m["rank"] == 0


def hand_trace() -> dict:
    """Device 0, µs: compute [0,10] [5,15] and [30,35]; NCCL [12,20]; memcpy [18,25]; device 1: one kernel.
    GPU-side steps #1 = [0,20), #2 = [20,40).

    kernel time = 10 + 10 + 5 + 8 = 33; busy = [0,25] ∪ [30,35] = 30; span 35; idle 5;
    compute ∪ = [0,15] ∪ [30,35] = 20; comm 8; compute ∩ comm = [12,15] = 3; exposed comm 5;
    copies 7; comm ∩ copies = [18,20] = 2; compute ∩ copies = 0.
    Step 1 (starts in [0,20)): compute 20 + nccl 8 + memcpy 7 → kernels 28; step 2: compute [30,35] → 5.
    """

    def k(name, ts, dur, device=0, cat="kernel", stream=7):
        return {
            "ph": "X",
            "cat": cat,
            "name": name,
            "pid": device,
            "tid": stream,
            "ts": ts,
            "dur": dur,
            "args": {"device": device, "stream": stream, "correlation": ts},
        }

    return {
        "traceEvents": [
            k("ampere_sgemm_128x64_tn", 0, 10),
            k("vectorized_elementwise_kernel", 5, 10, stream=8),
            k("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 12, 8, stream=20),
            k("Memcpy DtoH", 18, 7, cat="gpu_memcpy"),
            k("softmax_warp_forward", 30, 5),
            k("other_gpu", 0, 1, device=1),
            {"ph": "X", "cat": "gpu_user_annotation", "name": "ProfilerStep#1", "pid": 0, "tid": 7, "ts": 0, "dur": 20},
            {
                "ph": "X",
                "cat": "gpu_user_annotation",
                "name": "ProfilerStep#2",
                "pid": 0,
                "tid": 7,
                "ts": 20,
                "dur": 20,
            },
            {"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "python"}},
        ]
    }


def test_a_hand_made_trace_by_hand(tmp_path):
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(json.dumps(hand_trace()).encode()))
    rows, m = analyse_trace(read_trace(path))
    assert m["device"] == 0 and m["devices"] == [0, 1]
    expected = {
        "kernel_time_us": 33,
        "busy_us": 30,
        "span_us": 35,
        "idle_us": 5,
        "compute_union_us": 20,
        "communication_union_us": 8,
        "compute_and_communication_us": 3,
        "exposed_communication_us": 5,
        "copy_union_us": 7,
        "communication_and_copy_us": 2,
        "compute_and_copy_us": 0,
        "communication_kernel_time_us": 8,
        "memcpy_time_us": 7,
    }
    assert {key: m[key] for key in expected} == pytest.approx(expected)
    assert m["streams"] == [7, 8, 20]
    steps = {s["step"]: s for s in by_kind(rows, "step")}
    assert steps[1]["kernel_time_us"] == 28 and steps[1]["memcpy_time_us"] == 7 and steps[2]["kernel_time_us"] == 5
    assert steps[1]["communication_us"] == 8 and steps[2]["attention-softmax_us"] == 5
    assert m["step_basis"].startswith("GPU-side")
    busy = by_kind(rows, "busy")
    assert len(busy) == 2000
    assert sum(b["busy_share"] for b in busy) * 35 / 2000 == pytest.approx(30)  # the bins add up to busy


def test_union_of_intervals():
    import numpy as np

    assert union_us(np.array([0.0, 1, 10]), np.array([5.0, 3, 12])) == 7.0
    assert union_us(np.array([]), np.array([])) == 0.0


@pytest.mark.parametrize(
    "content, reason",
    [
        (b"", "empty"),
        (b'{"traceEvents": [1, 2]}', "holds no trace event"),
        (b'{"segments": [], "device_traces": []}', "not a Chrome/Kineto profiler trace"),
        (b'{"traceEvents": [{"ph": "X"', "not valid JSON"),
        (b"\x80\x04\x95", "not UTF-8|not valid JSON"),
        (gzip.compress(b'{"traceEvents": []}')[:-5], "gzip|truncated"),
    ],
)
def test_not_a_trace_is_refused(tmp_path, content, reason):
    path = tmp_path / "t.json"
    path.write_bytes(content)
    with pytest.raises(InputRefused, match=reason):
        read_trace(path)


def test_a_cpu_only_trace_says_it_has_no_gpu_activity(tmp_path):
    path = tmp_path / "cpu.json"
    path.write_text(json.dumps({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 5}]}))
    rows, m = analyse_trace(read_trace(path))
    assert rows == [] and "no GPU kernels" in m["note"]

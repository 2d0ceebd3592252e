"""Profiler traces: real GPU traces against HolisticTraceAnalysis, a hand-made trace against hand arithmetic,
and refusals. The real files and the HTA figures are described in tests/data/workload/README.md."""

import gzip
import json
import shutil

import pytest

pytest.importorskip("msgspec")  # reading a trace decodes it with msgspec (core/workload/trace/file.py)

from core.errors import InputRefused
from core.rows.trace import TraceTables
from core.workload.trace.text import report_lines
from core.workload.trace.timeline import analyse_trace, read_trace, union_us
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
    tables, m = analyse_trace(read_trace(V100))
    rows = tables.rows()
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
    assert groups["memory"]["count"] == 2  # the two memcpys
    rules = {r["rule"]: r for r in m["rules"]}
    assert rules["memcpy (by kind)"]["count"] == 2 and rules["memcpy (by kind)"]["us"] == 2.0
    assert sum(r["count"] for r in m["rules"]) == 32 and sum(r["us"] for r in m["rules"]) == 50.0


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
    tables, m = analyse_trace(read_trace(A100))
    rows = tables.rows()
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
    tables, m = analyse_trace(read_trace(path))
    rows = tables.rows()
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
    assert steps[1]["communication_us"] == 8 and steps[2]["attention_us"] == 5  # softmax_warp_forward
    assert m["step_basis"].startswith("GPU-side")
    busy = by_kind(rows, "busy")
    assert len(busy) == 2000
    assert sum(b["busy_share"] for b in busy) * 35 / 2000 == pytest.approx(30)  # the bins add up to busy


def test_union_of_intervals():
    import numpy as np

    assert union_us(np.array([0.0, 1, 10]), np.array([5.0, 3, 12])) == 7.0
    assert union_us(np.array([]), np.array([])) == 0.0


def test_the_gaps_of_a_union_by_hand():
    import numpy as np

    from core.workload.trace.intervals import union_gaps

    # sorted by start: [0, 5] holds [1, 3]; [10, 12] begins past 5; [11, 20] overlaps it; [25, 30] past 20
    s, e = np.array([0, 1, 10, 11, 25]), np.array([5, 3, 12, 20, 30])
    g0, g1, opener = union_gaps(s, e)
    assert (g0.tolist(), g1.tolist(), opener.tolist()) == ([5, 20], [10, 25], [2, 4])
    assert [len(x) for x in union_gaps(np.zeros(0), np.zeros(0))] == [0, 0, 0]


@pytest.mark.parametrize(
    "content, reason",
    [
        (b"", "empty"),
        (b'{"traceEvents": [1, 2]}', "holds no trace event"),
        (b'{"segments": [], "device_traces": []}', "not a Chrome/Kineto profiler trace"),
        (b'{"traceEvents": [{"ph": "X"', "not valid JSON"),
        (b"\x80\x04\x95", "not UTF-8|not valid JSON"),
        (gzip.compress(b'{"traceEvents": []}', mtime=0)[:-5], "gzip|truncated"),
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
    tables, m = analyse_trace(read_trace(path))
    rows = tables.rows()
    assert rows == [] and "no GPU kernels" in m["note"]


RECSYS = DATA / "hta_recsys_sampled_rank0.json.gz"
# HolisticTraceAnalysis 0.5.0 on hta_recsys_sampled_rank0.json.gz (README), include_last_profiler_step=True
# (the whole trace), idle by cause summed over the five streams; and with HTA's default (the last step left
# out as possibly incomplete), which is ProfilerStep#551.
HTA_RECSYS = {
    "idle_us": 675_191.0,
    "compute_union_us": 210_320.0,
    "span_us": 1_222_847.0,
    "host_wait_us": 3_525_804.0,
    "kernel_wait_us": 3_966.0,
    "other_wait_us": 701_924.0,
    "launched": 1204,
    "short_kernels": 282,
    "launch_delay_mean_us": 17_059.549833887042,  # HTA's: start − the launch call's end, ≥ 0
}
HTA_RECSYS_STREAMS = {  # stream: (host wait, kernel wait, other), µs
    7: (397_917.0, 3_765.0, 598_335.0),
    23: (1_214_793.0, 160.0, 34.0),
    25: (560_120.0, 35.0, 100_413.0),
    84: (794_901.0, 6.0, 3_142.0),
    203: (558_073.0, 0.0, 0.0),
}
HTA_RECSYS_STEP_551 = {"host_wait_us": 958_796.0, "kernel_wait_us": 2_070.0, "other_wait_us": 309_639.0}
HTA_RECSYS_STEP_551_LAUNCH = {"launched": 602, "shorter_than_launch_call": 140}
TOLERANCE = 0.001  # relative: the file has whole-µs times only, so the two should agree to the µs


def test_real_recsys_trace_idle_causes_and_launches_agree_with_holistic_trace_analysis():
    tables, m = analyse_trace(read_trace(RECSYS))
    rows = tables.rows()
    assert m["idle_us"] == pytest.approx(HTA_RECSYS["idle_us"], rel=TOLERANCE)
    assert m["span_us"] == pytest.approx(HTA_RECSYS["span_us"], rel=TOLERANCE)
    assert m["compute_union_us"] == pytest.approx(HTA_RECSYS["compute_union_us"], rel=TOLERANCE)
    for cause in ("host_wait_us", "kernel_wait_us", "other_wait_us"):  # HTA's sums over streams, named so
        assert m["idle_causes_summed_over_streams"][cause] == pytest.approx(HTA_RECSYS[cause], rel=TOLERANCE), cause
    streams = {r["stream"]: r for r in by_kind(rows, "idle")}
    assert set(streams) == set(HTA_RECSYS_STREAMS)
    for stream, (host, kernel, other) in HTA_RECSYS_STREAMS.items():
        got = streams[stream]
        assert (got["host_wait_us"], got["kernel_wait_us"], got["other_wait_us"]) == pytest.approx(
            (host, kernel, other), rel=TOLERANCE
        ), stream
    launch = m["launch"]
    assert launch["launched"] == HTA_RECSYS["launched"]
    assert launch["shorter_than_launch_call"] == HTA_RECSYS["short_kernels"]  # HTA's, under its own name
    assert launch["queue_delay_mean_us"] == pytest.approx(HTA_RECSYS["launch_delay_mean_us"], rel=TOLERANCE)
    assert sum(r["count"] for r in by_kind(rows, "launch_delay")) == HTA_RECSYS["launched"]
    steps = {r["step"]: r for r in by_kind(rows, "step")}
    assert sorted(steps) == [551, 552]
    for cause, us in HTA_RECSYS_STEP_551.items():
        summed = cause.removesuffix("_us") + "_summed_over_streams_us"
        assert steps[551][summed] == pytest.approx(us, rel=TOLERANCE), cause
    assert steps[551]["launched"] == HTA_RECSYS_STEP_551_LAUNCH["launched"]
    assert steps[551]["shorter_than_launch_call"] == HTA_RECSYS_STEP_551_LAUNCH["shorter_than_launch_call"]


def test_real_recsys_trace_groups_fbgemm_is_not_matmul():
    """The old substring "gemm" called 156.8 ms of this trace matmul, 88.8 ms of it embedding lookups and
    fbgemm_gpu permutes and FP8 quantisation. Figures by a direct sum over the file's kernel events."""
    tables, m = analyse_trace(read_trace(RECSYS))
    rows = tables.rows()
    groups = {g["group"]: g for g in by_kind(rows, "group")}
    assert groups["matmul"]["total_us"] == 67_991.0  # CUTLASS, ampere_sgemm, cuBLAS gemv/splitK/epilogue
    assert groups["embedding"]["total_us"] == 85_903.0
    assert groups["communication"]["total_us"] == 396_199.0  # 10 ncclKernel_SendRecv
    rules = {r["rule"]: r for r in m["rules"]}
    assert rules["fbgemm_gpu ops (sparse permutes, FP8 quantize: no GEMM)"]["count"] == 30
    assert rules["CUTLASS"]["count"] == 308
    assert sum(r["us"] for r in m["rules"]) == pytest.approx(
        m["kernel_time_us"] + m["memcpy_time_us"] + m["memset_time_us"]
    )
    kernels = {k["name"]: k["group"] for k in by_kind(rows, "kernel")}
    assert all(g != "matmul" for n, g in kernels.items() if "fbgemm" in n or "embedding" in n)


def launch_trace() -> dict:
    """Device 0. Launch calls (start, duration) and the activity each launched, µs:

    stream 7: K1 call (0, 5) → [10, 20]; K2 (25, 4) → [30, 32]; K3 (26, 3) → [40, 41]; K4 (27, 3) → [100, 150]
    stream 8: K5 (28, 2) → [50, 60]; memcpy (90, 10) → [95, 96]

    Gaps (HTA's rules): K2 30 − 20 = 10, its call at 25 > 20 → host wait; K3 40 − 32 = 8, call 26 < 32 and
    8 < 30 → kernel wait; K4 100 − 41 = 59, call 27 < 41, 59 ≥ 30 → other; memcpy 95 − 60 = 35, call 90 > 60 →
    host wait. Host 45, kernel 8, other 59.
    Launch delay (start − call start): 10, 5, 14, 73, 22, 5 → median 12, mean 129/6 = 21.5, max 73;
    HTA's (start − call end, ≥ 0): 5, 1, 11, 70, 20, 0 → mean 107/6. Shorter than the call (HTA's short
    kernels): K2 (2 < 4), K3 (1 < 3), memcpy (1 < 10) → 3 of 6. Launch-bound (the call ended after every earlier
    activity of the device had: the GPU had nothing queued), in start order with the latest end before: K1 first
    (none before); K2 call ends 29 ≥ 20 → bound, 10 µs idle before it; K3 29 < 32; K5 30 < 41; memcpy 100 ≥ 60 →
    bound, 35 µs idle before it; K4 30 < 96 → 2 of 6, 45 µs.
    CPU steps #1 [0, 27) and #2 [27, 100), kernels placed by their call: #1 K1 K2 K3 (host 10, kernel 8,
    short 2 of 3, bound 1: K2), #2 K4 K5 memcpy (host 35, other 59, short 1 of 3, bound 1: the memcpy).
    """

    def launch(ts, dur, corr):
        return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": ts,
                "dur": dur, "args": {"correlation": corr}}  # fmt: skip

    def act(name, ts, dur, corr, stream, cat="kernel"):
        return {"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": stream, "ts": ts, "dur": dur,
                "args": {"device": 0, "stream": stream, "correlation": corr}}  # fmt: skip

    def step(n, ts, dur):
        return {
            "ph": "X",
            "cat": "user_annotation",
            "name": f"ProfilerStep#{n}",
            "pid": 1,
            "tid": 1,
            "ts": ts,
            "dur": dur,
        }

    calls = [(0, 5), (25, 4), (26, 3), (27, 3), (28, 2), (90, 10)]
    return {
        "traceEvents": [launch(ts, dur, corr) for corr, (ts, dur) in enumerate(calls, start=1)]
        + [
            act("ampere_sgemm_128x64_tn", 10, 10, 1, 7),
            act("void fbgemm_gpu::permute_2D_lengths_kernel<int>(int, int, int const*, int const*, int*)", 30, 2, 2, 7),
            act("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>", 40, 1, 3, 7),
            act("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", 100, 50, 4, 7),
            act("Cijk_Alik_Bljk_SB_MT64x16x32_MI16x16x1_SN_LDSB0_ISA90a", 50, 10, 5, 8),
            act("Memcpy HtoD (Pinned -> Device)", 95, 1, 6, 8, cat="gpu_memcpy"),
            step(1, 0, 27),
            step(2, 27, 73),
        ]
    }


def test_idle_causes_and_launch_delays_by_hand(tmp_path):
    path = tmp_path / "launch.json"
    path.write_text(json.dumps(launch_trace()))
    tables, m = analyse_trace(read_trace(path))
    rows = tables.rows()
    assert m["idle_causes_summed_over_streams"] == {"host_wait_us": 45.0, "kernel_wait_us": 8.0, "other_wait_us": 59.0}
    idle = {r["stream"]: r for r in by_kind(rows, "idle")}
    assert (idle[7]["host_wait_us"], idle[7]["kernel_wait_us"], idle[7]["other_wait_us"]) == (10, 8, 59)
    assert (idle[8]["host_wait_us"], idle[8]["kernel_wait_us"], idle[8]["other_wait_us"]) == (35, 0, 0)
    launch = m["launch"]
    assert launch["launched"] == 6 and launch["shorter_than_launch_call"] == 3
    assert launch["launch_bound"] == 2 and launch["launch_bound_share"] == 2 / 6 and launch["launch_wait_us"] == 45
    assert launch["graph_launched"] == 0
    assert launch["launch_delay_p50_us"] == 12 and launch["launch_delay_max_us"] == 73
    assert launch["launch_delay_mean_us"] == pytest.approx(21.5)
    assert launch["queue_delay_mean_us"] == pytest.approx(107 / 6)
    bins = {
        (b["from_us"], b["to_us"]): (b["count"], b["launch_bound"], b["shorter_than_launch_call"])
        for b in by_kind(rows, "launch_delay")
    }
    assert bins == {(5, 10): (2, 2, 2), (10, 20): (2, 0, 1), (20, 50): (1, 0, 0), (50, 100): (1, 0, 0)}
    steps = {s["step"]: s for s in by_kind(rows, "step")}
    summed = ("host_wait_summed_over_streams_us", "kernel_wait_summed_over_streams_us")
    summed += ("other_wait_summed_over_streams_us",)
    assert tuple(steps[1][k] for k in summed) == (10, 8, 0)
    assert tuple(steps[2][k] for k in summed) == (35, 0, 59)
    assert (steps[1]["shorter_than_launch_call"], steps[2]["shorter_than_launch_call"]) == (2, 1)
    assert (steps[1]["launch_bound"], steps[2]["launch_bound"]) == (1, 1)
    groups = {g["group"]: g["count"] for g in by_kind(rows, "group") if g["count"]}
    assert groups == {"matmul": 2, "elementwise": 2, "communication": 1, "memory": 1}
    rules = {r["rule"]: r["count"] for r in m["rules"] if r["count"]}
    assert rules == {
        "NCCL/RCCL kernels": 1,
        "fbgemm_gpu ops (sparse permutes, FP8 quantize: no GEMM)": 1,
        "AMD Tensile/hipBLASLt (Cijk_)": 1,
        "NVIDIA GEMM kernels (xmma, nvjet, sgemm/hgemm, gemm)": 1,
        "elementwise (PyTorch elementwise kernels, Triton pointwise)": 1,
        "memcpy (by kind)": 1,
    }
    text = "\n".join(report_lines(m, TraceTables.from_rows(rows)))
    assert "host wait 0.045 ms, kernel wait 0.021 ms" in text
    assert "ended) 2 of 6 (33.3%), the GPU idle 0.045 ms before them" in text
    assert "shorter than their launch call (HolisticTraceAnalysis' short kernels): 3 of 6 (50.0%)" in text


def test_group_shares_have_their_true_denominators(tmp_path):
    """hand_trace's device 0: kernels 10 (sgemm) + 10 (elementwise) + 8 (NCCL) + 5 (softmax) = 33 µs of kernel
    time, and a 7 µs copy: 40 µs of GPU time. A group's ``share`` is of the GPU time, its ``kernel_share`` of the
    kernel time; the finding names the kernel time and divides by it: matmul 10 / 33 = 30.3 %, not 10 / 40."""
    from core.workload.findings import trace_findings

    path = tmp_path / "t.json"
    path.write_text(json.dumps(hand_trace()))
    tables, m = analyse_trace(read_trace(path))
    rows = tables.rows()
    assert m["gpu_time_us"] == 40 and m["kernel_time_us"] == 33
    groups = {g["group"]: g for g in by_kind(rows, "group")}
    assert groups["matmul"]["share"] == 10 / 40 and groups["matmul"]["kernel_share"] == 10 / 33
    assert groups["communication"]["kernel_share"] == 8 / 33 and groups["memory"]["kernel_share"] is None
    assert groups["memory"]["share"] == 7 / 40
    found = {f.kind: f for f in trace_findings(m, tables)}["kernel_group"]
    assert found.value == pytest.approx(100 * 10 / 33)
    assert found.text.startswith("matmul kernels take 30.3% of kernel time (kernel durations summed)")
    text = "\n".join(report_lines(m, TraceTables.from_rows(rows)))
    assert "groups (share of GPU time: kernels + copies + memsets" in text
    assert " 25.0% of GPU time   30.3% of kernel time" in text


def test_real_recsys_communication_share_is_of_kernel_time():
    """The NCCL kernels' share of the kernel time, by a plain loop over the file's events: 396,199 of 606,519 µs
    (65.3 %); of kernels + copies + memsets (607,844 µs) it would be 65.2 %."""
    events = json.loads(gzip.decompress(RECSYS.read_bytes()))["traceEvents"]
    kernel = sum(e["dur"] for e in events if e.get("cat") == "kernel")
    nccl = sum(e["dur"] for e in events if e.get("cat") == "kernel" and "nccl" in e["name"].lower())
    assert (kernel, nccl) == (606_519, 396_199)
    from core.workload.findings import trace_findings

    tables, m = analyse_trace(read_trace(RECSYS))
    found = {f.kind: f for f in trace_findings(m, tables)}["kernel_group"]
    assert found.value == pytest.approx(100 * nccl / kernel)
    assert found.text.startswith(f"communication kernels take {nccl / kernel:.1%} of kernel time")


def test_idle_causes_per_device_add_up_to_the_idle(tmp_path):
    """launch_trace on the device timeline (the union of streams 7 and 8): [10,20] [30,32] [40,41] [50,60] [95,96]
    [100,150]; span 140, busy 74, idle 66. Each gap's cause from the activity that ends it: [20,30] K2 (call 25 >
    20) host 10; [32,40] K3 (call 26, 8 < 30) kernel 8; [41,50] K5 (call 28, 9 < 30) kernel 9; [60,95] memcpy (call
    90 > 60) host 35; [96,100] K4 (call 27, 4 < 30) kernel 4. Host 45, kernel 21, other 0: 66, the idle; HTA's
    per-stream sums (45 + 8 + 59 = 112) exceed it. The finding's host share is of the device's idle: 45 / 66."""
    from core.workload.findings import trace_findings

    path = tmp_path / "launch.json"
    path.write_text(json.dumps(launch_trace()))
    tables, m = analyse_trace(read_trace(path))
    rows = tables.rows()
    assert (m["span_us"], m["busy_us"], m["idle_us"]) == (140, 74, 66)
    assert m["idle_causes"] == {"host_wait_us": 45.0, "kernel_wait_us": 21.0, "other_wait_us": 0.0}
    assert m["idle_causes_basis"] == "device"
    device = by_kind(rows, "device")[0]
    assert (device["host_wait_us"], device["kernel_wait_us"], device["other_wait_us"]) == (45, 21, 0)
    idle = {f.kind: f for f in trace_findings(m, tables)}["idle"]
    assert f"{45 / 66:.1%} of it waiting on the host" in idle.text


def test_step_figures_on_gpu_windows(tmp_path):
    """launch_trace's CPU steps #1 [0, 27) (K1 K2 K3 by their calls) and #2 [27, 100) (K4 K5 memcpy). GPU windows:
    #1 from its first start (10) to #2's first (K5 at 50): [10, 50) = 40; #2, the last, to its last end: [50, 150)
    = 100. #1: busy [10,20] [30,32] [40,41] = 13, idle 27 = host 10 ([20,30]) + kernel 8 ([32,40]) + 9 ([41,50]);
    #2: busy [50,60] [95,96] [100,150] = 61, idle 39 = host 35 ([60,95]) + kernel 4 ([96,100]). Busy + idle = the
    window, host wait ≤ idle; the wall stays the CPU span (27, 73)."""
    path = tmp_path / "launch.json"
    path.write_text(json.dumps(launch_trace()))
    tables, m = analyse_trace(read_trace(path))
    rows = tables.rows()
    steps = {s["step"]: s for s in by_kind(rows, "step")}
    figures = ("wall_us", "gpu_window_us", "busy_us", "idle_us", "host_wait_us", "kernel_wait_us", "other_wait_us")
    assert tuple(steps[1][k] for k in figures) == (27, 40, 13, 27, 10, 17, 0)
    assert tuple(steps[2][k] for k in figures) == (73, 100, 61, 39, 35, 4, 0)
    assert "GPU window" in m["step_basis"]
    text = "\n".join(report_lines(m, TraceTables.from_rows(rows)))
    assert "step     1: wall 0.027 ms, kernels 0.013 ms; GPU window 0.040 ms: busy 0.013 ms, idle 0.027 ms" in text


def test_each_step_s_unions_are_of_its_own_kernels(tmp_path):
    """GPU-side steps #1 [0, 200) and #2 [200, 300). #1's kernels (by start): compute [10, 250] — it runs on past
    #2's start — and communication [20, 30]; #2's: compute [210, 220], [215, 230] and communication [225, 240].
    #1: compute 240, communication 10 (inside the compute: none exposed), overlap 10. #2 counts only its own
    kernels: compute [210, 230] = 20, communication 15, exposed [230, 240] = 10, overlap 5 ([225, 230]) — not the
    union with #1's long kernel, which would make #2's compute 40 and none of its communication exposed."""

    def event(cat, name, ts, dur, **args):
        return {"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur, "args": args}

    kernels = [(10, 240, "gemm"), (20, 10, "ncclDevKernel_AllReduce"), (210, 10, "gemm"), (215, 15, "gemm")]
    kernels.append((225, 15, "ncclDevKernel_AllReduce"))
    events = [event("gpu_user_annotation", f"ProfilerStep#{n}", t, d) for n, t, d in ((1, 0, 200), (2, 200, 100))]
    events += [event("kernel", name, ts, dur, device=0, stream=7) for ts, dur, name in kernels]
    path = tmp_path / "steps.json"
    path.write_text(json.dumps({"traceEvents": events}))
    tables, _ = analyse_trace(read_trace(path))
    rows = tables.rows()
    steps = {s["step"]: s for s in by_kind(rows, "step")}
    figures = ("compute_union_us", "communication_union_us", "exposed_communication_us", "compute_and_communication_us")
    assert tuple(steps[1][k] for k in figures) == (240, 10, 0, 10)
    assert tuple(steps[2][k] for k in figures) == (20, 15, 10, 5)
    assert (steps[1]["kernel_time_us"], steps[2]["kernel_time_us"]) == (250, 40)


@pytest.mark.parametrize(
    "path",
    [V100, RECSYS, DATA / "hta_mi250_minitoy_rocm.json.gz", ROOT / "examples" / "traces" / "resnet50_ddp_v100.json.gz"],
    ids=lambda p: p.name,
)
def test_real_files_step_and_device_figures_stay_within_their_windows(path):
    tables, m = analyse_trace(read_trace(path))
    rows = tables.rows()
    causes = m["idle_causes"]
    assert sum(causes.values()) == pytest.approx(m["idle_us"], abs=1e-6)  # the device's causes are its idle
    for s in by_kind(rows, "step"):
        assert s["busy_us"] + s["idle_us"] == pytest.approx(s["gpu_window_us"], abs=1e-6)
        assert s["host_wait_us"] + s["kernel_wait_us"] + s["other_wait_us"] == pytest.approx(s["idle_us"], abs=1e-6)
        assert 0 <= s["host_wait_us"] <= s["idle_us"] <= s["gpu_window_us"]
        assert s["host_wait_us"] <= s["wall_us"]


@pytest.mark.parametrize("path", [A100, V100], ids=lambda p: p.name)
def test_every_utilisation_bin_is_a_share_of_its_bin(path):
    """The A100 excerpt's first bin read 1.0000000009 busy: its float sums passed the bin by ~1e-9."""
    bins = by_kind(analyse_trace(read_trace(path))[0].rows(), "busy")
    shares = [b[key] for b in bins for key in b if key.endswith("_share")]
    assert len(bins) == 2000 and all(0.0 <= share <= 1.0 for share in shares)


def graph_trace() -> dict:
    """A CUDA graph: one cudaGraphLaunch call (0, 10) whose three kernels carry its correlation id (7) and run
    [20, 22], [22, 24], [24, 26] on stream 7; then a kernel of its own, call (30, 2) → [40, 41]. HTA's comparison
    calls all three graph kernels shorter than "their" call (2 < 10); they have no launch of their own, so
    launch-bound does not apply to them: of the one activity with its own call, [40, 41] was launched (call end 32
    ≥ 26) onto an idle GPU: launch-bound 1 of 1, 14 µs idle before it."""

    def call(name, ts, dur, corr):
        return {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
                "args": {"correlation": corr}}  # fmt: skip

    def kernel(ts, dur, corr):
        return {"ph": "X", "cat": "kernel", "name": "triton_poi_fused_add_0", "pid": 0, "tid": 7, "ts": ts,
                "dur": dur, "args": {"device": 0, "stream": 7, "correlation": corr}}  # fmt: skip

    return {
        "traceEvents": [call("cudaGraphLaunch", 0, 10, 7), kernel(20, 2, 7), kernel(22, 2, 7), kernel(24, 2, 7)]
        + [call("cudaLaunchKernel", 30, 2, 8), kernel(40, 1, 8)]
    }


def test_cuda_graphs_are_recognised_and_launch_bound_does_not_apply(tmp_path):
    path = tmp_path / "graph.json"
    path.write_text(json.dumps(graph_trace()))
    tables, m = analyse_trace(read_trace(path))
    rows = tables.rows()
    launch = m["launch"]
    assert (launch["launched"], launch["graph_launched"], launch["shorter_than_launch_call"]) == (4, 3, 4)
    assert (launch["launch_bound"], launch["launch_bound_share"], launch["launch_wait_us"]) == (1, 1.0, 14)
    text = "\n".join(report_lines(m, TraceTables.from_rows(rows)))
    assert "CUDA/HIP graphs: 3 activities launched by a graph" in text and "do not apply to them" in text
    # hipGraphLaunch (ROCm) is a graph launch too, and so are kernels sharing one call whatever its name
    hip = graph_trace()
    hip["traceEvents"][0]["name"] = "hipGraphLaunch"
    path.write_text(json.dumps(hip))
    assert analyse_trace(read_trace(path))[1]["launch"]["graph_launched"] == 3
    hip["traceEvents"][0]["name"] = "cudaLaunchKernel"
    path.write_text(json.dumps(hip))
    assert analyse_trace(read_trace(path))[1]["launch"]["graph_launched"] == 3


RESNET_V100 = ROOT / "examples" / "traces" / "resnet50_ddp_v100.json.gz"


def test_a_gpu_bound_trace_is_not_called_launch_bound():
    """ResNet-50 on the V100 example: the GPU idles 1.6 % of its span and the CPU runs ~77 ms ahead (median
    launch delay), yet 57.4 % of its kernels ran shorter than their launch call (HTA's short kernels), which the
    page used to headline as "launch-bound". Launch-bound now means launched onto an idle GPU; by a plain loop
    over the file's events (each activity against the latest end of every activity of the device that started
    before it), that is a few warm-up launches of the first step."""
    events = json.loads(gzip.decompress(RESNET_V100.read_bytes()))["traceEvents"]
    calls = {e["args"]["correlation"]: e["ts"] + e["dur"] for e in events if e.get("cat") == "cuda_runtime"}
    gpu = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    acts = sorted((e["ts"], i) for i, e in enumerate(gpu))  # by start, then file order
    bound, launched, reach = 0, 0, None
    for _, i in acts:
        e = gpu[i]
        called = calls.get(e["args"].get("correlation"))
        launched += called is not None
        if called is not None and reach is not None and called >= reach:
            bound += 1
        reach = e["ts"] + e["dur"] if reach is None else max(reach, e["ts"] + e["dur"])
    tables, m = analyse_trace(read_trace(RESNET_V100))
    rows = tables.rows()
    launch = m["launch"]
    assert m["idle_share"] < 0.02 and launch["launch_delay_p50_us"] > 70_000
    assert (launch["launch_bound"], launch["launched"]) == (bound, launched) == (162, 6_095)
    assert launch["launch_bound_share"] < 0.05 and launch["shorter_than_launch_call_share"] > 0.5
    from core.rows.trace_summary import LaunchSummary
    from render.trace_view import launch_metric

    label, value, _, about = launch_metric(LaunchSummary.from_dict(launch))
    assert (label, value) == ("Launch-bound", f"{162 / 6_095:.1%}") and "short kernels" in about
    text = "\n".join(report_lines(m, TraceTables.from_rows(rows)))
    assert "launch-bound (launched onto an idle GPU" in text and "57.4%" not in text.split("short kernels")[0]


def test_a_file_listing_one_gpu_names_the_device_its_kernels_ran_on():
    """ROCm writes the process's one visible GPU as id 0 and its kernels' physical index: the file's only GPU
    is the one they ran on, said as a quirk; a file listing several GPUs keeps its own ids (the MI250's four)."""
    from tests.core.workload.traces import QWEN_MI300, trace_events

    with gzip.open(QWEN_MI300) as f:
        listed = json.load(f)["deviceProperties"]
    on = {e["args"]["device"] for e in trace_events(QWEN_MI300) if e.get("cat") == "kernel"}
    assert [(d["id"], d["name"]) for d in listed] == [(0, "AMD Instinct MI300X VF")] and on == {2}
    _, m = analyse_trace(read_trace(QWEN_MI300))
    assert (m["device"], m["device_name"]) == (2, "AMD Instinct MI300X VF")
    (quirk,) = [q for q in m["quirks"] if q.startswith("activities on device 2 while the device list has one GPU")]
    assert m["quirks"][quirk] == m["gpu_activities"]
    _, mi250 = analyse_trace(read_trace(ROOT / "tests" / "data" / "workload" / "hta_mi250_minitoy_rocm.json.gz"))
    assert not [q for q in mi250["quirks"] if "taken as that GPU" in q]

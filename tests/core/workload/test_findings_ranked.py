"""What an import says first, on real traces (tests/data/workload/README.md): at most three findings, the most time
first, one per pattern (every layer's unfused attention is one finding, with the count and the total), none that
misnames what the trace shows, and what to try only where the trace supports it. Expected figures are computed here
from the files' own events."""

from __future__ import annotations

import pytest

pytest.importorskip("msgspec")

from core.experiment import config_from_dict, drive
from core.experiments.profiler_trace import ProfilerTraceConfig, run
from tests.core.workload.traces import ALEXNET, DATA, GPU, SGLANG, trace_events

VIDEO_H100 = DATA / "tracelens_h100_timesformer_video.json.gz"
VIDEO_MI300 = DATA / "tracelens_mi300_timesformer_video.json.gz"
WORKERS_0 = DATA / "kineto_v100_resnet50_workers0_step.json.gz"


def findings(path) -> list[dict]:
    out, _ = drive(run(config_from_dict(ProfilerTraceConfig, {"path": str(path)}), None))  # type: ignore[arg-type]
    return out.meta["findings"]


def launched_by(events: list[dict], names: tuple[str, ...]) -> float:
    """µs of the GPU activities whose launch call (runtime or driver) lies inside (innermost) a CPU operator named one
    of ``names``."""
    ops = [e for e in events if e.get("cat") == "cpu_op"]
    calls = {e["args"]["correlation"]: e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")}
    total = 0.0
    for a in (e for e in events if e.get("cat") in GPU):
        call = calls.get(a["args"].get("correlation"))
        if call is None:
            continue
        around = [o for o in ops if o["tid"] == call["tid"] and o["ts"] <= call["ts"] <= o["ts"] + o["dur"]]
        if around and min(around, key=lambda o: (o["dur"], -o["ts"]))["name"] in names:
            total += a["dur"]
    return total


@pytest.mark.parametrize("path", sorted(DATA.glob("*.json*")), ids=lambda p: p.name)
def test_at_most_three_findings_the_most_time_first(path):
    said = findings(path)
    assert len(said) <= 3
    times = [f["time_us"] for f in said]
    assert times == sorted(times, reverse=True)
    causes = [f["cause"] for f in said if f.get("cause")]
    assert len(causes) == len(set(causes))  # one finding a cause


def test_a_video_model_s_findings_are_its_preprocessing_its_attention_and_its_odd_length():
    """TimeSformer on an H100: the host's preprocessing before the first kernel (218.1 ms), the unfused attention of
    its 24 attention modules as one finding (the GPU time of the kernels ``aten::_softmax`` and ``aten::bmm``
    launched, by a loop here), and the CUTLASS ``…_align1`` GEMMs cuBLAS chose for bmm over 3,137 tokens — not
    "kernels built for an older architecture" (they are ``cutlass_75_`` on an sm 9.0 GPU because of the alignment).
    Before: twelve per-layer findings and the older-architecture one."""
    events = trace_events(VIDEO_H100)
    attention = launched_by(events, ("aten::_softmax", "aten::bmm"))
    unaligned = sum(e["dur"] for e in events if e.get("cat") == "kernel" and "_align1" in e["name"])
    said = findings(VIDEO_H100)
    assert [f["kind"] for f in said] == ["host_before_first_kernel", "op_pattern", "unaligned"]
    pattern = said[1]
    assert pattern["count"] == 24 and pattern["time_us"] == pytest.approx(attention, rel=1e-9)
    assert "unfused attention in 24 modules (nn.Module: TimesformerSelfAttention_…)" in pattern["text"]
    assert said[2]["time_us"] == pytest.approx(unaligned, rel=1e-9)
    assert "aten::bmm 96×3137×64, 96×64×3137 (3,137)" in said[2]["text"]
    assert "pad it" in said[2]["text"]


def test_unfused_attention_below_the_threshold_in_each_layer_is_one_finding_above_it():
    """On the MI300 each attention module's softmax and bmm are under 5 % of the span, so no layer became a finding;
    together they are 68.6 % of it."""
    events = trace_events(VIDEO_MI300)
    gpu = [e for e in events if e.get("cat") in GPU]
    span = max(e["ts"] + e["dur"] for e in gpu) - min(e["ts"] for e in gpu)
    attention = launched_by(events, ("aten::_softmax", "aten::bmm"))
    (pattern,) = [f for f in findings(VIDEO_MI300) if f["kind"] == "op_pattern"]
    assert pattern["count"] == 24 and pattern["time_us"] == pytest.approx(attention, rel=1e-9)
    assert pattern["value"] == pytest.approx(100 * attention / span, rel=1e-6)
    assert pattern["time_us"] / 24 < 0.05 * span < pattern["time_us"]


def test_a_blocking_copy_that_held_the_gpu_idle_waits_for_unrecorded_work():
    """SGLang's 463 ms ``hipMemcpyWithStream`` of a few ints: the GPU ran no recorded activity during it (checked
    here), so it waited for work the trace does not hold; the finding says so and what to do."""
    events = trace_events(SGLANG)
    (copy,) = [e for e in events if e["name"] == "hipMemcpyWithStream"]
    during = [e for e in events if e.get("cat") in GPU and e["ts"] < copy["ts"] + copy["dur"] - 10_000 and
              e["ts"] + e["dur"] > copy["ts"]]  # fmt: skip
    assert copy["dur"] > 400_000 and during == []
    (gap,) = [f for f in findings(SGLANG) if f["kind"] == "host_gap"]
    assert "waits for work outside the recorded window" in gap["text"] and "record a longer window" in gap["text"]


def test_first_iteration_allocations_are_set_up_not_a_disabled_allocator():
    """HTA's AlexNet trace is one forward inside an annotation the benchmark names ``…|warmup|forward``; its
    ``cudaFree``s and ``cudaMalloc``s (8.5 s in the gaps) lie inside it: the first iteration's set-up, said so —
    not advice to switch on the caching allocator."""
    events = trace_events(ALEXNET)
    warmup = next(e for e in events if e["name"].endswith("|warmup|forward]"))
    allocator = [e for e in events if e["name"] in ("cudaMalloc", "cudaFree")]
    inside = sum(e["dur"] for e in allocator if warmup["ts"] <= e["ts"] <= warmup["ts"] + warmup["dur"])
    assert inside / sum(e["dur"] for e in allocator) > 0.5
    (gap,) = [f for f in findings(ALEXNET) if f.get("cause") == "allocator"]
    assert (
        "allocations of the first iteration (set-up)" in gap["text"] and "caching allocator is off" not in gap["text"]
    )


def test_data_loading_carries_what_to_try():
    """PyTorch's tutorial ResNet-50 with ``num_workers=0``: the DataLoader's ``__next__`` before each step's kernels."""
    (found,) = [f for f in findings(WORKERS_0) if f.get("cause") == "data loading"]
    assert found["kind"] == "host_before_first_kernel" and "num_workers" in found["text"]

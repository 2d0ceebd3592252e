"""The step as the host lived it: its wall is the host's ProfilerStep span, its kernels those its host launched,
and the host's time before the step's first kernel is a cause of its own. On real traces (tests/data/workload/
README.md): TraceLens' ResNet with activation checkpointing on an MI300X (its GPU-side step annotations cover one
kernel each), and the TimeSformer video model on an H100 and an MI300X (the pipeline decodes and preprocesses the
video before any kernel). Every expected figure is computed here from the file's own events."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

pytest.importorskip("msgspec")

from core.rows.trace import HOST_CAUSES, TraceStep
from core.workload.trace.diff import steps as step_changes
from core.workload.trace.host_gaps import before_first_kernel_findings, host_in_steps
from core.workload.trace.text import report_lines
from core.workload.trace.timeline import analyse_trace, read_trace
from tests.core.workload.traces import DATA, GPU, trace_events

CHECKPOINTING = DATA / "tracelens_mi300_resnet_act_checkpoint_steps.json.gz"
VIDEO_H100 = DATA / "tracelens_h100_timesformer_video.json.gz"
VIDEO_MI300 = DATA / "tracelens_mi300_timesformer_video.json.gz"
LAUNCH_CATS = {"cuda_runtime", "cuda_driver"}


def host_steps(events: list[dict]) -> list[dict]:
    return sorted((e for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")),
                  key=lambda e: e["ts"])  # fmt: skip


def by_launch(events: list[dict]) -> list[tuple[dict, Decimal]]:
    """Each GPU activity with the start of its launch call (same correlation id)."""
    calls = {e["args"]["correlation"]: e["ts"] for e in events if e.get("cat") in LAUNCH_CATS}
    return [(e, calls[e["args"]["correlation"]]) for e in events if e.get("cat") in GPU and e["args"].get(
        "correlation") in calls]  # fmt: skip


def lab_steps(path) -> tuple[tuple[TraceStep, ...], dict]:
    tables, meta = analyse_trace(read_trace(path))
    return tables.steps, meta


def test_activation_checkpointing_steps_are_not_cut_to_their_gpu_annotations():
    """ROCm's GPU-side ProfilerStep annotations of this trace last 16–18 µs each, around one kernel; the steps read
    0.02 ms wall and kernel time. The host's steps (16.8, 16.0, 15.9 ms) launch about 22 ms of kernels each: by a
    loop over the file's kernels placed by their launch call's start."""
    events = trace_events(CHECKPOINTING, exact=True)
    gpu_side = [e for e in events if e.get("cat") == "gpu_user_annotation" and e["name"].startswith("ProfilerStep#")]
    assert len(gpu_side) == 3 and all(e["dur"] < 20 for e in gpu_side)
    expected = {}
    placed = by_launch(events)
    for s in host_steps(events):
        inside = [e for e, called in placed if s["ts"] <= called < s["ts"] + s["dur"] and e["cat"] == "kernel"]
        expected[int(s["name"].split("#")[1])] = (s["dur"], sum(e["dur"] for e in inside))
    steps, meta = lab_steps(CHECKPOINTING)
    got = {r.step: (r.wall_us, r.kernel_time_us) for r in steps}
    assert got.keys() == expected.keys() == {15, 16, 17}
    for step, (wall, kernels) in expected.items():
        assert got[step] == (pytest.approx(float(wall), abs=1e-6), pytest.approx(float(kernels), abs=1e-6))
        assert 15_000 < wall < 17_000 and 21_000 < kernels < 23_000
    assert meta["step_basis"].startswith("CPU ProfilerStep spans (the host's steps)")


def device_idle_within(events: list[dict], lo: Decimal, hi: Decimal) -> Decimal:
    """The device's idle inside [lo, hi): the window less the union of the GPU activities, by a sorted loop."""
    spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in events if e.get("cat") in GPU)
    busy, reach = Decimal(0), lo
    for s, e in spans:
        s, e = max(s, reach), min(e, hi)
        if e > s:
            busy += e - s
            reach = e
    return hi - lo - busy


@pytest.mark.parametrize(
    "path, share", [(VIDEO_H100, 0.570), (VIDEO_MI300, 0.688)], ids=["h100", "mi300"]
)  # fmt: skip
def test_a_video_model_s_step_is_the_host_s_and_its_preprocessing_a_cause(path, share):
    """The pipeline decodes the video and preprocesses its frames on the host before the first kernel: 57 % of the
    step on the H100, 69 % on the MI300. The step read the GPU side's span (160 of 382.5 ms on the H100), and the
    1 % of idle inside the GPU's span was all the lab said of the host."""
    events = trace_events(path, exact=True)
    (step,) = host_steps(events)
    t0, t1 = step["ts"], step["ts"] + step["dur"]
    first = min(e["ts"] for e in events if e.get("cat") in GPU)
    before = device_idle_within(events, t0, first)
    assert before == first - t0  # nothing ran on the GPU before the step's first activity
    assert float(before / step["dur"]) == pytest.approx(share, abs=5e-4)
    steps, meta = lab_steps(path)
    (row,) = steps
    assert row.wall_us == pytest.approx(float(step["dur"]), abs=1e-6)
    assert row.host_before_first_kernel_us == pytest.approx(float(before), abs=1e-3)
    gpu_side = next(e for e in events if e.get("cat") == "gpu_user_annotation")
    assert row.wall_us > 2 * float(gpu_side["dur"]) if path == VIDEO_H100 else True
    last = max(e["ts"] + e["dur"] for e in events if e.get("cat") in GPU)
    assert row.host_after_last_kernel_us == pytest.approx(float(device_idle_within(events, last, t1)), abs=1e-3)

    # what the host was in: the frames' preprocessing (the union of its calls on the step's thread, by hand)
    frames = sorted((e["ts"], e["ts"] + e["dur"]) for e in events if e.get("cat") == "python_function" and e[
        "name"].endswith("_preprocess_image") and e["tid"] == step["tid"] and t0 <= e["ts"] < first)  # fmt: skip
    union, reach = Decimal(0), t0
    for s, e in frames:
        if e > max(s, reach):
            union += e - max(s, reach)
            reach = e
    trace = read_trace(path)
    summary, _ = host_in_steps(trace, meta["device"], steps)
    cause = summary["causes"][0]
    assert cause["cause"] == "other CPU work" and cause["inner_op"]["op"].endswith("_preprocess_image")
    assert cause["inner_op"]["time_us"] == pytest.approx(float(union), abs=1e-3) and union > before / 2
    (finding,) = before_first_kernel_findings({"host_before_first_kernel": summary})
    assert finding.value == pytest.approx(100 * share, abs=0.05)
    assert "image_processing_videomae.py:178 _preprocess_image" in finding.text
    assert "DataLoader workers" in finding.text  # what to try, for Python preprocessing before the kernels


def test_a_diff_of_the_video_model_compares_the_host_s_steps():
    """H100 → MI300, one step each: the step got 2.1 % slower (382.5 → 390.7 ms, the host's spans), where the GPU
    sides' spans said −24 % (160.0 → 121.3 ms)."""
    walls = [host_steps(trace_events(p))[0]["dur"] for p in (VIDEO_H100, VIDEO_MI300)]
    sides = [analyse_trace(read_trace(p))[0].steps for p in (VIDEO_H100, VIDEO_MI300)]
    wall = next(r for r in step_changes(*sides) if r.figure.startswith("step wall"))
    assert (wall.base_us, wall.new_us) == pytest.approx(walls, abs=1e-6)
    assert wall.delta_pct == pytest.approx(100 * (walls[1] - walls[0]) / walls[0]) and 2.0 < wall.delta_pct < 2.2


def test_data_loading_before_the_first_kernel_by_hand(tmp_path):
    """A host step [0, 100) that waits in the DataLoader [5, 60), then launches one kernel (call at 62, on the GPU
    [70, 90)): the host works 70 µs before the first kernel, 55 of them loading data, 3 in the launch call, 12 in
    nothing recorded ([0, 5), [60, 62), [65, 70)); the finding says so and what to try. After the kernel, [90, 100)
    is the host's too."""

    def x(cat, name, ts, dur, **args):
        return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": args}

    events = [
        x("user_annotation", "ProfilerStep#1", 0, 100),
        x("user_annotation", "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", 5, 55),
        x("cuda_runtime", "cudaLaunchKernel", 62, 3, correlation=1),
        {**x("kernel", "ampere_sgemm_128x64_tn", 70, 20, device=0, stream=7, correlation=1), "pid": 0, "tid": 7},
    ]
    path = tmp_path / "loader.json"
    path.write_text(json.dumps({"traceEvents": events}))
    trace = read_trace(path)
    tables, meta = analyse_trace(trace)
    (step,) = tables.steps
    assert (step.wall_us, step.host_before_first_kernel_us, step.host_after_last_kernel_us) == (100, 70, 10)
    meta["host_before_first_kernel"], (lived,) = host_in_steps(trace, meta["device"], [step])
    causes = {c["cause"]: c["time_us"] for c in meta["host_before_first_kernel"]["causes"]}
    assert causes == {"data loading": 55, "other CPU work": 3, "no CPU event": 12}  # the launch call [62, 65)
    (finding,) = before_first_kernel_findings(meta)
    assert finding.value == 70.0 and "data loading" in finding.text and "num_workers" in finding.text
    assert "pin_memory" in finding.text
    # the whole step's idle by cause: the 70 before the kernel and the 10 after it (nothing recorded then)
    assert dict(zip(HOST_CAUSES, [0, 0, 0, 55, 0, 3, 22])) == lived
    assert "step     1: wall 0.100 ms" in "\n".join(report_lines(meta, tables))

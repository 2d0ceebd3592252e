"""Reading a trace into columns: times kept exact, batches that change nothing, and the quirks it reports,
each against hand arithmetic on a hand-made trace."""

import json

import numpy as np
import pytest

pytest.importorskip("msgspec")

from core.workload.trace import file as trace_file
from core.workload.trace.file import read_trace
from core.workload.trace.timeline import analyse_trace
from tests.conftest import ROOT

DATA = ROOT / "tests" / "data" / "workload"


def kernel(ts, dur, stream=7, device=0, name="k", corr=None):
    args = {"device": device, "stream": stream} | ({"correlation": corr} if corr is not None else {})
    return {"ph": "X", "cat": "kernel", "name": name, "pid": device, "tid": stream, "ts": ts, "dur": dur, "args": args}


def write(tmp_path, events, **top):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events, **top}))
    return path


def test_nanosecond_digits_of_epoch_times_are_kept(tmp_path):
    # As float64 epoch µs, 1700000000000000.123 and .124 are one number (0.25 µs apart is the resolution).
    assert float("1700000000000000.123") == float("1700000000000000.124")
    path = tmp_path / "t.json"
    a = '{"ph": "X", "cat": "kernel", "name": "a", "ts": 1700000000000000.123, "dur": 0.5}'
    b = '{"ph": "X", "cat": "kernel", "name": "b", "ts": 1700000000000000.624, "dur": 1.001}'
    text = '{"traceEvents": [' + a + ", " + b + "]}"
    path.write_text(text)
    t = read_trace(path)
    assert t.origin_us == 1700000000000000
    # by hand: starts 0.123 and 0.624 µs after the origin; the gap between a's end (0.623) and b is 1 ns
    assert t.activities.start.tolist() == pytest.approx([0.123, 0.624], abs=1e-9)
    assert t.activities.start[1] - t.activities.end[0] == pytest.approx(0.001, abs=1e-9)
    assert t.activities.end[1] == pytest.approx(1.625, abs=1e-9)
    assert t.quirks["timestamps with sub-µs digits (kept exactly)"] == 4


def test_batches_give_the_same_columns(monkeypatch):
    whole = read_trace(DATA / "hta_recsys_sampled_rank0.json.gz")
    monkeypatch.setattr(trace_file, "BATCH_EVENTS", 7)
    batched = read_trace(DATA / "hta_recsys_sampled_rank0.json.gz")
    assert batched.events == whole.events
    for column in ("start", "end", "kind", "device", "stream", "name", "correlation"):
        assert np.array_equal(getattr(batched.activities, column), getattr(whole.activities, column)), column
    assert np.array_equal(batched.launch_ts, whole.launch_ts) and batched.gpu_steps == whole.gpu_steps


def test_a_bad_time_costs_its_event_only(tmp_path, monkeypatch):
    monkeypatch.setattr(trace_file, "BATCH_EVENTS", 2)  # the bad event shares its batch with a good one
    events = [kernel(10, 5), kernel("soon", 5), kernel(30, 5), kernel(True, 2), 7]
    t = read_trace(write(tmp_path, events))
    assert t.activities.start.tolist() == [0.0, 20.0]
    assert t.malformed == {"time or duration not a finite number": 2, "not an object": 1}
    _, meta = analyse_trace(t)
    assert meta["quirks"]["time or duration not a finite number (left out)"] == 2


def test_quirks_counted_by_hand(tmp_path):
    events = [
        kernel(0, 10),  # stream 7: 0–10
        kernel(5, 2),  # starts inside the first on the same stream: overlap 1
        kernel(8, 1),  # still inside the first (ends at 10): overlap 2
        kernel(20, 1),
        kernel(4, 3, stream=9),  # another stream: no overlap
        kernel(30, 5000, device=3),  # device 3 is not in the device list; longer than the whole trace (0–30)
    ]
    t = read_trace(write(tmp_path, events, deviceProperties=[{"id": 0, "name": "NVIDIA A100-SXM4-40GB"}]))
    assert t.quirks == {
        "activities overlapping an earlier one on the same stream (CUDA graphs or concurrent kernels)": 2,
        "activities lasting longer than the whole trace (its earliest to latest start)": 1,
        "activities on a device the trace's device list lacks": 1,
    }
    t = read_trace(write(tmp_path, events[:4]))
    assert t.quirks["activities of a trace without a device list (GPU names unknown)"] == 4


def test_real_traces_have_no_invented_quirks():
    # The V100 trace: one device, listed; whole-µs times; kernels one after another on each stream.
    t = read_trace(DATA / "kineto_v100_trace.json")
    assert not any("overlapping" in why or "device list" in why for why in t.quirks)


def test_a_rocm_trace_with_hex_string_streams_is_read():
    """ROCm writes the runtime calls' streams as "0x0": read, not refused. Figures against a plain reading of
    the JSON written here (the file has sub-µs times, where HolisticTraceAnalysis is no oracle)."""
    import gzip

    path = DATA / "hta_mi250_minitoy_rocm.json.gz"
    raw = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    kernels = [e for e in raw if e.get("cat") == "kernel"]
    t = read_trace(path)
    tables, meta = analyse_trace(t)
    assert meta["device"] == 2 and meta["device_name"] == "AMD Radeon Graphics"
    assert meta["kernel_count"] == len(kernels) == 14
    assert meta["kernel_time_us"] == pytest.approx(sum(e["dur"] for e in kernels), abs=1e-6)
    matmul = next(r for r in tables.groups if r.group == "matmul")
    tensile = [e for e in kernels if e["name"].startswith("Cijk_")]
    assert matmul.count == len(tensile) == 2
    assert matmul.total_us == pytest.approx(sum(e["dur"] for e in tensile), abs=1e-6)
    # every kernel's launch call (hipLaunchKernel, its stream "0x0") is found through the correlation id
    gpu_ids = {e["args"]["correlation"] for e in raw if e.get("cat") in ("kernel", "gpu_memcpy")}
    call_ids = {e["args"]["correlation"] for e in raw if e.get("cat") == "cuda_runtime" and "correlation" in e["args"]}
    assert meta["launch"]["launched"] == len(gpu_ids & call_ids) == 16


def test_correlated_finds_each_id_as_a_loop_over_the_keys_would():
    """Keys in any order, an id held twice (the later one wins), ids that are absent or below 0 (none)."""
    keys = np.array([7, 3, -1, 9, 3, 5])
    wanted = np.array([3, 9, 4, -1, 5, 11, 0])
    found, at = trace_file.correlated(keys, wanted)
    for w, f, i in zip(wanted.tolist(), found.tolist(), at.tolist()):
        hits = [k for k, key in enumerate(keys.tolist()) if key == w and w >= 0]
        assert f == bool(hits) and (not hits or i == hits[-1]), w
    assert at[0] == 4 and not found[3]  # the second 3; -1 is no id
    nothing, zeros = trace_file.correlated(np.zeros(0, np.int64), wanted)
    assert not nothing.any() and not zeros.any() and len(zeros) == len(wanted)

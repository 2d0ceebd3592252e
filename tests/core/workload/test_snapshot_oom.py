"""An out-of-memory snapshot opens with what failed; snapshots of an older torch, without a trace, or of several
devices say what they cannot tell; both Adam moments are optimizer state.

Every snapshot is built here with ``snapshots``' helpers, and every expected figure is worked out by hand in
the docstring or comment beside it. The OOM event is written as torch writes it (``TraceEntry`` in
torch/cuda/memory.py: ``size`` the request, ``device_free`` in place of ``addr``).
"""

import json
import pickle

import pytest

from core.units import GIB, MIB
from core.workload.findings import snapshot_findings, to_store
from core.workload.snapshot.analysis import analyse
from core.workload.snapshot.reader import read_snapshot
from tests.core.workload import snapshots
from tests.core.workload.snapshots import BACKWARD, FORWARD, SETUP, event, frames

L, S = 0x100000, 0x2000000  # a large segment of 20 MiB and a small one of 2 MiB


def oom_snapshot(request: int = 6 * MIB, settings: dict | None = None) -> dict:
    """A 20 MiB large segment filled by A 6, B 4, C 6, D 4 MiB; B and D freed (8 MiB free, in two 4 MiB holes);
    a 2 MiB small segment holding one 512 B block. Then a request fails; A and C are freed as the exception
    unwinds, so the end differs from the moment of the failure.

    At the failure: allocated 6 + 6 MiB + 512 = 12,583,424; reserved 20 + 2 MiB = 23,068,672; reserved but
    unallocated 23,068,672 − 12,583,424 = 10,485,248; largest free block: large 4 MiB = 4,194,304, small
    2 MiB − 512 = 2,096,640. A 6 MiB request: 10,485,248 ≥ 6,291,456 but 4,194,304 < 6,291,456 → fragmentation.
    A 16 MiB request: 10,485,248 < 16,777,216 → not fragmentation."""
    a, b, c, d = L, L + 6 * MIB, L + 10 * MIB, L + 16 * MIB
    trace = [
        event("segment_alloc", L, 20 * MIB, 0, FORWARD),
        event("alloc", a, 6 * MIB, 1, FORWARD),
        event("alloc", b, 4 * MIB, 2, BACKWARD),
        event("alloc", c, 6 * MIB, 3, FORWARD),
        event("alloc", d, 4 * MIB, 4, BACKWARD),
        event("segment_alloc", S, 2 * MIB, 5, FORWARD),
        event("alloc", S, 512, 6, FORWARD),
        event("free_completed", b, 4 * MIB, 7),
        event("free_completed", d, 4 * MIB, 8),
        {
            "action": "oom",
            "size": request,
            "device_free": 5 * MIB,
            "stream": 0,
            "time_us": 1_000_009,
            "frames": FORWARD,
        },
        event("free_completed", a, 6 * MIB, 10),
        event("free_completed", c, 6 * MIB, 11),
    ]
    segments = [
        {"device": 0, "address": L, "total_size": 20 * MIB, "stream": 0, "segment_type": "large", "blocks": [
            {"address": L, "size": 20 * MIB, "requested_size": 0, "state": "inactive", "frames": []}]},
        {"device": 0, "address": S, "total_size": 2 * MIB, "stream": 0, "segment_type": "small", "blocks": [
            {"address": S, "size": 512, "requested_size": 512, "state": "active_allocated", "frames": FORWARD},
            {"address": S + 512, "size": 2 * MIB - 512, "requested_size": 0, "state": "inactive", "frames": []}]},
    ]  # fmt: skip
    return {"segments": segments, "device_traces": [trace], "allocator_settings": settings or {}}


def summary_of(tmp_path, snap: dict, device: int | None = None) -> dict:
    path = tmp_path / "s.pickle"
    path.write_bytes(pickle.dumps(snap, protocol=4))
    m = analyse(read_snapshot(path), device).summary()
    m["findings"] = to_store(snapshot_findings(m))
    return m


def test_an_out_of_memory_says_what_failed_at_the_failure_not_at_the_end(tmp_path):
    m = summary_of(tmp_path, oom_snapshot())
    o = m["oom"]
    assert (o["events"], o["index"], o["pool"]) == (1, 9, "large")
    assert o["requested_bytes"] == 6_291_456 and o["device_free_bytes"] == 5_242_880
    assert (o["allocated_bytes"], o["reserved_bytes"]) == (12_583_424, 23_068_672)
    assert o["reserved_unallocated_bytes"] == 10_485_248
    assert o["largest_free_block_bytes"] == {"small": 2_096_640, "large": 4_194_304}
    assert o["fragmentation"] is True and o["expandable_segments"] is False
    assert o["site"] == "model.py:12 forward"
    first = m["findings"][0]
    assert first["kind"] == "oom" and first["value"] == 6_291_456
    assert "6.0 MiB (large pool)" in first["text"] and "5.0 MiB free on the device" in first["text"]
    assert "10.0 MiB reserved but unallocated" in first["text"] and "largest free block is 4.0 MiB" in first["text"]
    assert "expandable_segments:True" in first["text"]
    # the peak's site holds 12 MiB + 512 B, more than the request: the failure still comes first
    assert m["findings"][1]["value"] > first["value"]


def test_too_little_free_is_not_fragmentation(tmp_path):
    """16 MiB asked with 5 MiB free on the device: the allocator's new segment (16 MiB, a request ≥ 10 MiB
    rounded up to 2 MiB) does not fit either."""
    o = summary_of(tmp_path, oom_snapshot(request=16 * MIB))["oom"]
    assert o["reserved_unallocated_bytes"] == 10_485_248 < o["requested_bytes"] == 16_777_216
    assert o["fragmentation"] is False and o["cause"] == "device full"
    assert o["segment_request_bytes"] == 16_777_216 > o["device_free_bytes"] == 5_242_880
    text = summary_of(tmp_path, oom_snapshot(request=16 * MIB))["findings"][0]["text"]
    assert "not fragmentation" in text and "smaller batch" in text and "expandable" not in text


def test_fragmentation_with_expandable_segments_already_on_does_not_suggest_them(tmp_path):
    m = summary_of(tmp_path, oom_snapshot(settings={"expandable_segments": True}))
    assert m["oom"]["fragmentation"] is True and m["oom"]["expandable_segments"] is True
    assert "already on" in m["findings"][0]["text"] and "expandable_segments:True" not in m["findings"][0]["text"]


def test_the_last_of_several_failures_is_the_one_reported(tmp_path):
    snap = oom_snapshot()
    first = {"action": "oom", "size": 512, "device_free": 0, "stream": 0, "time_us": 1_000_000, "frames": FORWARD}
    snap["device_traces"][0].insert(0, first)
    o = summary_of(tmp_path, snap)["oom"]
    assert (o["events"], o["index"], o["requested_bytes"]) == (2, 10, 6_291_456)


def test_a_snapshot_without_an_oom_has_none(tmp_path):
    m = summary_of(tmp_path, snapshots.hand_snapshot())
    assert m["oom"] is None and all(f["kind"] != "oom" for f in m["findings"])


def test_without_trace_events_only_the_snapshot_s_moment_is_known(tmp_path):
    """``hand_snapshot`` with its trace left out: its active blocks request 1000 + 1024 + 4096 = 6120 B."""
    snap = snapshots.hand_snapshot()
    snap["device_traces"] = [[]]
    m = summary_of(tmp_path, snap)
    kinds = [f["kind"] for f in m["findings"]]
    assert "before_recording" not in kinds  # not "100% allocated before recording"
    no_trace = next(f for f in m["findings"] if f["kind"] == "no_trace")
    assert no_trace["value"] == 6120 and "only the state at the time of the snapshot is known" in no_trace["text"]
    assert "in 3 block(s)" in no_trace["text"]
    assert any(note.startswith("no trace was recorded") for note in m["notes"])
    assert all("at the peak" not in f["text"] for f in m["findings"])


def torch_2_0_snapshot() -> dict:
    """Blocks as torch 2.0 wrote them: no address, no requested_size, no frames, a ``history`` of allocations;
    events without times. The segment at 0x40000 (4096 B): a 1024 B block active, asked as 1000 B by a ``.to``
    (its first history entry), then a 3072 B inactive one. The trace allocates 512 B at 0x40400 in forward and
    frees it. By hand: before recording 1000 (the active block the trace does not allocate); peak 1000 + 512 =
    1512 at the allocation; parameters 1000 (its history's stack), temporaries 512 (forward, freed with no
    backward after it)."""
    old = [
        {"action": a, "addr": 0x40400, "size": 512, "stream": 0, "frames": FORWARD} for a in ("alloc", "free_completed")
    ]
    blocks = [
        {"size": 1024, "state": "active_allocated", "history": [{"addr": 0x40000, "real_size": 1000, "frames": SETUP}]},
        {"size": 3072, "state": "inactive", "history": []},
    ]
    segment = {
        "device": 0,
        "address": 0x40000,
        "total_size": 4096,
        "stream": 0,
        "segment_type": "small",
        "blocks": blocks,
    }
    return {"segments": [segment], "device_traces": [old]}


def test_an_older_torch_s_blocks_are_read_from_their_history(tmp_path):
    m = summary_of(tmp_path, torch_2_0_snapshot())
    assert m["baseline_allocated_bytes"] == 1000 and m["peak_allocated_bytes"] == 1512
    assert m["categories_at_peak_bytes"]["parameters"] == 1000
    assert m["categories_at_peak_bytes"]["temporaries"] == 512
    assert m["has_times"] is False
    assert any("older torch" in n for n in m["notes"]) and any("no times" in n for n in m["notes"])
    assert m["end_state"]["segments_active_bytes"] - m["end_state"]["segments_active_requested_bytes"] == 24


def test_an_older_torch_s_requested_sizes_are_memory_viz_s():
    """torch's own reader of such blocks (memory_viz ``_block_extra``) gives the same requested size."""
    memory_viz = pytest.importorskip("torch.cuda._memory_viz")
    snap = torch_2_0_snapshot()
    active = [b for b in snap["segments"][0]["blocks"] if b["state"].startswith("active")]
    assert [memory_viz._block_extra(b)[1] for b in active] == [1000]


def test_several_devices_say_what_the_others_hold(tmp_path):
    """Device 0: ``hand_snapshot``'s 9 events; device 1: two events, one of them an out-of-memory of 1 MiB, and
    a 2 MiB segment. Device 1 holds the more memory (2 MiB against device 0's 12 KiB of segments) and is opened;
    device 0 (the most events) is replayed when asked, and its note names device 1 and how to read it."""
    snap = snapshots.hand_snapshot()
    failed = {"action": "oom", "size": MIB, "device_free": 0, "stream": 0, "time_us": 1_000_100, "frames": []}
    snap["device_traces"].append([event("segment_alloc", 0x9000000, 2 * MIB, 90), failed])
    snap["segments"].append({"device": 1, "address": 0x9000000, "total_size": 2 * MIB, "stream": 0, "blocks": []})
    assert summary_of(tmp_path, snap)["device"] == 1
    m = summary_of(tmp_path, snap, device=0)
    assert m["device"] == 0 and m["devices"] == [0, 1] and m["oom"] is None
    note = next(n for n in m["notes"] if "device 1" in n)
    assert "2 trace events, 1 of them out-of-memory, 1 segments (2.0 MiB reserved)" in note
    assert "--trace-device 1" in note
    o = summary_of(tmp_path, snap, device=1)["oom"]
    assert o["requested_bytes"] == MIB and o["pool"] == "small"  # 1 MiB is still the small pool's


ADAM = "/venv/lib/python3.11/site-packages/torch/optim"


def test_both_adam_moments_are_optimizer_state(tmp_path):
    """One training step with torch's Adam: forward 1000 B (saved), backward grad 1000 B (kept), then
    ``_init_group`` allocates exp_avg and exp_avg_sq (1000 B each), a 1000 B denominator freed in the step, and
    the next step's forward (512 B) begins. Live after it: activations 1000 (alive when backward begins),
    gradients 1000 (alive past backward), optimizer state 2000 (both moments outlive the step), unknown 512 (a
    forward with no backward recorded after it); the denominator is freed: temporaries 0."""
    step = ((ADAM + "/optimizer.py", 485, "wrapper"), ("/home/u/proj/train.py", 42, "step"))
    exp_avg = frames((ADAM + "/adam.py", 191, "_init_group"), (ADAM + "/adam.py", 247, "step"), *step)
    exp_avg_sq = frames((ADAM + "/adam.py", 195, "_init_group"), (ADAM + "/adam.py", 247, "step"), *step)
    denom = frames((ADAM + "/adam.py", 422, "_single_tensor_adam"), (ADAM + "/adam.py", 258, "step"), *step)
    trace = [
        event("alloc", 0x1000, 1000, 0, FORWARD),
        event("alloc", 0x2000, 1000, 1, BACKWARD),
        event("alloc", 0x3000, 1000, 2, exp_avg),
        event("alloc", 0x4000, 1000, 3, exp_avg_sq),
        event("alloc", 0x5000, 1000, 4, denom),
        event("free_completed", 0x5000, 1000, 5),
        event("alloc", 0x6000, 512, 6, FORWARD),
    ]
    a = analyse(read_snapshot(_write(tmp_path, {"segments": [], "device_traces": [trace]})))
    assert a.categories_at(7) == {
        "parameters": 0,
        "gradients": 1000,
        "optimizer_state": 2000,
        "activations": 1000,
        "temporaries": 0,
        "workspace": 0,
        "unknown": 512,
    }


def _write(tmp_path, snap: dict):
    path = tmp_path / "adam.pickle"
    path.write_bytes(pickle.dumps(snap))
    return path


def test_the_import_stores_the_failure_as_its_first_finding(tmp_path, capsys):
    from core import cli

    path = tmp_path / "oom.pickle"
    path.write_bytes(pickle.dumps(oom_snapshot(), protocol=4))
    assert cli.main(["snapshot", str(path), "--json", "--no-save"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["oom"]["requested_bytes"] == 6_291_456 and out["oom"]["fragmentation"] is True
    assert out["findings"][0]["kind"] == "oom"


def test_both_moments_of_a_real_adamw_step_are_optimizer_state():
    """A real training step (tests/data/workload: the student's own AdamW, built on torch.optim.Optimizer, keeps
    its two moments from lines 74 and 75 of cs336_basics/optimizer.py). By the test's own walk of the events, the
    allocations of each line still alive at the end are one per parameter, so both lines hold the same bytes;
    every one of them is optimizer state here."""
    from core.workload.snapshot.analysis import RULES

    path = snapshots.REAL_SNAPSHOTS / "cs336_bcrafton_train_step_all_stacks.pickle.gz"
    events = snapshots.load_any(path)["device_traces"][0]
    alive: dict[int, int] = {}  # address → event index of its live allocation
    for i, e in enumerate(events):
        if e["action"] == "alloc":
            alive[e["addr"]] = i
        elif e["action"] == "free_completed":
            alive.pop(e["addr"], None)

    def line(e: dict) -> int | None:
        return next(
            (f["line"] for f in e.get("frames", []) if f["filename"].endswith("cs336_basics/optimizer.py")), None
        )

    moments = {74: [], 75: []}
    for i in alive.values():
        if line(events[i]) in moments:
            moments[line(events[i])].append(i)
    a = analyse(read_snapshot(path))
    rule = dict(zip(a.alloc_idx.tolist(), a.alloc_rule.tolist()))
    sizes = {k: sum(events[i]["size"] for i in v) for k, v in moments.items()}
    assert sizes[74] == sizes[75] > 0 and len(moments[74]) == len(moments[75])
    assert {RULES[rule[i]][1] for v in moments.values() for i in v} == {"optimizer_state"}


# -- out-of-memory snapshots recorded on an H200 (tests/data/workload/README.md): torch's own message at each
# failure is the independent figure, rounded as torch prints it.


def real_oom(name: str) -> tuple[dict, dict]:
    path = snapshots.REAL_SNAPSHOTS / name
    m = analyse(read_snapshot(path)).summary()
    m["findings"] = to_store(snapshot_findings(m))
    failed = [e for t in snapshots.load_any(path)["device_traces"] for e in t if e["action"] == "oom"]
    return m, failed[-1]


def test_a_real_oom_on_a_full_h200_says_too_little_was_free():
    """torch: "Tried to allocate 1024.00 MiB … of which 641.12 MiB is free … 138.44 GiB is allocated by
    PyTorch, and 2.91 MiB is reserved by PyTorch but unallocated"."""
    m, failed = real_oom("oom_h200_device.pickle.gz")
    o = m["oom"]
    assert o["requested_bytes"] == failed["size"] == 1 << 30
    assert o["device_free_bytes"] == failed["device_free"] and round(o["device_free_bytes"] / MIB, 2) == 641.12
    assert round(o["allocated_bytes"] / GIB, 2) == 138.44 and round(o["reserved_unallocated_bytes"] / MIB, 2) == 2.91
    assert o["cause"] == "device full" and o["fragmentation"] is False
    first = m["findings"][0]
    assert first["kind"] == "oom" and "641.1 MiB free on the device" in first["text"]
    assert "too little is free" in first["text"]


def test_a_real_oom_under_a_memory_fraction_blames_the_limit_not_the_device():
    """``set_per_process_memory_fraction(0.02)``; torch: "… of which 136.63 GiB is free … 2.80 GiB allowed; Of
    the allocated memory 2.44 GiB is allocated by PyTorch, and 2.91 MiB is reserved by PyTorch but unallocated".
    The device had room for the 1 GiB segment; the limit lies between what was reserved and that plus the
    segment, as the finding says."""
    m, failed = real_oom("oom_h200_cap.pickle.gz")
    o = m["oom"]
    assert o["device_free_bytes"] == failed["device_free"] and round(o["device_free_bytes"] / GIB, 2) == 136.63
    assert round(o["allocated_bytes"] / GIB, 2) == 2.44 and round(o["reserved_unallocated_bytes"] / MIB, 2) == 2.91
    assert o["cause"] == "process limit" and o["segment_request_bytes"] == 1 << 30
    assert o["reserved_bytes"] <= 2.80 * GIB < o["reserved_bytes"] + o["segment_request_bytes"]
    text = m["findings"][0]["text"]
    assert "not the device's memory" in text and "set_per_process_memory_fraction" in text
    assert "too little is free" not in text


def test_a_real_training_step_s_memory_is_split_as_its_script_holds_it():
    """scripts/record_oom_snapshot.py: two Linear(4096, 4096) with bias trained with Adam, gradients set to None
    after each step, then 1 GiB tensors. At the peak: parameters 2 × (4096² + 4096) × 4 B = 134,250,496; both
    Adam moments twice that; no gradient and no activation alive; the two cuBLAS workspaces (one handle for the
    main thread's forward, one for the autograd engine's thread; 32 MiB each on Hopper) and cuBLASLt's 1 MiB:
    68,157,440 — before, the backward thread's workspace was counted as gradients."""
    m, _ = real_oom("oom_h200_cap.pickle.gz")
    cats = m["categories_at_peak_bytes"]
    assert cats["parameters"] == 134_250_496 and cats["optimizer_state"] == 2 * 134_250_496
    assert cats["gradients"] == 0 and cats["activations"] == 0
    assert cats["workspace"] == 2 * 32 * MIB + MIB


def test_an_older_gpu_s_cublas_workspaces_are_not_gradients():
    """cs336_mem_snapshot (a GPU before Hopper): torch's default cuBLAS workspace there is ":4096:2:16:8",
    2 × 4096 KiB + 8 × 16 KiB = 8,519,680 B, one for the forward's handle and one for the backward thread's;
    the gradient left is 2 MiB (before, 2,097,152 + 8,519,680 = 10,616,832 were called gradients)."""
    m = analyse(read_snapshot(snapshots.REAL_SNAPSHOTS / "cs336_mem_snapshot.pickle.gz")).summary()
    cats = m["categories_at_peak_bytes"]
    assert cats["workspace"] == 2 * 8_519_680 and cats["gradients"] == 2 * MIB

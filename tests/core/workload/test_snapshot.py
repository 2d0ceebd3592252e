"""Reading and replaying memory snapshots: every protocol, JSON and gzip; the baseline from before recording;
the peak, its stack and who holds memory there; categories by rule; segment maps; refusals.

Expected values come from hand arithmetic (``snapshots.hand_snapshot``'s docstring), from a plain replay
that shares no code with the lab (``snapshots.plain_replay``), and from ``pickle``/``json`` themselves.
"""

import gzip
import json
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

from core.errors import InputRefused
from core.workload.snapshot import reader as snapshot_module
from core.workload.snapshot.analysis import analyse, stack_kind
from core.workload.snapshot.frames import hidden_frame, site_label
from core.workload.snapshot.reader import read_snapshot
from tests.conftest import ROOT
from tests.core.workload import snapshots


def write(tmp_path, name, data: bytes):
    path = tmp_path / name
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_every_pickle_protocol_reads_the_same(tmp_path, protocol):
    snap = snapshots.hand_snapshot()
    path = write(tmp_path, "s.pickle", pickle.dumps(snap, protocol=protocol))
    read = read_snapshot(path)
    trace = read.traces[0]
    assert list(trace.size) == [e["size"] for e in snap["device_traces"][0]]
    assert [snapshot_module.ACTIONS[a] for a in trace.action] == [e["action"] for e in snap["device_traces"][0]]
    assert list(trace.addr) == [e["addr"] for e in snap["device_traces"][0]]
    assert read.source["format"].startswith("pickle")


def test_json_and_gzip_read_like_the_pickle(tmp_path):
    snap = snapshots.hand_snapshot()
    expected = analyse(read_snapshot(write(tmp_path, "a.pickle", pickle.dumps(snap)))).summary()
    for name, data in (
        ("b.json", json.dumps(snap).encode()),
        ("c.json.gz", gzip.compress(json.dumps(snap).encode())),
        ("d.pickle.gz", gzip.compress(pickle.dumps(snap, 5))),
        ("e.bin", gzip.compress(pickle.dumps(snap))),
    ):
        got = analyse(read_snapshot(write(tmp_path, name, data))).summary()
        for key in (
            "peak_allocated_bytes",
            "peak_reserved_bytes",
            "baseline_allocated_bytes",
            "trace_events",
            "categories_at_peak_bytes",
            "peak_stack",
        ):
            assert got[key] == expected[key], (name, key)


def test_the_hand_snapshot_by_hand(tmp_path):
    a = analyse(read_snapshot(write(tmp_path, "s.pickle", pickle.dumps(snapshots.hand_snapshot()))))
    m = a.summary()
    assert m["baseline_allocated_bytes"] == 1000 + 256  # the requested size, as for traced blocks
    assert m["baseline_allocated_blocks"] == 2
    assert list(a.allocated) == [1256, 1768, 1512, 2536, 2536, 6632, 6632, 6120, 6632, 6120]
    assert m["peak_allocated_bytes"] == 6632 and m["peak_point"] == 5
    assert m["peak_time_ms"] == pytest.approx(0.040)
    assert m["peak_event"] == {"index": 4, "action": "alloc", "size_bytes": 4096, "address": 0x20000}
    assert m["peak_stack"][0].endswith("torch/optim/adamw.py:178 _init_group")
    assert m["baseline_reserved_bytes"] == 8192 and m["peak_reserved_bytes"] == 12288
    assert m["end_state"] == {
        "segments_active_bytes": 6144,
        "segments_active_requested_bytes": 6120,
        "replay_allocated_bytes": 6120,
        "segments_reserved_bytes": 12288,
        "replay_reserved_bytes": 12288,
    }
    assert len(m["notes"]) == 1 and "24 bytes larger (6,144 in blocks, 6,120 requested)" in m["notes"][0]
    assert m["categories_at_peak_bytes"] == {
        "parameters": 1000,
        "gradients": 1024,
        "optimizer_state": 4096,
        "activations": 512,
        "temporaries": 0,
        "workspace": 0,
        "unknown": 0,
    }
    rules = {r["rule"]: r["allocations"] for r in m["category_rules"]}
    assert rules["model-setup"] == 1 and rules["forward-saved"] == 1 and rules["backward-kept"] == 1
    assert rules["optimizer-kept"] == 1 and rules["no-stack"] == 2  # E, and the block freed at event 1
    sites = {s["label"]: s["bytes"] for s in m["top_sites_at_peak"]}
    assert sum(sites.values()) == 6632
    assert sites["train.py:42 step"] == 4096  # the innermost frame outside torch: the user's line


def test_the_plain_replay_agrees_on_the_hand_snapshot_and_a_big_one(tmp_path):
    for snap, device in ((snapshots.hand_snapshot(), 0), (snapshots.big_snapshot(), 1)):
        expected = snapshots.plain_replay(snap, device)
        m = analyse(read_snapshot(write(tmp_path, "s.pickle", pickle.dumps(snap)))).summary()
        assert m["peak_allocated_bytes"] == expected["peak"]
        assert m["baseline_allocated_bytes"] == expected["baseline"]
        assert m["trace_events"] == expected["events"]
        assert m["device"] == device  # the device with the most events is the one replayed


def test_streaming_in_tiny_chunks_keeps_every_event_in_order(tmp_path, monkeypatch):
    """Chunks of 4 KiB: the lists are emptied while the unpickler still appends to them, many times over."""
    from core import intake

    snap = snapshots.big_snapshot(2500)  # ~20,000 events: ~20 batches of 1000 appended one after another
    path = write(tmp_path, "s.pickle", pickle.dumps(snap, protocol=4))
    monkeypatch.setattr(intake, "STREAM_BUFFER_BYTES", 4096)
    drained = []
    original = snapshot_module._Drain.drain

    def counting(self):
        grew = original(self)
        drained.append(grew)
        return grew

    monkeypatch.setattr(snapshot_module._Drain, "drain", counting)
    read = read_snapshot(path)
    events = snap["device_traces"][1]
    assert sum(drained) >= 10  # batches really were taken out while the unpickler was still appending
    assert list(read.traces[1].time_us) == [e["time_us"] for e in events]
    assert list(read.traces[1].size) == [e["size"] for e in events]


def test_a_stack_shared_by_a_block_and_its_allocation_survives_streaming(tmp_path, monkeypatch):
    """torch gives an allocation's event and its block one frames list (one object in the pickle). While
    streaming, the reader empties the lists of allocations nothing else holds; this one must stay whole for
    the block, read after the events."""
    from core import intake

    monkeypatch.setattr(intake, "STREAM_BUFFER_BYTES", 4096)

    def stack(i: int) -> list[dict]:
        return [{"filename": f"/m{i}.py", "line": i, "name": f"f{i}"}, {"filename": "/t.py", "line": 1, "name": "step"}]

    stacks = [stack(i) for i in range(3000)]
    events = [
        {"action": "alloc", "addr": 4096 * i, "size": 512, "stream": 0, "time_us": i, "frames": stacks[i]}
        for i in range(3000)
    ]
    live = list(range(0, 3000, 7))  # still allocated: a block of the segment holds the same list
    blocks = [
        {"address": 4096 * i, "size": 512, "requested_size": 512, "state": "active_allocated", "frames": stacks[i]}
        for i in live
    ]
    segment = {"device": 0, "address": 0, "total_size": 4096 * 3000, "stream": 0, "blocks": blocks}
    top = {"segments": [segment], "device_traces": [events]}
    read = read_snapshot(write(tmp_path, "shared.pickle", pickle.dumps(top, protocol=4)))

    def expected(i: int) -> tuple:
        return ((f"/m{i}.py", i, f"f{i}"), ("/t.py", 1, "step"))

    assert [read.sites[b.site] for b in read.segments[0].blocks] == [expected(i) for i in live]
    assert [read.sites[s] for s in read.traces[0].site] == [expected(i) for i in range(3000)]


def test_a_large_snapshot_takes_a_fraction_of_the_memory_of_pickle_load(tmp_path):
    """A ~40 MB file written by the benchmark's generator: the lab's reader in one process, plain pickle.load
    in another, each under tracemalloc (which sees dicts, arrays and NumPy buffers alike). The lab's peak must
    stay well under plain pickle's (measured here: 0.37×, and 0.43× when allocations' frames lists are kept
    while loading; the emptied event dicts stay referenced by the unpickler's memo until it finishes, so it
    is not ~0). A peak-RSS comparison cannot stand in: the
    process's high-water mark may already have been set by importing its libraries."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from snapshot_import import write_snapshot

    path = tmp_path / "big.pickle"
    write_snapshot(path, 40)
    probe = (
        "import sys, tracemalloc, pickle; sys.path.insert(0, {root!r}); {setup}; tracemalloc.start(); {body}; "
        "print(tracemalloc.get_traced_memory()[1] // 1024)"
    )
    lab = probe.format(
        root=str(ROOT),
        setup="from core.workload.snapshot.reader import read_snapshot",
        body=f"s = read_snapshot({str(path)!r})",
    )
    plain = probe.format(root=str(ROOT), setup="pass", body=f"d = pickle.load(open({str(path)!r}, 'rb'))")
    peak = [
        int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
        for code in (lab, plain)
    ]
    assert peak[1] > 40 * 1024, f"plain pickle.load of a 40 MB file peaked at only {peak[1]} KiB"
    assert peak[0] < 0.4 * peak[1], f"lab peaked at {peak[0]} KiB, plain pickle.load {peak[1]} KiB"


def test_segments_at_the_peak_and_at_the_start(tmp_path):
    a = analyse(read_snapshot(write(tmp_path, "s.pickle", pickle.dumps(snapshots.hand_snapshot()))))
    at_peak = {s["address"]: s for s in a.segments_at(5)}
    assert set(at_peak) == {0x10000, 0x20000}
    s1 = [(b["address"], b["size"], b["state"]) for b in at_peak[0x10000]["blocks"]]
    assert s1 == [
        (0x10000, 1024, "active_allocated"),
        (0x10400, 512, "active_allocated"),
        (0x10600, 1024, "active_allocated"),
        (0x10A00, 5632, "inactive"),
    ]
    assert [(b["size"], b["state"]) for b in at_peak[0x20000]["blocks"]] == [(4096, "active_allocated")]
    at_start = {s["address"]: s for s in a.segments_at(0)}
    assert set(at_start) == {0x10000}  # S2 is allocated by event 3
    states = [(b["address"], b["size"], b["state"]) for b in at_start[0x10000]["blocks"]]
    assert (0x11800, 256, "active_allocated") in states  # the block the trace frees at event 1
    compact, numbers = a.segment_map_at(5)
    assert numbers["largest_free_block_bytes"] == 5632 and numbers["fragmentation_ratio"] == 0.0
    assert a.segments_at(6)[0]["blocks"][1]["state"] == "active_pending_free"  # A after free_requested


def test_points_between_keeps_the_peak_and_respects_the_budget(tmp_path):
    a = analyse(read_snapshot(write(tmp_path, "s.pickle", pickle.dumps(snapshots.big_snapshot(800)))))
    points = a.points_between(None, None, 300)
    assert len(points) <= 300 and a.peak_point in points
    t = a.point_time_ms(np.arange(len(a.allocated)))
    window = a.points_between(t[100], t[200], 1000)
    assert window.min() >= 100 and window.max() <= 201
    assert np.array_equal(window, np.arange(window.min(), window.max() + 1))  # a small window: every point


def test_stack_kinds_read_windows_paths_and_torch_frames():
    assert stack_kind((("D:\\venv\\Lib\\site-packages\\torch\\optim\\adamw.py", 1, "_init_group"),)) == 4
    assert stack_kind((("C:\\x\\torch\\autograd\\graph.py", 1, "_engine_run_backward"),)) == 3
    assert stack_kind((("/x/torch/nn/modules/module.py", 1, "_apply"),)) == 1
    assert stack_kind((("/p/model.py", 1, "forward"),)) == 2
    assert stack_kind((("/p/data.py", 1, "load"),)) == 0
    engine = tuple((f["filename"], f["line"], f["name"]) for f in snapshots.ENGINE_THREAD)
    assert stack_kind(engine) == 3  # the autograd engine's thread: backward without a Python frame


REAL_ALL_STACKS = str(snapshots.REAL_SNAPSHOTS / "cs336_bcrafton_train_step_all_stacks.pickle.gz")


def _stack(frames: list[dict]) -> tuple:
    return tuple((f["filename"], f["line"], f["name"]) for f in frames)


def test_sites_are_named_by_the_user_s_python_frame_under_cpp_frames():
    assert site_label(_stack(snapshots.with_cpp_frames(snapshots.OPTIM_TMP))) == "train.py:42 step"
    assert site_label(_stack(snapshots.with_cpp_frames(snapshots.FORWARD))) == "model.py:12 forward"
    # no Python frame: the first frame past the recorder, the allocator and the dispatch, and its autograd node
    assert site_label(_stack(snapshots.ENGINE_THREAD)) == "at::native::div in MeanBackward0"
    # code torch.compile generated is not the user's: the model line that ran it is
    inductor = snapshots.frames(
        ("/tmp/torchinductor_u/cq/cqau263z.py", 130, "call"),
        ("/venv/lib/python3.11/site-packages/torch/_inductor/output_code.py", 460, "__call__"),
        ("/home/u/proj/model.py", 107, "forward"),
    )
    assert site_label(_stack(snapshots.with_cpp_frames(inductor))) == "model.py:107 forward"


def test_hidden_frames_cover_every_frame_memory_viz_drops_in_a_real_snapshot():
    """torch's own filter (memory_viz ``_frame_filter``) on every frame of a real stacks="all" snapshot: each
    frame it drops is hidden here too, and no Python frame is hidden."""
    memory_viz = pytest.importorskip("torch.cuda._memory_viz")
    data = snapshots.load_any(REAL_ALL_STACKS)
    seen = {(f["filename"], f["name"]) for e in data["device_traces"][0] for f in e.get("frames", [])}
    dropped = {(fn, name) for fn, name in seen if not memory_viz._frame_filter(name, fn)}
    assert len(dropped) > 10  # the file is a stacks="all" recording
    assert all(hidden_frame(fn, name) for fn, name in dropped)
    assert not any(hidden_frame(fn, name) for fn, name in seen if fn.endswith(".py"))


def test_a_real_stacks_all_snapshot_names_python_sites_at_the_peak(capsys):
    """Recorded with torch's defaults (C++ frames): the peak and every top site are named by Python frames of
    the user's code, never by the recorder or the allocator."""
    from core import cli

    assert cli.main(["snapshot", REAL_ALL_STACKS, "--no-save"]) == 0
    text = capsys.readouterr().out
    assert "  site: optimizer.py:78 step" in text  # the user's AdamW (cs336_basics/optimizer.py), line 78
    assert "cs336_basics/optimizer.py:78 step" in text and "unwind" not in text
    assert cli.main(["snapshot", REAL_ALL_STACKS, "--json", "--no-save"]) == 0
    out = json.loads(capsys.readouterr().out)
    labels = [s["label"] for s in out["top_sites_at_peak"] if s["site"] >= 0]
    assert labels and all(
        label.split(":")[0] in ("optimizer.py", "model.py", "benchmarking_script.py") for label in labels
    )
    assert not any("unwind" in f or "CUDACachingAllocator" in f for s in out["top_sites_at_peak"] for f in s["stack"])
    rules = {r["rule"]: r["allocations"] for r in out["category_rules"]}
    assert rules["backward-scratch"] > 0  # backward stacks on the engine's thread are recognised
    assert rules["optimizer-kept"] > 0 and rules["forward-saved"] > 0


def test_categories_and_sites_read_the_same_with_and_without_cpp_frames(tmp_path):
    python = analyse(read_snapshot(write(tmp_path, "p.pickle", pickle.dumps(snapshots.hand_snapshot())))).summary()
    for engine_thread in (False, True):
        snap = snapshots.hand_snapshot_all_stacks(backward_on_engine_thread=engine_thread)
        m = analyse(read_snapshot(write(tmp_path, "a.pickle", pickle.dumps(snap)))).summary()
        assert m["categories_at_peak_bytes"] == python["categories_at_peak_bytes"]
        assert [(r["rule"], r["allocations"]) for r in m["category_rules"]] == [
            (r["rule"], r["allocations"]) for r in python["category_rules"]
        ]
        assert m["peak_site"] == python["peak_site"] == "train.py:42 step"
        # recorder, allocator and interpreter frames hidden; the operator's two C++ frames stay, then the Python
        assert m["peak_stack"][2:] == python["peak_stack"] and m["peak_stack"][0].startswith("??:0 at::detail::empty")
        labels = {s["label"] for s in m["top_sites_at_peak"]}
        assert ("at::native::div in MeanBackward0" in labels) == engine_thread


@pytest.mark.parametrize("path", snapshots.real_snapshot_files(), ids=os.path.basename)
def test_allocated_at_the_end_is_memory_viz_s_in_requested_sizes(path, capsys):
    """torch's memory_viz ``memory()`` accounts each active block at its requested size and the rest of the
    block as ``<gaps>``: the replay ends at its requested total, and the block rounding reported apart is its
    gaps."""
    memory_viz = pytest.importorskip("torch.cuda._memory_viz")
    from core import cli

    data = snapshots.load_any(path)
    lines = memory_viz.memory(data, format_flamegraph=lambda text: text).splitlines()
    active = [(line.rsplit(" ", 1)[0], int(line.rsplit(" ", 1)[1])) for line in lines if ";active_allocated;" in line]
    requested = sum(size for stack, size in active if not stack.endswith(";<gaps>"))
    gaps = sum(size for stack, size in active if stack.endswith(";<gaps>"))
    assert cli.main(["snapshot", path, "--json", "--no-save"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["end_allocated_bytes"] == out["end_state"]["segments_active_requested_bytes"] == requested
    assert out["end_state"]["segments_active_bytes"] - requested == gaps


def test_a_snapshot_without_trace_is_its_segments(tmp_path):
    snap = snapshots.hand_snapshot()
    snap["device_traces"] = [[]]
    m = analyse(read_snapshot(write(tmp_path, "s.pickle", pickle.dumps(snap)))).summary()
    assert m["trace_events"] == 0
    assert m["peak_allocated_bytes"] == 1000 + 1024 + 4096 == m["baseline_allocated_bytes"]  # requested sizes
    assert m["peak_reserved_bytes"] == 12288


@pytest.mark.parametrize(
    "make, reason",
    [
        (lambda: pickle.dumps({"segments": [], "device_traces": [[os.system]]}), "names the class"),
        (lambda: pickle.dumps(snapshots.hand_snapshot())[:300], "truncated"),
        (lambda: gzip.compress(pickle.dumps(snapshots.hand_snapshot()))[:-20], "truncated|not valid gzip"),
        (lambda: b"", "empty"),
        (lambda: pickle.dumps([1, 2, 3]), "not a memory snapshot"),
        (lambda: json.dumps({"traceEvents": []}).encode(), "not a memory snapshot"),
        (lambda: b"\x00\x01binary junk", "neither a pickle nor JSON"),
        (lambda: pickle.dumps({"segments": [{"address": "x"}], "device_traces": []}), "integer address"),
    ],
)
def test_bad_files_are_refused_with_the_reason(tmp_path, make, reason):
    with pytest.raises(InputRefused, match=reason):
        read_snapshot(write(tmp_path, "bad.pickle", make()))


@pytest.mark.parametrize("path", snapshots.real_snapshot_files(), ids=os.path.basename)
def test_real_snapshots_match_a_plain_replay(path, capsys):
    """Snapshots recorded on real GPUs by other people (tests/data/workload/snapshots, plus any folder named by
    $GPULAB_REAL_SNAPSHOTS): `snapshot --json` reports the plain replay's peak (within 0.1%), baseline
    included, and the same baseline."""
    from core import cli

    data = snapshots.load_any(path)
    assert cli.main(["snapshot", path, "--json", "--no-save"]) == 0
    out = json.loads(capsys.readouterr().out)
    expected = snapshots.plain_replay(data, out["device"])
    assert out["trace_events"] == expected["events"]
    assert out["peak_allocated_bytes"] == pytest.approx(expected["peak"], rel=1e-3)
    assert out["baseline_allocated_bytes"] == expected["baseline"]


def test_the_committed_real_snapshots_are_read_and_two_start_with_memory_held():
    """The real files are there (the test above is not silently empty): six recorded on a GPU, three of them
    after memory was already allocated (two after 525,286,400 bytes, the model's weights), by the test's own
    replay."""
    files = [f for f in snapshots.real_snapshot_files() if f.startswith(str(snapshots.REAL_SNAPSHOTS))]
    assert len(files) == 6
    baselines = sorted(snapshots.plain_replay(snapshots.load_any(f), 0)["baseline"] for f in files)
    # requested sizes (the blocks are 525,286,400 and 3,072,871,424 bytes: rounded up by the allocator)
    assert baselines == [0, 0, 0, 523811840, 523811840, 3064418304]


@pytest.mark.gpu
def test_a_snapshot_recorded_here_replays_to_the_allocator_s_own_counters(tmp_path):
    """On a GPU: tensors made before recording are the baseline, and the replayed peak is
    torch.cuda.max_memory_allocated (sizes are multiples of 512 bytes, so requested = block sizes)."""
    import torch

    from core.workload.snapshot.recorder import record_memory

    keep = torch.empty(8 * 2**20, dtype=torch.uint8, device="cuda")  # allocated before recording
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    path = tmp_path / "here.pickle"
    with record_memory(path, max_entries=10_000):
        a = torch.empty(32 * 2**20, dtype=torch.uint8, device="cuda")
        b = torch.empty(16 * 2**20, dtype=torch.uint8, device="cuda")
        del a
        c = torch.empty(64 * 2**20, dtype=torch.uint8, device="cuda")
        del b, c
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated()
    m = analyse(read_snapshot(path)).summary()
    assert m["baseline_allocated_bytes"] == base
    assert m["peak_allocated_bytes"] == peak == base + 80 * 2**20
    del keep


def _grown_forward() -> dict:
    """``hand_snapshot_all_stacks()`` (C++ frames) whose forward block A is 2048 bytes instead of 512. By hand:
    baseline 1000 + 256 = 1256; A → 3304; free 256 → 3048; B → 4072; C → 8168 ← peak (event 4). Live there:
    forward A 2048, backward B 1024, optimizer C 4096, the setup block from before recording 1000 = 8168."""
    snap = snapshots.hand_snapshot_all_stacks()
    for e in snap["device_traces"][0]:
        if (
            e["addr"] == 0x10400
            and e["action"] in ("alloc", "free_completed", "free_requested")
            and e["time_us"] < 1_000_070
        ):
            e["size"] = 2048
    return snap


def test_peak_differences_by_site_and_category_by_hand(tmp_path):
    from core.workload.snapshot.analysis import peak_differences

    a = analyse(read_snapshot(write(tmp_path, "a.pickle", pickle.dumps(snapshots.hand_snapshot())))).summary()
    b = analyse(read_snapshot(write(tmp_path, "b.pickle", pickle.dumps(_grown_forward())))).summary()
    assert (a["peak_allocated_bytes"], b["peak_allocated_bytes"]) == (6632, 8168)
    d = peak_differences(a, b)
    # A has Python stacks only, B C++ frames around them: the same sites, matched on their Python frames
    got = [(r["site"], r["category"], r["A_bytes"], r["B_bytes"], r["delta_bytes"]) for r in d["sites"]]
    assert got == [
        ("model.py:12 forward", "activations", 512, 2048, 1536),  # the only growth, first
        ("train.py:42 step", "optimizer_state", 4096, 4096, 0),
        ("train.py:41 step", "gradients", 1024, 1024, 0),
        ("train.py:10 main", "parameters", 1000, 1000, 0),
    ]
    assert sum(r["A_bytes"] for r in d["sites"]) == 6632 and sum(r["B_bytes"] for r in d["sites"]) == 8168
    cats = [(r["category"], r["A_bytes"], r["B_bytes"], r["delta_bytes"]) for r in d["categories"]]
    assert cats == [
        ("activations", 512, 2048, 1536),
        ("optimizer_state", 4096, 4096, 0),
        ("gradients", 1024, 1024, 0),
        ("parameters", 1000, 1000, 0),
    ]
    # the other way round: a shrink, listed last; and a top list cut short leaves the rest as one row
    back = peak_differences(b, a)
    assert back["sites"][-1]["site"] == "model.py:12 forward" and back["sites"][-1]["delta_bytes"] == -1536
    short = dict(b, top_sites_at_peak=b["top_sites_at_peak"][:1])  # only C (4096) listed for B
    rows = {r["site"]: (r["A_bytes"], r["B_bytes"]) for r in peak_differences(a, short)["sites"]}
    assert rows["(other sites: below each snapshot's top list)"] == (0, 8168 - 4096)
    assert rows["model.py:12 forward"] == (512, 0)

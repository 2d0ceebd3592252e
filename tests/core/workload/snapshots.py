"""Snapshot files for the tests, and a plain replay written independently of core.workload.

``hand_snapshot()`` is small enough to check by hand; every number the tests expect of it is worked out
in its docstring. ``plain_replay`` walks the events in order with a dict of live blocks and nothing else.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path

MODEL = "/home/u/proj/model.py"
TRAIN = "/home/u/proj/train.py"
TORCH = "/venv/lib/python3.11/site-packages/torch"


def frames(*names: tuple[str, int, str]) -> list[dict]:
    return [{"filename": f, "line": line, "name": n} for f, line, n in names]


FORWARD = frames((MODEL, 12, "forward"), (f"{TORCH}/nn/modules/module.py", 1751, "_call_impl"), (TRAIN, 40, "step"))
BACKWARD = frames(
    (f"{TORCH}/autograd/graph.py", 824, "_engine_run_backward"),
    (f"{TORCH}/autograd/__init__.py", 353, "backward"),
    (TRAIN, 41, "step"),
)
OPTIM_INIT = frames(
    (f"{TORCH}/optim/adamw.py", 178, "_init_group"), (f"{TORCH}/optim/adamw.py", 221, "step"), (TRAIN, 42, "step")
)
OPTIM_TMP = frames((f"{TORCH}/optim/adamw.py", 560, "_multi_tensor_adamw"), (TRAIN, 42, "step"))
SETUP = frames(
    (f"{TORCH}/nn/modules/module.py", 942, "_apply"), (f"{TORCH}/nn/modules/module.py", 1355, "to"), (TRAIN, 10, "main")
)
OTHER = frames(("/home/u/proj/data.py", 5, "load"))


def event(action: str, addr: int, size: int, t: int, stack=None) -> dict:
    e = {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": 1_000_000 + t}
    if stack is not None:
        e["frames"] = stack
    return e


def hand_snapshot() -> dict:
    """One device; numbers by hand.

    Segment S1 at 0x10000 (8192 B) existed before recording; its block at 0x10000 (a 1024 B block for a
    request of 1000 B, a parameter moved with ``.to``) is active at the end and never allocated in the trace →
    baseline, counted at its requested 1000 B like every traced block. The block at 0x11800 (256 B) is freed
    in the trace without being allocated there → baseline too. Baseline allocated = 1000 + 256 = 1256.

        event  action                        allocated after
        0      alloc A 0x10400 512 (forward)  1768
        1      free_completed 0x11800 256     1512
        2      alloc B 0x10600 1024 (backward) 2536
        3      segment_alloc S2 0x20000 4096  (reserved 8192 → 12288)
        4      alloc C 0x20000 4096 (optimizer _init_group)   6632  ← peak
        5      free_requested A               6632
        6      free_completed A               6120
        7      alloc E 0x10400 512 (no stack) 6632  (ties the peak: the first stays the peak)
        8      free_completed E               6120

    At the end: active 0x10000 (1000 requested) + B (1024) + C (4096) = 6120 = the segments' active blocks'
    requested sizes; their block sizes are 1024 + 1024 + 4096 = 6144, 24 B more (reported apart).
    Reserved: segments total 8192 + 4096 = 12288 at the end; the trace adds 4096 → baseline 8192.
    Peak allocated 6632 at event 4 (t = 1,000,040 µs → 40 µs after the first event at 1,000,000 → 0.04 ms).
    Live at the peak: baseline 0x10000 (1000), A (512, forward), B (1024, backward), C (4096, optimizer).
    Categories at the peak: parameters 1000 (the baseline block's .to stack), activations 512 (A: forward,
    alive when backward B begins), gradients 1024 (B: backward, alive when the optimizer's C comes),
    optimizer_state 4096 (C outlives its optimizer step: no forward or backward allocation follows, and it is
    still alive at the end). E has no stack: unknown. The orphan free at event 1: before recording, no stack.
    """
    trace = [
        event("alloc", 0x10400, 512, 0, FORWARD),
        event("free_completed", 0x11800, 256, 10),
        event("alloc", 0x10600, 1024, 20, BACKWARD),
        event("segment_alloc", 0x20000, 4096, 30, OPTIM_INIT),
        event("alloc", 0x20000, 4096, 40, OPTIM_INIT),
        event("free_requested", 0x10400, 512, 50),
        event("free_completed", 0x10400, 512, 60),
        event("alloc", 0x10400, 512, 70),
        event("free_completed", 0x10400, 512, 80),
    ]
    segments = [
        {
            "device": 0,
            "address": 0x10000,
            "total_size": 8192,
            "stream": 0,
            "segment_type": "small",
            "allocated_size": 2048,
            "active_size": 2048,
            "requested_size": 2048,
            "segment_pool_id": (0, 0),
            "is_expandable": False,
            "frames": [],
            "blocks": [
                {
                    "address": 0x10000,
                    "size": 1024,
                    "requested_size": 1000,
                    "state": "active_allocated",
                    "frames": SETUP,
                },
                {"address": 0x10400, "size": 512, "requested_size": 512, "state": "inactive", "frames": []},
                {
                    "address": 0x10600,
                    "size": 1024,
                    "requested_size": 1024,
                    "state": "active_allocated",
                    "frames": BACKWARD,
                },
                {"address": 0x10A00, "size": 5632, "requested_size": 0, "state": "inactive", "frames": []},
            ],
        },
        {
            "device": 0,
            "address": 0x20000,
            "total_size": 4096,
            "stream": 0,
            "segment_type": "small",
            "allocated_size": 4096,
            "active_size": 4096,
            "requested_size": 4096,
            "segment_pool_id": (0, 0),
            "is_expandable": False,
            "frames": [],
            "blocks": [
                {
                    "address": 0x20000,
                    "size": 4096,
                    "requested_size": 4096,
                    "state": "active_allocated",
                    "frames": OPTIM_INIT,
                }
            ],
        },
    ]
    return {
        "segments": segments,
        "device_traces": [trace],
        "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "", "expandable_segments": False},
        "external_annotations": [],
    }


def big_snapshot(n_steps: int = 400, seed: int = 1) -> dict:
    """Thousands of events (several pickle batches of 1000), shared frame objects as torch writes them."""
    import random

    rng = random.Random(seed)
    trace, addr, live = [], 0x7000_0000, []
    t = 0
    for _step in range(n_steps):
        for _ in range(rng.randint(3, 8)):
            size = rng.choice((512, 4096, 2**20, 3 * 2**20))
            trace.append(event("alloc", addr, size, t, rng.choice((FORWARD, BACKWARD, OTHER))))
            live.append((addr, size))
            addr += size
            t += rng.randint(1, 5)
        while live and rng.random() < 0.6:
            a, size = live.pop(rng.randrange(len(live)))
            trace.append(event("free_requested", a, size, t))
            trace.append(event("free_completed", a, size, t))
            t += 1
    return {"segments": [], "device_traces": [[], trace], "allocator_settings": {}}


def plain_replay(snapshot: dict, device: int) -> dict:
    """Peak allocated the way a reader of the format would compute it by hand, sharing no code with the lab.

    Live traced blocks by address; a free of an address the trace never allocated was allocated before
    recording; so was an active block of the final segments that no live traced block accounts for, counted at
    the size that was asked for (``requested_size``, which the trace's own events record), not its block size.
    """
    events = snapshot["device_traces"][device]
    live: dict[int, int] = {}
    before = 0
    for e in events:
        if e["action"] == "alloc":
            live[e["addr"]] = e["size"]
        elif e["action"] == "free_completed":
            if e["addr"] in live:
                del live[e["addr"]]
            else:
                before += e["size"]
    for seg in snapshot["segments"]:
        if seg.get("device", 0) != device:
            continue
        for block in seg["blocks"]:
            if block["state"].startswith("active") and block["address"] not in live:
                before += block.get("requested_size", block["size"])
    allocated = peak = before
    peak_index = -1
    for i, e in enumerate(events):
        if e["action"] == "alloc":
            allocated += e["size"]
        elif e["action"] == "free_completed":
            allocated -= e["size"]
        if allocated > peak:
            peak, peak_index = allocated, i
    return {"baseline": before, "peak": peak, "peak_index": peak_index, "events": len(events)}


class PlainData(pickle.Unpickler):
    """The test's own class-refusing unpickler, to read real files for the plain replay."""

    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"{module}.{name}")


def load_any(path) -> dict:
    import gzip
    import json

    with open(path, "rb") as fh:
        raw = fh.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    if raw[:1] in (b"{", b"["):
        return json.loads(raw)
    import io

    return PlainData(io.BytesIO(raw)).load()


REAL_SNAPSHOTS = Path(__file__).resolve().parents[2] / "data" / "workload" / "snapshots"


def real_snapshot_files() -> list[str]:
    """Snapshots recorded on real GPUs by other people: the ones committed here (see the README beside them),
    plus any folder of them named by ``GPULAB_REAL_SNAPSHOTS``."""
    folders = [REAL_SNAPSHOTS] + [Path(f) for f in [os.environ.get("GPULAB_REAL_SNAPSHOTS")] if f]
    return sorted(
        str(f)
        for folder in folders
        if folder.is_dir()
        for f in folder.iterdir()
        if f.name.endswith((".pickle", ".pkl", ".json", ".gz"))
    )


# C++ frames as torch records them with stacks="all" (``_record_memory_history()``'s default), copied from a
# real snapshot (tests/data/workload/snapshots/cs336_bcrafton_train_step_all_stacks.pickle.gz): the recorder
# and the allocator innermost, the interpreter between Python frames, the C runtime outermost.
CPP_TOP = [
    ("??", 0, "torch::unwind::unwind()"),
    ("??", 0, "torch::CapturedTraceback::gather(bool, bool, bool)"),
    ("memory_snapshot.cpp", 0, "torch::cuda::(anonymous namespace)::gather_with_cpp()"),
    (
        "CUDACachingAllocator.cpp",
        0,
        "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(unsigned long, CUstream_st*)",
    ),
    ("", 0, "c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::allocate(unsigned long)"),
    ("??", 0, "at::detail::empty_cuda(c10::ArrayRef<long>, c10::TensorOptions const&)"),
    ("RegisterCUDA_0.cpp", 0, "at::(anonymous namespace)::wrapper_CUDA_add_Tensor(at::Tensor const&)"),
]
CPP_BETWEEN = [("??", 0, "_PyEval_EvalFrameDefault"), ("??", 0, "_PyFunction_Vectorcall")]
CPP_BOTTOM = [
    ("??", 0, "Py_RunMain"),
    ("./csu/../csu/libc-start.c", 392, "__libc_start_main_impl"),
    ("??", 0, "_start"),
]
# a stack of the autograd engine's thread: no Python frame at all
ENGINE_THREAD = frames(
    *CPP_TOP,
    ("??", 0, "at::native::div(at::Tensor const&, c10::Scalar const&)"),
    ("??", 0, "torch::autograd::generated::MeanBackward0::apply(std::vector<at::Tensor> &&)"),
    ("", 0, "torch::autograd::Node::operator()(std::vector<at::Tensor> &&)"),
    ("??", 0, "torch::autograd::Engine::evaluate_function(std::shared_ptr<torch::autograd::GraphTask>&)"),
    ("??", 0, "torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask> const&)"),
    ("./nptl/pthread_create.c", 0, "start_thread"),
)


def with_cpp_frames(stack: list[dict]) -> list[dict]:
    """A Python-only stack as stacks="all" records it: C++ frames around and between its Python frames."""
    out = frames(*CPP_TOP)
    for f in stack:
        out += [f, *frames(*CPP_BETWEEN)]
    return out + frames(*CPP_BOTTOM)


def hand_snapshot_all_stacks(backward_on_engine_thread: bool = False) -> dict:
    """``hand_snapshot()`` with every stack recorded with C++ frames; optionally its backward allocation made
    on the autograd engine's thread (a stack with no Python frame), as it is on a GPU."""
    import copy

    snap = copy.deepcopy(hand_snapshot())
    for e in snap["device_traces"][0]:
        if "frames" in e:
            e["frames"] = (
                ENGINE_THREAD
                if backward_on_engine_thread and e["frames"] == BACKWARD
                else (with_cpp_frames(e["frames"]))
            )
    for seg in snap["segments"]:
        for b in seg["blocks"]:
            if b["frames"]:
                b["frames"] = with_cpp_frames(b["frames"])
    return snap

"""Importing a large memory snapshot: the lab's streaming import against a plain ``pickle.load``, in one run.

Builds a synthetic ``_dump_snapshot`` pickle of the requested size with the shape real ones have
(protocol 4 with frames, memoised strings and frame dicts shared between stacks as torch writes them,
alloc / free_requested / free_completed / segment_alloc / segment_free events with Python stacks, a
training loop of parameters, activations, gradients and optimizer state, blocks allocated before the
recording began), then times each reader in its own fresh process and reads that process's peak RSS:

- the lab: ``core.workload.snapshot.reader.read_snapshot`` + ``analyse`` (what ``python -m core snapshot`` runs);
- the reference: a bare ``pickle.load`` of the same file (no analysis at all);
- the floor of the lab's design: the same streaming read with the work on each batch of events cut to
  emptying their dicts (no columns, no stacks), once with the opcode guard and once without it. No import
  built on the C unpickler can read the file faster than the run without the guard; the lab's replay
  (its total minus its reading) comes on top.

The issue's target is < 60 s and < 4 GB peak RSS for a 1 GB file on a 2-core machine.

    python benchmarks/snapshot_import.py --mib 1024
    python benchmarks/snapshot_import.py --mib 64 --no-reference
"""

from __future__ import annotations

import argparse
import json
import random
import struct
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FRAME_TARGET = 64 * 1024
MIB = 2**20


class Encoder:
    """Writes pickle protocol 4 opcode by opcode, framed like CPython's pickler, with a memo for shared objects."""

    def __init__(self, fh) -> None:
        self.fh = fh
        self.buf = bytearray()
        self.memo_len = 0
        self.strings: dict[str, int] = {}
        self.shared: dict[object, int] = {}
        self.fh.write(b"\x80\x04")
        self.written = 2

    def _flush(self, final: bool = False) -> None:
        if len(self.buf) >= FRAME_TARGET or (final and self.buf):
            self.fh.write(b"\x95" + struct.pack("<Q", len(self.buf)) + self.buf)
            self.written += 9 + len(self.buf)
            self.buf = bytearray()

    def op(self, data: bytes) -> None:
        self.buf += data
        if len(self.buf) >= FRAME_TARGET:
            self._flush()

    def memoize(self) -> int:
        self.op(b"\x94")
        self.memo_len += 1
        return self.memo_len - 1

    def get(self, index: int) -> None:
        self.op(b"h" + bytes([index]) if index < 256 else b"j" + struct.pack("<I", index))

    def string(self, text: str) -> None:
        if text in self.strings:
            self.get(self.strings[text])
            return
        raw = text.encode()
        self.op((b"\x8c" + bytes([len(raw)]) if len(raw) < 256 else b"X" + struct.pack("<I", len(raw))) + raw)
        self.strings[text] = self.memoize()

    def integer(self, value: int) -> None:
        if 0 <= value < 256:
            self.op(b"K" + bytes([value]))
        elif 0 <= value < 65536:
            self.op(b"M" + struct.pack("<H", value))
        elif -(2**31) <= value < 2**31:
            self.op(b"J" + struct.pack("<i", value))
        else:
            raw = value.to_bytes((value.bit_length() + 8) // 8, "little", signed=True)
            self.op(b"\x8a" + bytes([len(raw)]) + raw)

    def value(self, v) -> None:
        if isinstance(v, bool):
            self.op(b"\x88" if v else b"\x89")
        elif isinstance(v, int):
            self.integer(v)
        elif isinstance(v, str):
            self.string(v)
        elif isinstance(v, float):
            self.op(b"G" + struct.pack(">d", v))
        elif v is None:
            self.op(b"N")
        elif isinstance(v, tuple) and len(v) == 2:
            self.value(v[0])
            self.value(v[1])
            self.op(b"\x86")
            self.memoize()
        elif isinstance(v, dict):
            self.dict(v)
        elif isinstance(v, list):
            self.list(v)
        else:
            raise TypeError(type(v))

    def dict(self, d: dict) -> None:
        self.op(b"}")
        self.memoize()
        items = list(d.items())
        for start in range(0, len(items), 1000):
            batch = items[start : start + 1000]
            if len(batch) > 1:
                self.op(b"(")
            for k, v in batch:
                self.string(k)
                self.value(v)
            self.op(b"u" if len(batch) > 1 else b"s")

    def list(self, items: list) -> None:
        self.op(b"]")
        self.memoize()
        for start in range(0, len(items), 1000):
            batch = items[start : start + 1000]
            if len(batch) > 1:
                self.op(b"(")
            for v in batch:
                self.value(v)
            self.op(b"e" if len(batch) > 1 else b"a")

    def frame_dict(self, frame: tuple[str, str, int]) -> None:
        """A frame dict, written once and fetched from the memo after (torch shares frame objects)."""
        if frame in self.shared:
            self.get(self.shared[frame])
            return
        self.op(b"}")
        self.shared[frame] = self.memoize()
        self.op(b"(")
        for key, value in (("name", frame[2]), ("filename", frame[0]), ("line", frame[1])):
            self.string(key)
            self.value(value)
        self.op(b"u")

    def frames(self, stack: tuple) -> int:
        self.op(b"]")
        index = self.memoize()
        if len(stack) == 1:
            self.frame_dict(stack[0])
            self.op(b"a")
        elif stack:
            self.op(b"(")
            for frame in stack:
                self.frame_dict(frame)
            self.op(b"e")
        return index

    def finish(self) -> None:
        self.op(b".")
        self._flush(final=True)


TORCH = "/opt/venv/lib/python3.11/site-packages/torch"
USER = "/home/alice/project"


def _stacks() -> dict[str, list[tuple]]:
    """Python stacks as torch records them (innermost first), per kind of allocation."""
    call = [
        (f"{TORCH}/nn/modules/module.py", 1762, "_call_impl"),
        (f"{TORCH}/nn/modules/module.py", 1751, "_wrapped_call_impl"),
    ]
    train = (f"{USER}/train.py", 141, "train_step")
    main = [(f"{USER}/train.py", 212, "main"), (f"{USER}/train.py", 230, "<module>")]
    layers = [
        (f"{USER}/model.py", 40 + 10 * i, name)
        for i, name in enumerate(("attention", "mlp", "norm", "rotary", "block", "embed"))
    ]
    kernels = [
        (f"{TORCH}/nn/modules/linear.py", 125, "forward"),
        (f"{TORCH}/nn/functional.py", 2114, "softmax"),
        (f"{TORCH}/nn/modules/activation.py", 432, "forward"),
        (f"{TORCH}/nn/functional.py", 3494, "cross_entropy"),
    ]
    out: dict[str, list[tuple]] = {
        "activation": [],
        "parameter": [],
        "gradient": [],
        "optimizer": [],
        "optimizer_tmp": [],
        "backward_tmp": [],
    }
    for k in kernels:
        for depth in range(1, 5):
            chain = [k] + call
            for layer in layers[:depth]:
                chain += [(layer[0], layer[1], "forward")] + call
            out["activation"].append(tuple(chain + [(f"{USER}/model.py", 210, "forward")] + call + [train] + main))
    for layer in layers:
        out["parameter"].append(
            tuple(
                [
                    (f"{TORCH}/nn/modules/module.py", 1343, "convert"),
                    (f"{TORCH}/nn/modules/module.py", 942, "_apply"),
                    (f"{TORCH}/nn/modules/module.py", 1355, "to"),
                    (layer[0], layer[1] - 5, "__init__"),
                ]
                + main
            )
        )
    engine = [
        (f"{TORCH}/autograd/graph.py", 824, "_engine_run_backward"),
        (f"{TORCH}/autograd/__init__.py", 353, "backward"),
        (f"{TORCH}/_tensor.py", 648, "backward"),
        (f"{USER}/train.py", 150, "train_step"),
    ] + main
    out["gradient"] = [tuple(engine)]
    out["backward_tmp"] = [tuple([(f"{USER}/model.py", 77, "backward")] + engine)]
    optim = [(f"{TORCH}/optim/optimizer.py", 485, "wrapper"), (f"{USER}/train.py", 152, "train_step")] + main
    out["optimizer"] = [
        tuple([(f"{TORCH}/optim/adamw.py", 178, "_init_group"), (f"{TORCH}/optim/adamw.py", 221, "step")] + optim)
    ]
    out["optimizer_tmp"] = [
        tuple(
            [(f"{TORCH}/optim/adamw.py", 560, "_multi_tensor_adamw"), (f"{TORCH}/optim/adamw.py", 248, "step")] + optim
        )
    ]
    return out


def _round(size: int) -> int:
    """The caching allocator's block rounding: 512 B below 1 MiB, 2 MiB above 10 MiB, else 512 B."""
    if size < MIB:
        return max(512, (size + 511) // 512 * 512)
    if size < 10 * MIB:
        return (size + 511) // 512 * 512
    return (size + 2 * MIB - 1) // (2 * MIB) * (2 * MIB)


class Workload:
    """A training loop on a simple caching allocator: blocks are cut from 2 MiB (small) or 20 MiB+ (large)
    segments and a freed block is re-used by the next request of the same size; segments are never returned."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.stacks = _stacks()
        self.next_addr = 0x7F00_0000_0000
        self.segments: dict[int, dict] = {}  # address → {size, used, blocks: {addr: (size, stack)}}
        self.holes: dict[int, list[int]] = {}  # block size → addresses of freed blocks of that size
        self.current: dict[bool, int | None] = {True: None, False: None}  # small?, → segment being filled
        self.live: dict[int, tuple[int, int]] = {}  # addr → (segment, size)
        self.time_us = 1_700_000_000_000_000
        self.live_segment: dict[int, int] = {}  # block address → its segment

    def alloc(self, size: int, stack: tuple | None, events: list | None) -> int:
        size = _round(size)
        self.time_us += self.rng.randint(1, 40)
        if self.holes.get(size):
            addr = self.holes[size].pop()
            seg = self.live_segment[addr]
        else:
            small = size <= MIB
            seg = self.current[small]
            if seg is None or self.segments[seg]["size"] - self.segments[seg]["used"] < size:
                seg_size = 2 * MIB if small else max(20 * MIB, size)
                seg = self.next_addr
                self.next_addr += seg_size + 2 * MIB
                self.segments[seg] = {"size": seg_size, "used": 0, "blocks": {}}
                self.current[small] = seg
                if events is not None:
                    events.append(("segment_alloc", seg, seg_size, self.time_us, stack))
            addr = seg + self.segments[seg]["used"]
            self.segments[seg]["used"] += size
            self.live_segment[addr] = seg
        self.segments[seg]["blocks"][addr] = (size, stack)
        self.live[addr] = (seg, size)
        if events is not None:
            events.append(("alloc", addr, size, self.time_us, stack))
        return addr

    def free(self, addr: int, events: list | None) -> None:
        seg, size = self.live.pop(addr)
        stack = self.segments[seg]["blocks"].pop(addr)[1]
        self.holes.setdefault(size, []).append(addr)
        self.time_us += self.rng.randint(1, 20)
        if events is not None:
            events.append(("free_requested", addr, size, self.time_us, stack))
            events.append(("free_completed", addr, size, self.time_us, stack))

    def pick(self, kind: str) -> tuple:
        return self.rng.choice(self.stacks[kind])


def simulate(target_events: int, seed: int, emit) -> Workload:
    """Run the workload; ``emit(event)`` receives every recorded event. Before recording: the model's parameters."""
    w = Workload(seed)
    params = [w.alloc(w.rng.choice((4, 16, 64)) * MIB, w.pick("parameter"), None) for _ in range(24)]
    state: list[int] = []
    grads: list[int] = []
    count = 0
    step = 0
    while count < target_events:
        batch: list = []
        acts = [
            w.alloc(w.rng.choice((1, 2, 8, 32)) * MIB + w.rng.randint(0, 4096), w.pick("activation"), batch)
            for _ in range(w.rng.randint(40, 120))
        ]
        for _ in range(w.rng.randint(20, 60)):
            w.free(w.alloc(w.rng.randint(512, 4 * MIB), w.pick("activation"), batch), batch)
        for a in reversed(acts):
            tmp = w.alloc(w.rng.randint(4096, 8 * MIB), w.pick("backward_tmp"), batch)
            w.free(a, batch)
            w.free(tmp, batch)
        if not grads:
            grads = [w.alloc(w.live[p][1], w.pick("gradient"), batch) for p in params]
        if not state:
            state = [w.alloc(w.live[p][1], w.pick("optimizer"), batch) for p in params for _ in range(2)]
        tmps = [w.alloc(w.live[p][1], w.pick("optimizer_tmp"), batch) for p in params[:4]]
        for t in tmps:
            w.free(t, batch)
        step += 1
        for event in batch:
            emit(event)
        count += len(batch)
    return w


def write_snapshot(path: Path, target_mib: float, seed: int = 0) -> dict:
    """Write a synthetic snapshot pickle of about ``target_mib`` MiB; returns what was written (counts)."""
    per_event = 118  # bytes per event in this encoding, measured; only used to pick the event count
    target_events = max(100, int(target_mib * MIB / per_event))
    final = simulate(target_events, seed, lambda e: None)  # pass 1: the state at the end (segments come first)
    with open(path, "wb") as fh:
        enc = Encoder(fh)
        enc.op(b"}")
        enc.memoize()
        enc.op(b"(")
        enc.string("segments")
        enc.op(b"]")
        enc.memoize()
        segments = sorted(final.segments.items())
        for start in range(0, len(segments), 1000):
            chunk = segments[start : start + 1000]
            enc.op(b"(")
            for addr, info in chunk:
                blocks, offset = [], 0
                for baddr, (bsize, stack) in sorted(info["blocks"].items()):
                    if baddr - addr > offset:
                        blocks.append((addr + offset, baddr - addr - offset, None))
                    blocks.append((baddr, bsize, stack))
                    offset = baddr - addr + bsize
                if offset < info["size"]:
                    blocks.append((addr + offset, info["size"] - offset, None))
                active = sum(b[1] for b in blocks if b[2] is not None)
                enc.op(b"}")
                enc.memoize()
                enc.op(b"(")
                for key, value in (
                    ("device", 0),
                    ("address", addr),
                    ("total_size", info["size"]),
                    ("allocated_size", active),
                    ("active_size", active),
                    ("requested_size", active),
                    ("stream", 0),
                    ("segment_type", "small" if info["size"] == 2 * MIB else "large"),
                    ("segment_pool_id", (0, 0)),
                    ("is_expandable", False),
                ):
                    enc.string(key)
                    enc.value(value)
                enc.string("frames")
                enc.frames(())
                enc.string("blocks")
                enc.op(b"]")
                enc.memoize()
                if len(blocks) > 1:
                    enc.op(b"(")
                for baddr, bsize, stack in blocks:
                    enc.op(b"}")
                    enc.memoize()
                    enc.op(b"(")
                    for key, value in (
                        ("address", baddr),
                        ("size", bsize),
                        ("requested_size", bsize),
                        ("state", "active_allocated" if stack else "inactive"),
                    ):
                        enc.string(key)
                        enc.value(value)
                    enc.string("frames")
                    enc.frames(stack or ())
                    enc.op(b"u")
                enc.op(b"e" if len(blocks) > 1 else b"a")
                enc.op(b"u")
            enc.op(b"e" if len(chunk) > 1 else b"a")
        enc.string("device_traces")
        enc.op(b"]")
        enc.memoize()
        enc.op(b"]")
        enc.memoize()
        counts: dict[str, int] = {}
        pending: list = []
        last_free_frames: list[int | None] = [None]

        def write_entry(action, addr, size, t, stack) -> None:
            enc.op(b"}")
            enc.memoize()
            enc.op(b"(")
            for key, value in (
                ("action", action),
                ("addr", addr),
                ("size", size),
                ("stream", 0),
                ("time_us", t),
                ("compile_context", "N/A"),
                ("user_metadata", ""),
            ):
                enc.string(key)
                enc.value(value)
            enc.string("frames")
            if action == "free_completed" and last_free_frames[0] is not None:
                enc.get(last_free_frames[0])  # torch shares the free_requested's frames list
            else:
                index = enc.frames(stack or ())
                last_free_frames[0] = index if action == "free_requested" else None
            enc.op(b"u")

        def write_batch() -> None:
            if len(pending) > 1:
                enc.op(b"(")
            for event in pending:
                write_entry(*event)
            enc.op(b"e" if len(pending) > 1 else b"a")
            pending.clear()

        def emit(event) -> None:
            counts[event[0]] = counts.get(event[0], 0) + 1
            pending.append(event)
            if len(pending) == 1000:
                write_batch()

        simulate(target_events, seed, emit)
        if pending:
            write_batch()
        enc.op(b"a")  # device_traces = [that list]
        enc.string("allocator_settings")
        enc.dict({"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1, "expandable_segments": False})
        enc.string("external_annotations")
        enc.list([])
        enc.op(b"u")
        enc.finish()
    return {"events": sum(counts.values()), "actions": counts, "bytes": path.stat().st_size}


_LAB = """
import json, os, resource, sys, tempfile, time
sys.path.insert(0, sys.argv[2])
os.environ["GPULAB_DATA_DIR"] = tempfile.mkdtemp(prefix="gpulab-bench-")
from core.experiments.memory_snapshot import overview_rows
from core.workload.snapshot import detail
from core.workload.snapshot.reader import read_snapshot
from core.workload.snapshot.analysis import analyse
t0 = time.perf_counter()
snap = read_snapshot(sys.argv[1])
t_read = time.perf_counter() - t0
analysis = analyse(snap)
summary = analysis.summary()
rows = overview_rows(analysis)
detail.save(snap, analysis.device)
took = time.perf_counter() - t0
print(json.dumps({"seconds": took, "read_seconds": t_read, "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                  "events": summary["trace_events"], "peak_allocated_bytes": summary["peak_allocated_bytes"]}))
"""
_FLOOR = """
import json, resource, sys, time
from collections import deque
sys.path.insert(0, sys.argv[2])
from core import pickle_stream
from core.workload.snapshot import reader as snapshot
def only_empty(self, items, sites, *, loading=False):
    deque(map(dict.clear, items), maxlen=0)
class NoGuard:
    def __init__(self, *args): pass
    def clear(self, data, at): pass
    def close(self): pass
def replace(owner, name, value):  # a name the lab no longer has fails here, not as a silently wrong floor
    getattr(owner, name)
    setattr(owner, name, value)
replace(snapshot._Columns, "add", only_empty)
if sys.argv[3] == "unguarded":
    replace(pickle_stream, "_GuardProcess", NoGuard)
    replace(pickle_stream, "_InlineGuard", NoGuard)
t0 = time.perf_counter()
snapshot.read_snapshot(sys.argv[1])
took = time.perf_counter() - t0
print(json.dumps({"seconds": took, "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""
_REFERENCE = """
import json, pickle, resource, sys, time
t0 = time.perf_counter()
with open(sys.argv[1], "rb") as fh:
    data = pickle.load(fh)
took = time.perf_counter() - t0
print(json.dumps({"seconds": took, "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                  "events": sum(len(t) for t in data["device_traces"])}))
"""


def measure(script: str, path: Path, *extra: str) -> dict:
    out = subprocess.run([sys.executable, "-c", script, str(path), str(ROOT), *extra], capture_output=True, text=True)
    if out.returncode != 0:
        return {"error": out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"exit {out.returncode}"}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    p.add_argument("--mib", type=float, default=1024, help="size of the synthetic snapshot [default: 1024]")
    p.add_argument("--file", type=Path, help="where to write it (kept and reused if it exists)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--no-reference", action="store_true", help="skip the plain pickle.load (it needs ~6x the file in RAM)"
    )
    args = p.parse_args(argv)
    path = args.file or Path(f"/tmp/gpulab-bench-snapshot-{args.mib:g}MiB-{args.seed}.pickle")
    if not path.exists():
        t0 = time.perf_counter()
        info = write_snapshot(path, args.mib, args.seed)
        print(
            f"wrote {path} ({info['bytes'] / MIB:,.0f} MiB, {info['events']:,} events: {info['actions']}) "
            f"in {time.perf_counter() - t0:.0f} s",
            file=sys.stderr,
        )
    size = path.stat().st_size
    lab = measure(_LAB, path)
    print(f"file: {size / MIB:,.0f} MiB ({size:,} bytes)")
    if "error" in lab:
        print(f"lab import failed: {lab['error']}")
        return 1
    print(
        f"lab import:        {lab['seconds']:7.1f} s   peak RSS {lab['peak_rss_bytes'] / 2**30:5.2f} GiB   "
        f"(reading {lab['read_seconds']:.1f} s; then replay, summary, points, full trace saved) — "
        f"{lab['events']:,} events, peak allocated {lab['peak_allocated_bytes'] / 2**30:.2f} GiB"
    )
    after = lab["seconds"] - lab["read_seconds"]
    for guard in ("guarded", "unguarded"):
        floor = measure(_FLOOR, path, guard)
        if "error" in floor:
            print(f"floor ({guard}) failed: {floor['error']}")
            continue
        print(
            f"floor, {guard + ':':<11}{floor['seconds']:7.1f} s   peak RSS {floor['peak_rss_bytes'] / 2**30:5.2f} GiB   "
            f"(the streaming read, each batch of events only emptied; with the lab's {after:.1f} s after "
            f"reading: {floor['seconds'] + after:.1f} s)"
        )
    if not args.no_reference:
        ref = measure(_REFERENCE, path)
        if "error" in ref:
            print(f"plain pickle.load failed: {ref['error']}")
        else:
            print(
                f"plain pickle.load: {ref['seconds']:7.1f} s   peak RSS {ref['peak_rss_bytes'] / 2**30:5.2f} GiB   "
                f"{ref['events']:,} events (no analysis)"
            )
            print(
                f"ratio lab / plain: time {lab['seconds'] / ref['seconds']:.2f}x, "
                f"peak RSS {lab['peak_rss_bytes'] / ref['peak_rss_bytes']:.2f}x"
            )
    within = lab["seconds"] < 60 and lab["peak_rss_bytes"] < 4 * 2**30
    print(
        f"target for a 1 GB file: < 60 s and < 4 GiB peak RSS — {'met' if within else 'NOT met'} "
        f"for this {size / 1e9:.2f} GB file"
    )
    return 0 if within else 1


if __name__ == "__main__":
    sys.exit(main())

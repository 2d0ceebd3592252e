"""Hostile workload files (issue 23): each is a small file written here, imported by the CLI in a
subprocess whose process tree (the CLI and its worker) is sampled for RSS and killed past the bounds.
Each must be refused (exit 2) or read with its quirks reported, within 30 s and 1 GiB, storing nothing
when refused."""

from __future__ import annotations

import gzip
import json
import os
import pickle
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from core.errors import InputRefused
from core.intake import check_depth, loads_pickle
from core.limits import LIMITS
from tests.conftest import ROOT

WALL_S = 30.0  # of CPU time across the process tree: what a quadratic file costs, whatever else the box runs
WALL_BACKSTOP = 8  # × WALL_S of wall time: a process that sleeps or waits forever is stopped too
RSS_BYTES = 1 << 30


@dataclass
class Outcome:
    code: int
    stdout: str
    stderr: str
    wall_s: float
    peak_rss: int
    pid: int  # the CLI's, and its session's id: what it started and left behind is in that session


def tree_rss(proc: psutil.Process) -> int:
    total = 0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            pass
    return total


def tree_cpu_s(proc: psutil.Process, seen: dict[int, float]) -> float:
    """CPU seconds of the tree so far; ``seen`` keeps each process's last reading, so one that ended still counts."""
    for p in [proc, *proc.children(recursive=True)]:
        try:
            times = p.cpu_times()
            seen[p.pid] = times.user + times.system
        except psutil.Error:
            pass
    return sum(seen.values())


def bounded_cli(*args: str, wall_s: float = WALL_S, rss_bytes: int = RSS_BYTES) -> Outcome:
    """``python -m core ARGS``; fails the test (after killing the tree) past ``wall_s`` seconds of CPU time (a
    loaded box slows the wall clock, not the work), ``WALL_BACKSTOP`` times that of wall time, or ``rss_bytes``."""
    start = time.monotonic()
    out_file, err_file = tempfile.TemporaryFile(), tempfile.TemporaryFile()  # a pipe could fill and block it
    proc = subprocess.Popen(
        [sys.executable, "-m", "core", *args], cwd=ROOT, stdout=out_file, stderr=err_file, start_new_session=True
    )
    ps = psutil.Process(proc.pid)
    peak = 0
    over = ""
    cpu: dict[int, float] = {}
    while proc.poll() is None:
        peak = max(peak, tree_rss(ps))
        if peak > rss_bytes:
            over = f"tree RSS {peak / 2**20:,.0f} MiB > {rss_bytes / 2**20:,.0f} MiB"
        elif tree_cpu_s(ps, cpu) > wall_s:
            over = f"more than {wall_s:.0f} s of CPU time"
        elif time.monotonic() - start > WALL_BACKSTOP * wall_s:
            over = f"still running after {WALL_BACKSTOP * wall_s:.0f} s"
        if over:
            os.killpg(proc.pid, 9)
            proc.wait()
            pytest.fail(f"{' '.join(args)}: {over}")
        time.sleep(0.02)
    wall = time.monotonic() - start
    out, err = (f.seek(0) == 0 and f.read().decode(errors="replace") for f in (out_file, err_file))
    return Outcome(proc.returncode, str(out), str(err), wall, peak, proc.pid)


def files_under(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")} if folder.exists() else set()


def refused(path: Path, data_dir: Path, reason: str, kind: str = "snapshot") -> Outcome:
    before = files_under(data_dir)
    out = bounded_cli(kind, str(path))
    assert out.code == 2, (out.code, out.stderr[-2000:])
    assert "Traceback" not in out.stderr, out.stderr[-2000:]
    assert reason in out.stderr, out.stderr[-2000:]
    after = files_under(data_dir)
    assert not {p for p in after - before if "snapshots" in p}, after - before  # nothing kept beside the store
    if (data_dir / "runs.sqlite").exists():
        from core.store import RunStore

        assert RunStore().count() == 0
    return out


# -- item 4: memory amplification, refused before the unpickler pays for it --------------------------------


def test_a_memo_index_of_2_28_is_refused(tmp_path, data_dir):
    path = tmp_path / "memo.pickle"
    path.write_bytes(b"\x80\x04N" + b"r" + (1 << 28).to_bytes(4, "little") + b".")  # LONG_BINPUT 2^28
    refused(path, data_dir, f"the limit is {LIMITS.pickle_memo_index:,} slots")


@pytest.mark.parametrize("opcode", [b"\x8d", b"\x8e", b"\x96"], ids=["BINUNICODE8", "BINBYTES8", "BYTEARRAY8"])
def test_a_huge_declared_length_is_refused(tmp_path, data_dir, opcode):
    path = tmp_path / "long.pickle"
    path.write_bytes(b"\x80\x05" + opcode + (1 << 40).to_bytes(8, "little") + b".")
    refused(path, data_dir, "over the 256 MiB limit on one object")


def test_a_declared_length_under_the_limit_but_past_the_end_is_truncated(tmp_path, data_dir):
    path = tmp_path / "short.pickle"
    path.write_bytes(b"\x80\x05\x96" + (200 << 20).to_bytes(8, "little") + b"abc.")
    refused(path, data_dir, "truncated")


def test_a_gzip_of_dup_opcodes_is_refused(tmp_path, data_dir):
    path = tmp_path / "dup.pickle.gz"
    with gzip.open(path, "wb", compresslevel=6) as fh:
        fh.write(b"\x80\x04N")
        block = b"2" * (1 << 20)
        for _ in range(440):
            fh.write(block)
        fh.write(b".")
    assert path.stat().st_size < 1 << 20
    refused(path, data_dir, f"more than {LIMITS.pickle_pending_values:,} values")


def test_the_guard_passes_every_protocol_and_a_large_snapshot(tmp_path):
    from core.workload.snapshot.reader import read_snapshot
    from tests.core.workload import snapshots

    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        path = tmp_path / f"p{protocol}.pickle"
        path.write_bytes(pickle.dumps(snapshots.big_snapshot(50), protocol=protocol))
        assert len(read_snapshot(path).traces[1]) > 100


# -- item 3: shared objects ---------------------------------------------------------------------------------


@pytest.mark.timeout(120)  # a walk of every path (2^40) would never end: the limit fails it, not a clock
def test_an_84_byte_pickle_of_shared_tuples_is_checked_in_linear_time(tmp_path, data_dir):
    raw = b"\x80\x04]" + b"2\x86" * 40 + b"."  # 2^40 paths through 40 shared tuples
    assert len(raw) == 84
    check_depth(loads_pickle(raw))  # 41 levels: within the cap, each tuple visited once
    with pytest.raises(InputRefused, match="nests deeper than 64"):
        loads_pickle(b"\x80\x04]" + b"2\x86" * 70 + b".")
    path = tmp_path / "shared.pickle"
    path.write_bytes(raw)
    refused(path, data_dir, "not a memory snapshot")


# 2,000 events × one shared 100,000-frame stack: read once per event, that is 2·10⁸ frames (many minutes); read
# once, a second or two. The limit fails the first, not a clock (a loaded CI box took 12 s for the second).
@pytest.mark.timeout(180)
def test_events_sharing_a_huge_stack_are_cheap(tmp_path):
    from core.workload.snapshot.reader import read_snapshot

    stack = [{"filename": f"/f{i}.py", "line": i, "name": "fn"} for i in range(100_000)]
    events = [{"action": "alloc", "addr": 4096 * i, "size": 512, "time_us": i, "frames": stack} for i in range(2000)]
    path = tmp_path / "stack.pickle"
    path.write_bytes(pickle.dumps({"segments": [], "device_traces": [events]}))
    snapshot = read_snapshot(path)
    (site,) = snapshot.sites
    assert len(site) == LIMITS.frames_per_stack + 1
    assert "99,744 more frames" in site[-1][2]


def test_a_stack_of_100k_frames_and_long_names_makes_a_small_result(tmp_path, data_dir):
    name = "n" * (1 << 20)
    stack = [{"filename": name, "line": i, "name": name} for i in range(100_000)]
    stack = [dict(f) for f in stack[:3]] + stack[3:]
    events = [{"action": "alloc", "addr": 4096, "size": 512, "time_us": 1, "frames": stack}]
    path = tmp_path / "long.pickle"
    path.write_bytes(pickle.dumps({"segments": [], "device_traces": [events]}))
    assert path.stat().st_size < 4 << 20
    out = bounded_cli("snapshot", str(path), "--no-save", "--json")
    assert out.code == 0, out.stderr[-2000:]
    assert len(out.stdout) < 4 << 20
    meta = json.loads(out.stdout)
    assert "(1,048,576 chars)" in json.dumps(meta["peak_stack"])


# -- item 2: the worker's output, read in linear time with a cap per line ----------------------------------


def _fake_worker(code: str):
    """A WorkerProcess whose child is ``python -c code`` (its stdout is what the parent reads)."""
    import selectors

    from core.workerprocess import WorkerProcess

    worker = WorkerProcess.__new__(WorkerProcess)
    worker.proc = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True
    )
    assert worker.proc.stdin is not None and worker.proc.stdout is not None
    worker._stdin, worker._stdout = worker.proc.stdin, worker.proc.stdout
    worker._stderr = tempfile.TemporaryFile()
    worker._buffer, worker._searched = bytearray(), 0
    worker._selector = selectors.DefaultSelector()
    worker._selector.register(worker._stdout, selectors.EVENT_READ)
    return worker


class _CountedBuffer(bytearray):
    """The reader's buffer, counting the bytes its newline searches cover."""

    searched = 0

    def find(self, sub, start=0, *args):  # noqa: ANN001, ANN002 - bytearray.find's own signature
        self.searched += len(self) - start
        return super().find(sub, start, *args)


def test_a_long_result_line_is_read_in_linear_time():
    from core.workerprocess import Noise

    line_mib = 60
    worker = _fake_worker(
        f"import sys, time; w = sys.stdout.buffer\n"
        f"for _ in range({line_mib * 16}): w.write(b'x' * 65536); w.flush()\n"
        "w.write(b'\\n'); w.flush(); time.sleep(30)"
    )
    worker._buffer = buffer = _CountedBuffer()
    try:
        start = time.monotonic()
        event = None
        while event is None and time.monotonic() - start < 120:
            event = worker.read_event(1.0)
        assert isinstance(event, Noise) and len(event.text) == line_mib << 20
        # linear: each byte searched for the newline once (a re-search from the start would be ~500× the line)
        assert buffer.searched <= (line_mib << 20) + 1, f"{buffer.searched:,} bytes searched"
    finally:
        worker.kill()


def test_a_line_over_the_cap_ends_the_job_and_the_worker(monkeypatch):
    from core import workerprocess
    from core.limits import Limits
    from core.workerprocess import WorkerLineTooLong

    monkeypatch.setattr(workerprocess, "LIMITS", Limits(worker_line_bytes=1 << 20))
    worker = _fake_worker(
        "import sys, time; sys.stdout.buffer.write(b'x' * (4 << 20)); sys.stdout.flush(); time.sleep(30)"
    )
    start = time.monotonic()
    with pytest.raises(WorkerLineTooLong, match="more than 1 MiB"):
        while time.monotonic() - start < 20:
            worker.read_event(1.0)
    assert not worker.alive()


# -- items 6 and 10: numbers out of range, malformed events: counted and reported, never a traceback ---------


def _snapshot_file(tmp_path: Path, events: list, segments: list | None = None) -> Path:
    path = tmp_path / "odd.pickle"
    path.write_bytes(pickle.dumps({"segments": segments or [], "device_traces": [events]}))
    return path


def _imported(path: Path) -> dict:
    out = bounded_cli("snapshot", str(path), "--no-save", "--json")
    assert out.code == 0, out.stderr[-2000:]
    assert "Traceback" not in out.stderr
    return json.loads(out.stdout)


def test_huge_negative_and_string_numbers_are_counted_not_crashing(tmp_path):
    ok = {"action": "alloc", "addr": 4096, "size": 512, "time_us": 10}
    events = [
        ok,
        {**ok, "addr": 2**64},
        {**ok, "size": 2**63},
        {**ok, "size": -512},
        {**ok, "addr": -1},
        {**ok, "time_us": "12:00:01"},
        {**ok, "time_us": 2**70},
        "not an event",
    ]
    segments = [
        {"device": 2**63, "address": 0, "total_size": 1 << 20, "blocks": []},
        {"device": 0, "address": 2**64, "total_size": 1 << 20, "blocks": []},
        {
            "device": 0,
            "address": 0,
            "total_size": 1 << 20,
            "blocks": [{"size": -(1 << 40), "state": "active_allocated"}],
        },
    ]
    meta = _imported(_snapshot_file(tmp_path, events, segments))
    assert meta["malformed_events"] == 7
    quirks = meta["quirks"]
    assert quirks["an event's time_us is a str, not an integer"] == 1
    assert quirks["an event is a str, not a dict"] == 1
    assert sum(v for k, v in quirks.items() if k.startswith("a segment's")) == 2
    assert sum(v for k, v in quirks.items() if k.startswith("a block's")) == 1
    assert meta["peak_allocated_bytes"] == 512
    assert meta["peak_reserved_bytes"] >= 0


def test_sums_past_int64_are_refused_not_wrapped(tmp_path, data_dir):
    events = [{"action": "alloc", "addr": 4096 * i, "size": 2**50 - 1, "time_us": i} for i in range(5000)]
    refused(_snapshot_file(tmp_path, events), data_dir, "add up to")


def test_reversed_times_give_no_negative_duration_and_are_reported(tmp_path):
    events = [
        {"action": "alloc", "addr": 4096, "size": 512, "time_us": 3_000_000},
        {"action": "alloc", "addr": 8192, "size": 512, "time_us": 1_000_000},
    ]
    out = bounded_cli("snapshot", str(_snapshot_file(tmp_path, events)), "--no-save")
    assert out.code == 0, out.stderr[-2000:]
    assert "quirk: 1 × an event's time_us is before the event before it" in out.stdout
    meta = _imported(_snapshot_file(tmp_path, events))
    assert meta["duration_ms"] >= 0 and meta["peak_time_ms"] >= 0


def test_a_trace_with_an_infinite_timestamp_is_counted(tmp_path):
    event = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "dur": 5, "args": {"device": 0, "stream": 7}}
    text = json.dumps({"traceEvents": [{**event, "ts": 100}, {**event, "ts": 200}]})
    path = tmp_path / "inf.json"
    path.write_text(text.replace('"ts": 200', '"ts": 1e400'))
    out = bounded_cli("trace", str(path), "--no-save", "--json")
    assert "Traceback" not in out.stderr
    if out.code == 0:
        meta = json.loads(out.stdout)
        assert sum(meta["malformed_events"].values()) == 1
        assert "nan" not in out.stdout.lower()
    else:
        assert out.code == 2, out.stderr[-2000:]


# -- item 11: --no-save writes nothing under the data dir ---------------------------------------------------


def test_no_save_writes_nothing_under_the_data_dir(tmp_path, data_dir):
    from tests.core.workload import snapshots

    path = tmp_path / "s.pickle"
    path.write_bytes(pickle.dumps(snapshots.big_snapshot(20)))
    before = files_under(data_dir)
    out = bounded_cli("snapshot", str(path), "--no-save")
    assert out.code == 0, out.stderr[-2000:]
    assert files_under(data_dir) == before
    out = bounded_cli("snapshot", str(path))
    assert out.code == 0, out.stderr[-2000:]
    assert any(p.startswith("snapshots/") for p in files_under(data_dir) - before)  # a save does keep it


def test_50k_steps_of_1m_kernels_cost_the_kernels_not_steps_times_kernels(tmp_path, data_dir):
    """50,000 ProfilerSteps over 1,000,000 kernels (3 MB .gz): each step's kernels are found by one sort, not
    a pass over every kernel per step (before: 121 s)."""
    path = tmp_path / "steps.json.gz"
    steps, per = 50_000, 20
    with gzip.open(path, "wt", compresslevel=6) as f:
        f.write('{"traceEvents": [')
        for s in range(steps):
            t0 = s * 1000.0
            f.write(("," if s else "") + json.dumps({"ph": "X", "cat": "gpu_user_annotation", "name": f"ProfilerStep#{s}",
                                                     "pid": 0, "tid": 7, "ts": t0, "dur": 1000.0}))  # fmt: skip
            f.write("".join(
                f',{{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":{t0 + 10 * k + 1},"dur":5,'
                f'"args":{{"device":0,"stream":7}}}}'
                for k in range(per)
            ))  # fmt: skip
        f.write("]}")
    out = bounded_cli("trace", str(path), "--no-save", wall_s=60)  # ~23 s of CPU here; the quadratic form: 121 s
    assert out.code == 0, out.stderr[-2000:]
    # every step holds 20 kernels of 5 µs: 100 µs of kernels in a 1,000 µs step
    assert "steps (GPU-side ProfilerStep spans" in out.stdout
    assert out.stdout.count("kernels 0.100 ms") == steps

"""Real small snapshots, traces and runs files, mutated at random: cut short, bytes flipped or overwritten, a
number swapped for a huge one, a value nested thousands deep, a pickle's memo slots fetched again, overwritten or
renumbered and a MARK region repeated, the result gzipped or not. Whatever the mutation, an import either reads
the file within the limits of :class:`core.limits.Limits` or refuses it with :class:`InputRefused`: any other
exception is a traceback a user would see. Most examples call the readers (and the analysis an import runs
next) in this process, bounded in CPU time and peak RSS; a few go through the CLI in a CPU- and RSS-bounded
process tree. The inputs stay under ~1 MiB, so the work each example may do is bounded by the file, not by a
clock; the examples are drawn the same way on every run, so a failure here is one anybody can reproduce."""

from __future__ import annotations

import bisect
import gzip
import json
import math
import pickletools
import re
import signal
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import psutil
import pytest
from hypothesis import HealthCheck, currently_in_test_context, event, given, settings
from hypothesis import strategies as st

from core.errors import InputRefused
from core.intake import loads_pickle
from core.jsonable import json_ready
from core.limits import LIMITS
from tests.conftest import ROOT
from tests.core.workload.test_hostile_files import RSS_BYTES, bounded_cli

pytest.importorskip("msgspec")

DATA = ROOT / "tests" / "data"
TRACES = ("kineto_v100_trace.json", "hta_a100_backward_excerpt.json", "hta_mi250_minitoy_rocm.json.gz")
SNAPSHOTS = ("cs336_mem_snapshot.pickle.gz", "cs336_memory_forward_fp32_128.pickle.gz")
RUNS = tuple(sorted(p.name for p in (DATA / "runs").glob("*.json")))
HUGE_NUMBERS = (
    b"1e999999",
    b"-1e99999999999",
    b"1" + b"0" * 5000,
    b"-0." + b"5" * 5000,
    b"18446744073709551616",
    b"-9223372036854775809",
    b"1e-999999",
)
DEPTHS = (3, 63, 65, 1000, 100_000)  # either side of the 64-level cap, and far past it
CPU_S = 60  # a runaway example is stopped (and fails) after this much CPU time: a hang, not a timing
EXAMPLES = settings(
    max_examples=80,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)


# -- the real files, and their pickles as opcodes ------------------------------------------------------------


@cache
def content(folder: str, name: str) -> bytes:
    raw = (DATA / folder / name).read_bytes()
    return gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw


@cache
def snapshot_json() -> bytes:
    """The smallest real snapshot as the JSON the reader also takes (tuples become lists)."""
    return json.dumps(loads_pickle(content("workload/snapshots", SNAPSHOTS[0]))).encode()


@dataclass(frozen=True)
class Op:
    name: str
    start: int
    end: int
    slots: int  # memo slots filled before it (MEMOIZE numbers them in order; PUTs name theirs)


@cache
def opcodes(name: str) -> tuple[bytes, tuple[Op, ...], tuple[int, ...]]:
    """A real snapshot's pickle without its FRAME opcodes (framing is an optimisation; opcodes inserted into a
    frame would only be refused as a broken frame), its opcodes, and the memo slots that hold a dict or a list
    (fetched again, they make the shared and cyclic structures a file can hold)."""
    raw = content("workload/snapshots", name)
    found = list(pickletools.genops(raw))
    ends = [pos for _, _, pos in found[1:]] + [len(raw)]
    kept = bytearray()
    ops: list[Op] = []
    containers = []
    slots = 0
    for (op, arg, pos), end in zip(found, ends):
        if op.name == "FRAME":
            continue
        if op.name == "MEMOIZE" and ops[-1].name in ("EMPTY_DICT", "EMPTY_LIST"):
            containers.append(slots)
        ops.append(Op(op.name, len(kept), len(kept) + end - pos, slots))
        kept += raw[pos:end]
        if op.name == "MEMOIZE":
            slots += 1
        elif op.name.endswith("PUT"):
            slots = max(slots, arg + 1)
    return bytes(kept), tuple(ops), tuple(containers)


# -- mutations -----------------------------------------------------------------------------------------------

_NUMBER = re.compile(rb"(?<=[:,\[])\s*(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)(?=\s*[,\]}])")
_PUSHES_ONE = {"BININT", "BININT1", "BININT2", "LONG1", "BINFLOAT", "NONE", "NEWTRUE", "NEWFALSE", "BINGET",
               "LONG_BINGET", "SHORT_BINUNICODE", "BINUNICODE", "EMPTY_LIST", "EMPTY_DICT", "EMPTY_TUPLE"}  # fmt: skip
_NUMBERS = {"BININT", "BININT1", "BININT2", "LONG1", "LONG4", "BINFLOAT"}
_PUNCTUATION = b'{}[],:"\\0-9eE.+ '
_POPS_MARK = {"APPENDS", "SETITEMS", "TUPLE", "LIST", "DICT", "ADDITEMS", "FROZENSET", "POP_MARK"}


def get(slot: int) -> bytes:
    return b"h" + bytes([slot]) if slot < 256 else b"j" + slot.to_bytes(4, "little")


def put(slot: int) -> bytes:
    return b"q" + bytes([slot]) if slot < 256 else b"r" + slot.to_bytes(4, "little")


def huge_pickled_number(kind: int) -> bytes:
    """An integer of 2^64 or of 2,100 bytes (~5,000 digits), or a float that is no number (infinity, NaN)."""
    if kind == 0:
        return b"\x8a\x09" + (1 << 64).to_bytes(9, "little")
    if kind == 1:
        return b"\x8b" + (2100).to_bytes(4, "little") + b"\xff" * 2099 + b"\x7f"
    return b"G" + [b"\x7f\xf0\x00\x00\x00\x00\x00\x00", b"\xff\xf8\x00\x00\x00\x00\x00\x00", b"\xff" * 8][kind % 3]


def closing(ops: tuple[Op, ...], mark: int) -> int | None:
    """The index of the opcode that pops to the MARK at ``mark``, if any."""
    depth = 0
    for i in range(mark, len(ops)):
        if ops[i].name == "MARK":
            depth += 1
        elif ops[i].name in _POPS_MARK:
            depth -= 1
            if depth == 0:
                return i
    return None


def mutate_pickle(data, name: str) -> bytes:
    """One to three structural mutations of a real snapshot's pickle, applied from its end so positions hold."""
    raw, ops, containers = opcodes(name)
    edits: dict[int, tuple[int, int, bytes]] = {}  # by opcode: (start, end, replacement)
    for _ in range(data.draw(st.integers(1, 3), label="edits")):
        i = data.draw(st.integers(1, len(ops) - 2), label="at opcode")  # after PROTO, before STOP
        op = ops[i]
        kind = data.draw(st.sampled_from(["get", "retarget", "put", "memoize", "dup", "number", "nest"]), label="how")
        held = containers[: bisect.bisect_left(containers, op.slots)]  # the dicts and lists made before it
        any_slot = st.integers(0, max(op.slots - 1, 0))
        slot = data.draw(st.sampled_from(held) | any_slot if held else any_slot, label="slot")
        if kind == "get" and op.slots:
            edits[i] = (op.start, op.start, get(slot))
        elif kind == "retarget" and op.name in ("BINGET", "LONG_BINGET") and op.slots:
            edits[i] = (op.start, op.end, get(slot))
        elif kind == "put" and op.slots:
            edits[i] = (op.end, op.end, put(slot))
        elif kind == "memoize":
            edits[i] = (op.start, op.start, b"\x94")  # every later MEMOIZE fills the slot after its own
        elif kind == "dup" and op.name == "MARK" and (close := closing(ops, i)) is not None:
            edits[i] = (ops[close].end, ops[close].end, raw[op.start : ops[close].end])
        elif kind == "number" and op.name in _NUMBERS:
            edits[i] = (op.start, op.end, huge_pickled_number(data.draw(st.integers(0, 4), label="number")))
        elif kind == "nest" and op.name in _PUSHES_ONE:
            depth = data.draw(st.sampled_from(DEPTHS), label="depth")
            if data.draw(st.booleans(), label="as tuples"):
                edits[i] = (op.end, op.end, b"\x85" * depth)  # TUPLE1, depth times
            else:
                edits[i] = (op.start, op.end, b"(" * depth + raw[op.start : op.end] + b"l" * depth)
    out = bytearray(raw)
    for start, end, replacement in sorted(edits.values(), reverse=True):
        out[start:end] = replacement
    return bytes(out)


def mutate_json(data, raw: bytes) -> bytes:
    """Numbers swapped for huge ones, values (or the whole file) nested deep."""
    numbers = [m.span(1) for m in _NUMBER.finditer(raw)]
    out = raw
    for _ in range(data.draw(st.integers(0, 2), label="edits")):
        depth = data.draw(st.sampled_from(DEPTHS), label="depth")
        if not numbers or data.draw(st.booleans(), label="whole file"):
            out = b"[" * depth + out + b"]" * depth
            numbers = [(start + depth, end + depth) for start, end in numbers]
            continue
        start, end = numbers.pop(data.draw(st.integers(0, len(numbers) - 1), label="number"))
        if data.draw(st.booleans(), label="huge"):
            value = data.draw(st.sampled_from(HUGE_NUMBERS), label="huge number")
        else:
            value = b"[" * depth + out[start:end] + b"]" * depth
        out = out[:start] + value + out[end:]
        moved = len(value) - (end - start)
        numbers = [(s + moved, e + moved) if s > start else (s, e) for s, e in numbers]
    return out


def mutate_bytes(data, raw: bytes) -> bytes:
    """Left whole, bytes flipped, set to JSON's own punctuation or overwritten, or cut short; gzipped or not (the
    gzip maybe cut short too)."""
    out = bytearray(raw)
    how = data.draw(st.sampled_from(["whole", "flip", "punctuation", "overwrite", "truncate"]), label="bytes")
    if how in ("flip", "punctuation"):
        for _ in range(data.draw(st.integers(1, 4), label="bytes changed")):
            at = data.draw(st.integers(0, len(out) - 1), label="at")
            if how == "punctuation":
                out[at] = data.draw(st.sampled_from(_PUNCTUATION), label="to")
            else:
                out[at] ^= 1 << data.draw(st.integers(0, 7), label="bit")
    elif how == "overwrite":
        at = data.draw(st.integers(0, len(out)), label="at")
        out[at : at + 8] = data.draw(st.binary(min_size=1, max_size=16), label="with")
    elif how == "truncate":
        out = out[: data.draw(st.integers(1, len(out) - 1), label="cut at")]
    raw = bytes(out)
    if data.draw(st.booleans(), label="gzip"):
        raw = gzip.compress(raw, compresslevel=1, mtime=0)
        if data.draw(st.integers(0, 4), label="cut the gzip") == 0:
            raw = raw[: data.draw(st.integers(1, len(raw) - 1), label="gzip cut at")]
    return raw


# -- what every example must hold to -------------------------------------------------------------------------


class Runaway(Exception):
    """An example that used more than CPU_S seconds of CPU: it would hang an import."""


@contextmanager
def bounded():
    """CPU time under CPU_S and the process's peak RSS under RSS_BYTES more than when the example began, for
    what runs inside: the kernel's high-water mark (VmHWM), reset as the example starts (writing 5 to
    /proc/self/clear_refs), so a spike of an earlier test in the same process is never counted; where it cannot
    be reset, the memory bound is not checked."""

    def stop(signum, frame):
        raise Runaway(f"more than {CPU_S} s of CPU time")

    before = psutil.Process().memory_info().rss
    reset = _reset_peak()
    previous = signal.signal(signal.SIGPROF, stop)
    signal.setitimer(signal.ITIMER_PROF, CPU_S)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)
    if reset:
        peak = _peak_rss()
        assert peak - before < RSS_BYTES, f"peak RSS {peak / 2**20:,.0f} MiB, {before / 2**20:,.0f} MiB before"


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _peak_rss() -> int:
    with open("/proc/self/status") as f:
        line = next(line for line in f if line.startswith("VmHWM:"))
    return int(line.split()[1]) << 10


def outcome(text: str) -> None:
    """Counted in the statistics of a property test (which guard the mutations met, how many were read)."""
    if currently_in_test_context():
        event(text)


def refusal(exc: InputRefused) -> None:
    """A refusal, counted by its reason less its figures."""
    outcome("refused: " + re.sub(r"[\d,.]+", "N", str(exc))[:60])


def plain(value) -> str:
    """What the CLI prints of an import's figures (strict JSON: NaN or infinity fails here)."""
    return json.dumps(json_ready(value), allow_nan=False)


def text_within(text: str) -> bool:
    return len(text) <= LIMITS.name_chars + 40  # "…(N chars)" after a cut name


def imports_trace(path: Path) -> None:
    """Read and analyse as `trace FILE` does: read within the limits, or refused."""
    from core.workload.trace.timeline import analyse_trace, read_trace

    with bounded():
        try:
            data = read_trace(path)
        except InputRefused as exc:
            return refusal(exc)
        outcome("read")
        tables, meta = analyse_trace(data, 20)
        rows = tables.rows()
    a = data.activities
    assert len(a.names) <= LIMITS.trace_names and all(map(text_within, a.names))
    assert len(set(a.device.tolist())) <= LIMITS.trace_devices
    assert all(map(text_within, data.gpu_names.values()))
    plain((rows, meta))


def imports_snapshot(path: Path):
    """Read and replay as `snapshot FILE` does: read within the limits (the snapshot), or refused (None)."""
    from core.experiments.memory_snapshot import overview_rows
    from core.workload.snapshot.analysis import analyse
    from core.workload.snapshot.reader import MAX_SIZE, read_snapshot

    with bounded():
        try:
            snapshot = read_snapshot(path)
        except InputRefused as exc:
            return refusal(exc)
        outcome("read")
        analysis = analyse(snapshot)
        summary, rows = analysis.summary(), overview_rows(analysis)
    for stack in snapshot.sites:
        assert len(stack) <= LIMITS.frames_per_stack + 1
        assert all(text_within(file) and text_within(fn) for file, _, fn in stack)
    for trace in snapshot.traces.values():
        assert len(trace.size) == 0 or (0 <= trace.size.min() and trace.size.max() < MAX_SIZE)
    assert all(0 <= s.total_size < MAX_SIZE for s in snapshot.segments)
    assert math.isfinite(summary["peak_allocated_bytes"])
    plain((summary, rows))
    return snapshot


def imports_runs(path: Path) -> None:
    """Import as `runs import FILE` does: all of it within the limits, or refused with nothing stored."""
    from core.store import ImportRefused, RunStore

    store = RunStore()
    before = store.count()
    with bounded():
        try:
            added, present = store.import_file(path)
        except ImportRefused as exc:
            assert store.count() == before
            return refusal(exc)
    outcome("read")
    assert added + present <= LIMITS.runs_per_file
    assert store.count() == before + added


# -- in this process -----------------------------------------------------------------------------------------


@EXAMPLES
@given(name=st.sampled_from(TRACES), data=st.data())
def test_a_mutated_trace_is_read_or_refused(tmp_path, name, data):
    path = tmp_path / "trace.json"
    path.write_bytes(mutate_bytes(data, mutate_json(data, content("workload", name))))
    imports_trace(path)


@settings(EXAMPLES, max_examples=120)
@given(name=st.sampled_from(SNAPSHOTS), data=st.data())
def test_a_mutated_snapshot_pickle_is_read_or_refused(tmp_path, name, data):
    path = tmp_path / "snapshot.pickle"
    path.write_bytes(mutate_bytes(data, mutate_pickle(data, name)))
    imports_snapshot(path)


@settings(EXAMPLES, max_examples=40)
@given(data=st.data())
def test_a_mutated_snapshot_json_is_read_or_refused(tmp_path, data):
    path = tmp_path / "snapshot.json"
    path.write_bytes(mutate_bytes(data, mutate_json(data, snapshot_json())))
    imports_snapshot(path)


@EXAMPLES
@given(name=st.sampled_from(RUNS), data=st.data())
def test_a_mutated_runs_file_is_imported_or_refused(tmp_path, name, data):
    path = tmp_path / "runs.json"
    path.write_bytes(mutate_bytes(data, mutate_json(data, content("runs", name))))
    imports_runs(path)


def test_a_snapshot_whose_events_hold_the_snapshot_itself_is_read(tmp_path):
    """Found by these mutations: the top dict given as an event (its memo slot fetched again) was emptied, as each
    event is once read, before its segments were looked up (a KeyError, a traceback). It is one odd event now."""
    path = tmp_path / "cycle.pickle"
    path.write_bytes(_memo_cycle_snapshot())
    snapshot = imports_snapshot(path)
    assert snapshot is not None and len(snapshot.segments) == 9
    assert len(snapshot.traces[0]) == 97 + 1  # the file's own events and the top dict
    assert snapshot.traces[0].quirks == {"an event is a list, not a dict": 1}  # the event list itself


# -- through the CLI, in a bounded process tree --------------------------------------------------------------


def _memo_cycle_snapshot() -> bytes:
    """The smallest real snapshot whose first device's event list holds, as its first events, itself and the
    whole snapshot (memo slots fetched again), then its first event's items twice over, so that every memo slot
    filled after them is numbered further on than the file's own fetches expect."""
    raw, ops, _ = opcodes(SNAPSHOTS[0])
    key = next(i for i, op in enumerate(ops) if raw[op.start : op.end].endswith(b"device_traces"))
    lists = [i for i in range(key, key + 6) if ops[i].name == "EMPTY_LIST"]  # device_traces, then device 0's
    events = lists[1]
    assert [op.name for op in ops[events + 1 : events + 5]] == ["MEMOIZE", "MARK", "EMPTY_DICT", "MEMOIZE"]
    fetches = get(ops[events + 1].slots) + get(0)
    first, item = ops[events + 2], events + 5
    assert ops[item].name == "MARK"
    close = ops[closing(ops, item)]
    region = raw[ops[item].start : close.end]
    return raw[: first.end] + fetches + raw[first.end : close.end] + region + raw[close.end :]


def _spliced(raw: bytes, key: bytes, number: bytes, after: bytes = b"") -> bytes:
    """``raw`` with the value of the first ``key`` (after ``after``) swapped for ``number``."""
    found = re.compile(rb'"' + key + rb'":\s*(-?[\d.eE+-]+)').search(raw, raw.index(after))
    assert found is not None
    start, end = found.span(1)
    return raw[:start] + number + raw[end:]


def _cli_cases() -> dict[str, tuple[list[str], bytes]]:
    """A kernel's start a million decimal orders past 2^63 ns, gzipped; the whole trace 100,000 lists deep; the
    snapshot above, gzipped; a run's size of 5,001 digits."""
    trace = content("workload", TRACES[0])
    return {
        "trace.json.gz": (["trace", "--no-save"], gzip.compress(_spliced(trace, b"ts", b"1e999999", b'"Kernel"'))),
        "deep.json": (["trace", "--no-save"], b"[" * 100_000 + trace + b"]" * 100_000),
        "snapshot.pickle.gz": (["snapshot", "--no-save"], gzip.compress(_memo_cycle_snapshot())),
        "runs.json": (["runs", "import"], _spliced(content("runs", RUNS[-1]), b"size", b"1" + b"0" * 5000)),
    }


@pytest.mark.parametrize("name", ["trace.json.gz", "deep.json", "snapshot.pickle.gz", "runs.json"])
def test_a_mutated_file_through_the_cli_exits_0_or_2_without_a_traceback(tmp_path, name):
    command, raw = _cli_cases()[name]
    path = tmp_path / name
    path.write_bytes(raw)
    out = bounded_cli(*command, str(path))
    assert out.code in (0, 2), (out.code, out.stderr[-2000:])
    assert "Traceback" not in out.stderr + out.stdout, out.stderr[-2000:]

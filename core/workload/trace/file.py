"""A Chrome/Kineto profiler trace file read into columns: what :mod:`core.workload.trace.timeline` analyses.

The file is decoded by ``msgspec`` against the few fields the analysis reads (phase, category, name, time,
duration, process, and the device, stream and correlation of ``args``); every other field of an event is
skipped by the decoder without becoming a Python object, and the file's bytes are a memory map, never a
Python string (:func:`core.intake.open_mapped`). Measured on a 200 MiB trace of 583 k events (Kineto's
shape, this 2-core machine): ``json.loads`` 7.8 s and 973 MiB peak RSS, ``orjson`` 6.5 s and 1.6 GiB,
``ijson``'s C backend streaming 6.2 s and 15 MiB, ``msgspec`` typed 1.3 s and 489 MiB (the mapped file
included). The typed decoder is five times faster than the streaming one; to keep its memory from growing
with the events, the event list is first split into undecoded spans (``msgspec.Raw``, a pointer into the
map each) and decoded :data:`BATCH_EVENTS` at a time into typed arrays, the map's pages handed back to the
OS after each batch: a 1 GiB trace peaks at a fraction of its size plus its columns.

Times stay exact. Kineto writes epoch microseconds with nanosecond decimals (``1700000000000000.123``);
as float64 such a number is quantised to 0.25 µs. Times are therefore decoded as decimals and held
relative to the trace's origin (:attr:`TraceFile.origin_us`, a whole microsecond), where float64 keeps
every nanosecond digit of a trace shorter than a day.

GPU activities, launch calls and step spans that cannot be placed on a timeline (a string or non-finite
time, a negative duration) are counted as ``malformed`` and reported, never silently dropped; what is
odd but usable (kernels overlapping on one stream, a duration longer than the trace, a device the trace's
device list lacks, sub-µs times) is counted in :attr:`TraceFile.quirks`. The host's events (CPU operators,
annotations, Python functions, runtime calls) become columns of their own (:mod:`core.workload.trace.cpu_ops`),
bounded as the GPU ones; events of any other category are skipped unchecked; a file that is not a trace is
refused with the reason.
"""

from __future__ import annotations

import codecs
import math
import os
import re
import stat
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal, DecimalException
from typing import Any

import msgspec
import numpy as np

from core.arrays import distinct, isin
from core.errors import InputRefused
from core.intake import GZIP_MAGIC, cut_name, inflated_limit, open_mapped, release_pages
from core.limits import LIMITS
from core.measure.kernels import EVERY_RANK_BY_NAME, KERNEL_RULES
from core.units import exact_size_text
from core.workload.trace.cpu_ops import CPU_KINDS, RUNTIME, CpuOps, _Columns
from core.workload.trace.json_array import batches, element_ends

MAX_TRACE_BYTES = 8 * 2**30  # decompressed JSON (its bytes are mapped, not held: the columns are what costs)
BATCH_EVENTS = 1_000  # events decoded at once: bounds the decoded objects alive (about 1.5 MiB; 5,000 held 6 more)
BATCH_BYTES = 64 << 20  # and the bytes of one batch, unless one event alone is longer
WHAT = "profiler trace"
KINDS = ("compute", "communication", "memcpy", "memset")
COMPUTE, COMM, MEMCPY, MEMSET = range(4)
_CATEGORY = {"kernel": None, "gpu_memcpy": MEMCPY, "memcpy": MEMCPY, "gpu_memset": MEMSET, "memset": MEMSET}
_LAUNCH_CATS = {"cuda_runtime", "cuda_driver", "runtime"}
# A CUDA/HIP graph's launch (cudaGraphLaunch, cuGraphLaunch, hipGraphLaunch and their _ptsz variants): the kernels
# of the graph carry its correlation id and have no launch call of their own.
_GRAPH_LAUNCH = re.compile(r"graphlaunch", re.I)
# Collectives are what the kernel rules' communication group names (NCCL/RCCL/MSCCL, collectives by name), and
# the custom ones no such rule names: vLLM/SGLang's cross_device_reduce, TensorRT-LLM's Lamport all-reduce,
# NVSHMEM and DeepEP (dispatch/combine). A kernel that spins waiting for its peers is communication, not compute.
_CUSTOM_ALL_REDUCE = (r"cross_device_reduce", r"lamport")
_CUSTOM_COMM = (*_CUSTOM_ALL_REDUCE, r"nvshmem", r"deep_?ep")
_COMM = re.compile("|".join([r.pattern for r in KERNEL_RULES if r.group == "communication"] + list(_CUSTOM_COMM)), re.I)
# the communication kernels whose call every rank makes and receives in from every other, by name alone
EVERY_RANK_KERNEL = re.compile("|".join([EVERY_RANK_BY_NAME, *_CUSTOM_ALL_REDUCE]), re.I)
_STEP = re.compile(r"^ProfilerStep#(\d{1,18})$")  # a step number within int64
_INT64 = 2**63
_TIME_US = Decimal(LIMITS.trace_time_ns).scaleb(-3)
CUT = f"names longer than {LIMITS.name_chars:,} characters (cut, their full length noted)"
_Number = int | float | None


class _Args(msgspec.Struct, gc=False):
    device: _Number | str = None
    stream: _Number | str = None  # ROCm's runtime events write streams as hex strings ("0x0")
    correlation: _Number | str = None
    # a host event's (core/workload/trace/cpu_ops.py): JSON of any type kept as its bytes, checked where read
    external: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw, name="External id")
    dims: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw, name="Input Dims")
    types: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw, name="Input type")
    concrete: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw, name="Concrete Inputs")
    stack: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw, name="Call stack")
    # a collective kernel's (PyTorch ≥ 2.2 writes record_param_comms' figures on the kernel itself)
    collective: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw, name="Collective name")
    in_elements: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw, name="In msg nelems")
    out_elements: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw, name="Out msg nelems")
    group_size: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw, name="Group size")
    dtype: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw, name="dtype")
    group_name: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw, name="Process Group Name")


class _Fields(msgspec.Struct, gc=False):
    ph: str | None = None
    cat: str | None = None
    name: str | int | float | None = None
    pid: int | float | str | None = None
    tid: int | float | str | None = None
    args: _Args | None = None


class _Event(_Fields, gc=False):
    """An event whose times are numbers (decoded exactly, as decimals)."""

    ts: Decimal | None = None
    dur: Decimal | None = None


class _LaxEvent(_Fields, gc=False):
    """The same event with times of any JSON type: what an event that fails as :class:`_Event` is read as, so a
    time that is a string or a boolean is counted as malformed instead of refusing the whole file."""

    ts: int | float | str | bool | None = None
    dur: int | float | str | bool | None = None


# A traceEvents entry that is not an object is kept as what it is and counted, not refused.
_Entry = _Event | str | int | float | bool | list | None


class _Device(msgspec.Struct, gc=False):
    id: _Number = None
    name: str | None = None
    totalGlobalMem: _Number | str = None
    computeMajor: _Number | str = None
    computeMinor: _Number | str = None
    numSms: _Number | str = None  # streaming multiprocessors; an AMD GPU's compute units


class _Distributed(msgspec.Struct, gc=False):
    rank: _Number = None
    world_size: _Number = None
    backend: str | None = None


class _Trace(msgspec.Struct, gc=False):
    """The header, with the lists of events and devices left as their bytes (empty where absent), to be counted
    before anything is built of them (:mod:`core.workload.trace.json_array`)."""

    traceEvents: msgspec.Raw = msgspec.Raw()
    deviceProperties: msgspec.Raw = msgspec.Raw()
    computeProperties: msgspec.Raw = msgspec.Raw()
    schemaVersion: int | str | None = None
    distributedInfo: _Distributed | None = None


@dataclass
class Activities:
    """Every GPU activity of a trace as arrays (µs since :attr:`TraceFile.origin_us`)."""

    start: np.ndarray
    end: np.ndarray
    kind: np.ndarray  # COMPUTE | COMM | MEMCPY | MEMSET
    device: np.ndarray
    stream: np.ndarray
    name: np.ndarray  # index into names
    correlation: np.ndarray  # -1 where absent
    names: list[str]


@dataclass(frozen=True, slots=True)
class CollectiveCall:
    """What a collective kernel's args say of its call: c10d's name, each rank's input and output elements,
    the process group's size and the element type (as written: ``Float``, ``BFloat16``), and the process group's
    name where recorded ("" otherwise)."""

    name: str
    in_elements: int
    out_elements: int
    group_size: int
    dtype: str
    group_name: str = ""


@dataclass
class TraceFile:
    """The columns of one trace and what its header says. Every time is in µs since ``origin_us``."""

    events: int
    activities: Activities
    gpu_steps: list[tuple[float, float, int]]  # GPU-side ProfilerStep#N spans (gpu_user_annotation)
    cpu_steps: list[tuple[float, float, int]]
    launch_correlation: np.ndarray  # the launch calls (cuda_runtime/driver) by correlation id, sorted
    launch_ts: np.ndarray
    gpu_names: dict[int, str] = field(default_factory=dict)
    launch_dur: np.ndarray = field(default_factory=lambda: np.zeros(0))  # each launch call's duration (µs)
    launch_graph: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))  # each call a graph launch?
    schema_version: int | str | None = None
    rank: int | None = None
    malformed: dict[str, int] = field(default_factory=dict)  # why → how many events
    origin_us: int = 0  # the trace's time origin: the whole epoch microsecond of its first timed event
    quirks: dict[str, int] = field(default_factory=dict)  # what is odd but usable → how many
    world_size: int | None = None  # distributedInfo: the job's size and backend, to tell ranks of one job
    backend: str | None = None
    ops: CpuOps = field(default_factory=CpuOps.empty)  # the host's events (core/workload/trace/cpu_ops.py)
    gpu_memory: dict[int, int] = field(default_factory=dict)  # deviceProperties: totalGlobalMem (bytes)
    gpu_arch: dict[int, tuple[int, int]] = field(default_factory=dict)  # and (computeMajor, computeMinor)
    gpu_units: dict[int, int] = field(default_factory=dict)  # and numSms (an AMD GPU's compute units)
    collectives: dict[int, CollectiveCall] = field(default_factory=dict)  # activity index → its call's figures

    def launch_calls(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each activity's launch call, by its correlation id: whether the trace has one, its index in the launch
        columns (the last call of an id where several have it; 0 where none), and whether the activity came from a
        CUDA/HIP graph — its call is a graph launch (``cudaGraphLaunch``…), or it shares its call with other
        activities (it has no launch of its own)."""
        a, corr = self.activities, self.launch_correlation
        n = len(a.correlation)
        if not len(corr):
            return np.zeros(n, bool), np.zeros(n, np.int64), np.zeros(n, bool)
        found, at = correlated(corr, a.correlation)
        named = self.launch_graph[at] if len(self.launch_graph) == len(corr) else np.zeros(n, bool)
        _, inverse, counts = np.unique(a.correlation, return_inverse=True, return_counts=True)
        return found, at, found & (named | (counts[inverse] > 1))

    def launch_events(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The host event of each activity ``idx``'s launch call, by correlation id: whether the trace has one, and
        its index in :attr:`ops` (0 where none) — its thread and time, which the launch columns do not keep."""
        ops = self.ops
        runtime = np.flatnonzero((ops.kind == RUNTIME) & (ops.correlation >= 0))
        found, at = correlated(ops.correlation[runtime], self.activities.correlation[idx])
        return found, runtime[at] if len(runtime) else at


def correlated(keys: np.ndarray, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each of ``wanted``'s correlation ids among ``keys`` (in any order): whether it is there, and its index in
    ``keys`` (the last of equal ids; 0 where none). Below 0 an id stands for none and matches nothing: the one
    join of launch calls, activities and host events, whichever side is looked up."""
    if not len(keys):
        return np.zeros(len(wanted), bool), np.zeros(len(wanted), np.int64)
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    j = np.searchsorted(ordered, wanted, side="right") - 1
    at = np.maximum(j, 0)
    return (j >= 0) & (wanted >= 0) & (ordered[at] == wanted), order[at]


def read_trace(path, progress: Callable[[str], None] | None = None) -> TraceFile:
    """A trace file (plain or gzip, by content) as columns; refused with a clear reason if it is not one.
    ``progress`` hears how many of its events are decoded, a batch at a time."""
    with open_mapped(path, *_inflation(path)) as view:
        trace = _decode(view)
        release_pages(view)  # the check above read the whole file: its pages need not stay while batches are read
        reader = _Reader()
        events = memoryview(trace.traceEvents)
        base = _offset(events, view)
        for start, ends in batches(events, BATCH_EVENTS, BATCH_BYTES):
            reader.add(_entries(events, start, ends, base))
            release_pages(view)
            if progress is not None:
                progress(f"{reader.events:,} events decoded ({int(ends[-1]) / len(events):.0%} of the file)")
        if progress is not None:
            progress(f"{reader.events:,} of {reader.events:,} events decoded")
        if not reader.phased:
            raise InputRefused(
                f"this is not a Chrome/Kineto {WHAT}: its 'traceEvents' holds no trace event (an object with a "
                "'ph' phase)"
            )
        events.release()
        devices = _devices(trace.deviceProperties) or _devices(trace.computeProperties)
        trace.traceEvents = trace.deviceProperties = trace.computeProperties = msgspec.Raw()  # they point into the map
    return reader.finish(trace, devices)


def _inflation(path) -> tuple[int, str]:
    """What the file may expand to when mapped, and what a refusal calls it: a gzip file is held to the
    inflate_ratio limit as it inflates (10 MB of gzip wrote 8 GiB to the temporary directory under the trace's own
    cap; a 190 KB gzip of zeros then cost 60 s of CPU decoding what it made), any other file to the trace's cap."""
    try:
        if stat.S_ISREG(os.stat(path).st_mode):  # a pipe is not peeked at: its bytes would be gone
            with open(path, "rb") as fh:
                if fh.read(2) == GZIP_MAGIC:
                    size = os.fstat(fh.fileno()).st_size
                    return min(MAX_TRACE_BYTES, inflated_limit(size)), (
                        f"{WHAT} ({size:,} bytes of gzip, held to the inflate_ratio limit: {LIMITS.inflate_ratio}× its "
                        f"size, at least {exact_size_text(LIMITS.inflate_floor_bytes)})"
                    )
    except OSError:
        pass  # open_mapped names the problem
    return MAX_TRACE_BYTES, WHAT


def _decode(view: memoryview) -> _Trace:
    """The header decoded, its lists left as their bytes (the whole file checked as JSON, nothing else built)."""
    if not bytes(view[:4096]).strip():
        if not len(view) or not bytes(view).strip():
            raise InputRefused(f"the {WHAT} is empty ({len(view)} bytes)")
    head = bytes(view[:65536])
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 4:  # not a multi-byte character cut at the end of the sample
            raise InputRefused(f"the {WHAT} is not UTF-8 text") from None
    start = 3 if head[:3] == b"\xef\xbb\xbf" else 0
    body = view[start:]
    try:
        first = head[start:].lstrip()[:1]
        if first == b"[":
            return _Trace(traceEvents=msgspec.json.decode(body, type=msgspec.Raw))
        trace = msgspec.json.decode(body, type=_Trace)
    except RecursionError:
        raise InputRefused(f"the {WHAT} nests too deeply to be a trace") from None
    except msgspec.ValidationError as exc:
        raise InputRefused(f"the {WHAT} holds a value of the wrong type: {exc}") from None
    except msgspec.DecodeError as exc:
        raise InputRefused(f"the {WHAT} is not valid JSON ({exc}); it may be truncated") from None
    except UnicodeDecodeError:
        raise _not_utf8(view, 0) from None
    if bytes(memoryview(trace.traceEvents)[:1]) != b"[":  # absent, null, or not a list
        keys = _top_keys(view)
        found = f"an object with keys {', '.join(keys[:6])}" if keys is not None else "something else"
        raise InputRefused(
            f"this is not a Chrome/Kineto {WHAT}: expected an object with a 'traceEvents' list "
            f"(what torch.profiler's export_chrome_trace writes), found {found}"
        )
    return trace


def _offset(part: memoryview, whole: memoryview) -> int:
    """Where the bytes ``part`` (a view into ``whole``) start in ``whole``."""
    if not len(part):
        return 0
    address = np.frombuffer(part, np.uint8).__array_interface__["data"][0]
    return address - np.frombuffer(whole, np.uint8).__array_interface__["data"][0]


def _not_utf8(text, at: int) -> InputRefused:
    """The refusal of bytes that are not UTF-8, naming the first bad byte's offset (``text`` starts at ``at``)."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    for lo in range(0, len(text), 1 << 20):
        pending = len(decoder.getstate()[0])  # the start of a character the last chunk cut
        try:
            decoder.decode(bytes(text[lo : lo + (1 << 20)]))
        except UnicodeDecodeError as exc:
            at += lo - pending + exc.start
            break
    return InputRefused(f"the {WHAT} is not UTF-8 text: byte {at:,} is not part of a UTF-8 character")


def _top_keys(view: memoryview) -> list[str] | None:
    try:
        top = msgspec.json.decode(view, type=dict[str, msgspec.Raw])
    except (msgspec.DecodeError, RecursionError, UnicodeDecodeError):
        return None
    return [cut_name(str(k), 64) for k in top]


def _devices(raw: msgspec.Raw) -> list[_Device | None]:
    """A device list, counted before it is built: more than ``trace_devices`` entries are refused."""
    if bytes(memoryview(raw)[:1]) != b"[":
        return []
    count = sum(len(ends) for ends in element_ends(raw))
    if count > LIMITS.trace_devices:
        raise InputRefused(
            f"the {WHAT} lists {count:,} devices, more than the {LIMITS.trace_devices:,} of the trace_devices limit"
        )
    try:
        return msgspec.json.decode(raw, type=list[_Device | None])
    except msgspec.ValidationError as exc:
        raise InputRefused(f"the {WHAT} holds a value of the wrong type: {exc} (its device list)") from None


def _entries(events: memoryview, start: int, ends: np.ndarray, base: int) -> list:
    """One batch of events (``events[start]`` is the bracket or comma before the first, ``ends`` where each
    ends) decoded; an event that fails the exact type is decoded on its own, laxly, so a bad time costs that
    event only, while a field of another wrong type still refuses the file. An event long enough to hold a
    number of more than ``number_digits`` digits has its times' digits counted."""
    try:
        try:
            out = _decoded(b"[" + bytes(events[start + 1 : int(ends[-1])]) + b"]", list[_Entry])
        except msgspec.ValidationError:
            out = [_one(events[int(a) + 1 : int(b)]) for a, b in zip([start, *ends[:-1]], ends)]
    except UnicodeDecodeError:
        raise _not_utf8(events[start : int(ends[-1])], base + start) from None
    lengths = np.diff(ends, prepend=start)
    for i in np.flatnonzero(lengths > LIMITS.number_digits).tolist():
        _check_digits(out[i], base + (int(ends[i - 1]) if i else start))
    return out


def _decoded(text, typ):
    try:
        return msgspec.json.decode(text, type=typ)
    except RecursionError:
        raise InputRefused(f"the {WHAT} nests too deeply to be a trace") from None


def _one(span: memoryview):
    try:
        return _decoded(span, _Entry)
    except msgspec.ValidationError:
        try:
            return _decoded(span, _LaxEvent)
        except msgspec.ValidationError as exc:
            raise InputRefused(f"the {WHAT} holds a value of the wrong type: {exc}") from None


def _check_digits(event, at: int) -> None:
    for name in ("ts", "dur"):
        value = getattr(event, name, None)
        if type(value) is Decimal and (digits := len(value.as_tuple().digits)) > LIMITS.number_digits:
            raise InputRefused(
                f"an event's {name} (after byte {at:,}) has {digits:,} digits, more than the "
                f"{LIMITS.number_digits:,} of the number_digits limit"
            )


def _whole(value) -> int | None:
    """A device, stream or correlation id: an integer within int64 (a float that is whole, or a string of a
    decimal or 0x-hex integer, counts)."""
    if type(value) is int:
        return value if -_INT64 <= value < _INT64 else None
    if type(value) is str:
        try:
            value = int(value[:24], 0)
        except ValueError:
            return None
        return value if -_INT64 <= value < _INT64 else None
    if type(value) is not float:
        return None
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        return None
    value = int(value)
    return value if -_INT64 <= value < _INT64 else None


_COLLECTIVE_TEXT = 64  # a collective's or a dtype's name is short: longer is no name


def _collective(args: _Args) -> CollectiveCall | None:
    """A collective kernel's figures, when its args hold every one, each of its type and in range."""
    name, dtype = _raw_text(args.collective), _raw_text(args.dtype)
    sent, got, group = (_whole(_raw_number(raw)) for raw in (args.in_elements, args.out_elements, args.group_size))
    if name is None or dtype is None or sent is None or got is None or group is None:
        return None
    if min(sent, got) < 0 or group <= 0:
        return None
    return CollectiveCall(name, sent, got, group, dtype, _raw_text(args.group_name) or "")


def _raw_text(raw: msgspec.Raw) -> str | None:
    """A short name kept as raw JSON: a string of at most 64 characters, else None."""
    if not 2 <= len(raw) <= 4 * _COLLECTIVE_TEXT + 2:
        return None
    try:
        value = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return None
    return value if type(value) is str and 0 < len(value) <= _COLLECTIVE_TEXT else None


def _raw_number(raw: msgspec.Raw) -> int | float | str | None:
    """An id kept as raw JSON: a number or a string of one, else None (a list or an object is no id)."""
    if not len(raw):
        return None
    text = bytes(memoryview(raw)[:32])
    if text.isdigit() and (text[0] != 0x30 or len(text) == 1):  # the common case, a plain JSON integer, read at once
        return int(text)
    try:
        value = msgspec.json.decode(text)
    except msgspec.DecodeError:
        return None
    return value if type(value) in (int, float, str) else None


class _Reader:
    """Events, a batch at a time, into typed arrays (8 bytes a number, not a Python object each)."""

    def __init__(self) -> None:
        self.start, self.end = array("d"), array("d")
        self.kind, self.device, self.stream = array("b"), array("q"), array("q")
        self.name, self.correlation = array("q"), array("q")
        self.names: dict[str, int] = {}
        self.gpu_steps: list[tuple[float, float, int]] = []
        self.cpu_steps: list[tuple[float, float, int]] = []
        self.launch_corr, self.launch_ts, self.launch_dur = array("q"), array("d"), array("d")
        self.launch_graph = array("b")  # 1 where the call launched a CUDA/HIP graph
        self.malformed: dict[str, int] = {}
        self.origin: Decimal | None = None
        self.lowered: dict[str | None, str] = {}
        self.events = 0
        self.phased = 0  # events with a phase: a trace has some
        self.kernel_kind: dict[str, tuple[int, int]] = {}  # name → (its number, COMPUTE or COMM by name)
        self.cut = 0  # names cut to name_chars
        self.streams: dict[int, set[int]] = {}  # device → its streams, to hold both within their limits
        self.ops = _Columns()  # the host's events
        self.collectives: dict[int, CollectiveCall] = {}

    def _bad(self, why: str) -> None:
        self.malformed[why] = self.malformed.get(why, 0) + 1

    def _times(self, e: _Event | _LaxEvent) -> tuple[float, float] | None:
        """Start and end in µs since the origin, exact to the nanosecond; None (counted) when unusable."""
        ts, dur = e.ts, e.dur
        if type(ts) is not Decimal or type(dur) is not Decimal:
            self._bad("time or duration not a finite number")
            return None
        if dur < 0:
            self._bad("negative duration")
            return None
        if (size := ts.copy_abs()) > _TIME_US or dur > _TIME_US:
            raise InputRefused(
                f"an event's {'ts' if size > _TIME_US else 'dur'} of {max(size, dur):.3e} µs is "
                f"beyond the ±2^63 ns of the trace_time_ns limit"
            )
        try:
            if self.origin is None:
                self.origin = ts.to_integral_value(rounding="ROUND_FLOOR")
            start, end = float(ts - self.origin), float(ts + dur - self.origin)
        except (DecimalException, OverflowError, ValueError):
            start = end = math.inf
        if not (math.isfinite(start) and math.isfinite(end)):
            self._bad("time or duration not a finite number")
            return None
        return start, end

    def _appends(self) -> tuple[Callable[[Any], None], ...]:
        """The activity columns' appends, looked up once a batch rather than once an event."""
        return (
            self.start.append,
            self.end.append,
            self.kind.append,
            self.device.append,
            self.stream.append,
            self.name.append,
            self.correlation.append,
        )

    def add(self, entries: list) -> None:
        """One batch of events: the GPU's activities into the columns; the host's, the launches and the steps beside."""
        first = len(self.start)
        lowered, kernel_kind = self.lowered, self.kernel_kind
        times = self._times
        start, end_, kinds, devices, streams, name_col, correlations = self._appends()
        for e in entries:
            self.events += 1
            if not isinstance(e, (_Event, _LaxEvent)):
                self._bad("not an object")
                continue
            if e.ph is None:
                continue
            self.phased += 1
            if e.ph != "X":
                continue
            cat = lowered.get(e.cat)
            if cat is None:
                cat = lowered[e.cat] = (e.cat or "").lower()
            gpu = cat in _CATEGORY
            launch = cat in _LAUNCH_CATS
            name = e.name if type(e.name) is str else ("" if e.name is None else str(e.name))
            step = not gpu and not launch and name.startswith("ProfilerStep#")
            if not (gpu or launch or step):
                if (host := CPU_KINDS.get(cat)) is not None and (span := times(e)) is not None:
                    self._host(host, span, e, name)
                continue  # any other category: no figure reads it
            if gpu and len(name) > LIMITS.name_chars:
                name = cut_name(name)
                self.cut += 1
            span = times(e)
            if span is None:
                continue
            ts, end = span
            args = e.args
            if gpu:
                kind = _CATEGORY[cat]
                known = kernel_kind.get(name) or self._numbered(name)
                if kind is None:
                    kind = known[1]
                device = _whole(args.device) if args else None
                if device is None:
                    device = _whole(e.pid) or 0
                stream = _whole(args.stream) if args else None
                corr = _whole(args.correlation) if args else None
                start(ts)
                end_(end)
                kinds(kind)
                devices(device)
                streams(-1 if stream is None else stream)
                name_col(known[0])
                correlations(-1 if corr is None else corr)
                if kind == COMM and args is not None and len(args.collective) and (call := _collective(args)):
                    self.collectives[len(self.start) - 1] = call
            elif launch:
                self._launch(span, e, name)
            elif m := _STEP.match(name):
                (self.gpu_steps if cat == "gpu_user_annotation" else self.cpu_steps).append((ts, end, int(m.group(1))))
        self._check_counts(first)

    def _numbered(self, name: str) -> tuple[int, int]:
        """A kernel name not seen before: numbered and classified (COMPUTE or COMM by name) once."""
        known = self.kernel_kind[name] = (len(self.names), COMM if _COMM.search(name) else COMPUTE)
        self.names[name] = known[0]
        return known

    def _launch(self, span: tuple[float, float], e, name: str) -> None:
        """A runtime call: on the host's timeline, and where it names its correlation, kept to pair with the
        activity it launched (the launch delays)."""
        args = e.args
        corr = _whole(args.correlation) if args else None
        self._host(RUNTIME, span, e, name, corr)
        if corr is not None:
            ts, end = span
            self.launch_corr.append(corr)
            self.launch_ts.append(ts)
            self.launch_dur.append(end - ts)
            self.launch_graph.append(1 if _GRAPH_LAUNCH.search(name) else 0)

    def _host(self, kind: int, span: tuple[float, float], e, name: str, corr: int | None = None) -> None:
        args = e.args
        external = _whole(_raw_number(args.external)) if args is not None else None
        self.ops.add(kind, span[0], span[1], _whole(e.tid) or 0, name, external, corr, args)

    def _check_counts(self, first: int) -> None:
        """Distinct names, devices and streams per device within their limits, checked as each batch is read
        (activities from ``first`` on are new), before anything is grouped by them."""
        if len(self.names) > LIMITS.trace_names:
            raise InputRefused(
                f"the {WHAT} has more than {LIMITS.trace_names:,} distinct kernel names (the trace_names limit)"
            )
        devices, streams = self.device[first:].tolist(), self.stream[first:].tolist()
        for device, stream in set(zip(devices, streams)):
            self.streams.setdefault(device, set()).add(stream)
        if len(self.streams) > LIMITS.trace_devices:
            raise InputRefused(
                f"the {WHAT} has activities on more than {LIMITS.trace_devices:,} devices (the trace_devices limit)"
            )
        if new := {d for d in set(devices) if len(self.streams[d]) > LIMITS.trace_streams}:
            raise InputRefused(
                f"device {min(new)} of the {WHAT} has more than {LIMITS.trace_streams:,} streams (the trace_streams "
                "limit)"
            )

    def finish(self, trace: _Trace, props: list[_Device | None]) -> TraceFile:
        activities = Activities(
            start=np.frombuffer(self.start, np.float64).copy(),
            end=np.frombuffer(self.end, np.float64).copy(),
            kind=np.frombuffer(self.kind, np.int8).astype(np.int64),
            device=np.frombuffer(self.device, np.int64).copy(),
            stream=np.frombuffer(self.stream, np.int64).copy(),
            name=np.frombuffer(self.name, np.int64).copy(),
            correlation=np.frombuffer(self.correlation, np.int64).copy(),
            names=list(self.names),
        )
        corr = np.frombuffer(self.launch_corr, np.int64)
        order = np.argsort(corr, kind="stable")
        gpu_names, gpu_memory, gpu_arch, gpu_units = self._gpus(props)
        remapped = _only_gpu(activities.device, gpu_names, gpu_memory, gpu_arch, gpu_units)
        ops = self.ops.finish()
        dropped = {**self.ops.dropped, **remapped}
        if self.ops.cut:
            self.cut += self.ops.cut
        dist = trace.distributedInfo
        rank = _whole(dist.rank) if dist else None
        backend = self._name(dist.backend) if dist and dist.backend is not None else None
        schema = self._name(trace.schemaVersion) if type(trace.schemaVersion) is str else trace.schemaVersion
        span = self._span(activities)
        return TraceFile(
            events=self.events,
            activities=activities,
            gpu_steps=self.gpu_steps,
            cpu_steps=self.cpu_steps,
            launch_correlation=corr[order],
            launch_ts=np.frombuffer(self.launch_ts, np.float64)[order],
            launch_dur=np.frombuffer(self.launch_dur, np.float64)[order],
            launch_graph=np.frombuffer(self.launch_graph, np.int8)[order].astype(bool),
            gpu_names=gpu_names,
            schema_version=schema,
            rank=rank,
            malformed=self.malformed,
            origin_us=int(self.origin) if self.origin is not None else 0,
            quirks=quirks(activities, gpu_names, span, bool(props)) | ({CUT: self.cut} if self.cut else {}) | dropped,
            world_size=_whole(dist.world_size) if dist else None,
            backend=backend,
            ops=ops,
            gpu_memory=gpu_memory,
            gpu_arch=gpu_arch,
            gpu_units=gpu_units,
            collectives=self.collectives,
        )

    def _gpus(self, props: list[_Device | None]) -> tuple[dict, dict, dict, dict]:
        """Each listed GPU's name, memory, architecture and SM count by device id, where the file gives them."""
        gpu_names = {  # an empty name (vLLM's ROCm traces write "") names nothing
            d: self._name(name)
            for p in props
            if p is not None and (d := _whole(p.id)) is not None and (name := (p.name or "").strip())
        }
        known = [(d, p) for p in props if p is not None and (d := _whole(p.id)) is not None]
        gpu_memory = {d: m for d, p in known if (m := _whole(p.totalGlobalMem)) is not None}
        gpu_arch = {
            d: (major, _whole(p.computeMinor) or 0) for d, p in known if (major := _whole(p.computeMajor)) is not None
        }
        gpu_units = {d: n for d, p in known if (n := _whole(p.numSms)) is not None}
        return gpu_names, gpu_memory, gpu_arch, gpu_units

    def _span(self, activities: Activities) -> float:
        """From the first start to the last of the activities, the launches and the steps (µs): what the quirks
        judge a trace's length by."""
        starts = [x for x in (activities.start, np.frombuffer(self.launch_ts, np.float64)) if len(x)]
        starts += (
            [np.array([t for t, _, _ in self.gpu_steps + self.cpu_steps])] if self.gpu_steps or self.cpu_steps else []
        )
        return float(max(x.max() for x in starts) - min(x.min() for x in starts)) if starts else 0.0

    def _name(self, text: str) -> str:
        """A name from the file's header, cut (and counted) as kernel names are."""
        if len(text) > LIMITS.name_chars:
            self.cut += 1
        return cut_name(text)


def _only_gpu(device: np.ndarray, *by_id: dict[int, Any]) -> dict[str, int]:
    """A file that lists one GPU while its every activity is on one other device id (ROCm writes the process's
    only visible GPU as id 0 and the kernels' physical index, 2 say): that GPU's name, memory and architecture
    are given to the device the activities are on, in place, and said as a quirk; nothing otherwise."""
    ids = distinct(device).tolist()
    listed = list(by_id[0])
    if len(listed) != 1 or len(ids) != 1 or ids[0] == listed[0]:
        return {}
    for table in by_id:
        if listed[0] in table:
            table[ids[0]] = table.pop(listed[0])
    return {
        f"activities on device {ids[0]} while the device list has one GPU, id {listed[0]}: taken as that GPU "
        "(a process that saw one GPU)": len(device)
    }


def quirks(a: Activities, gpu_names: dict[int, str], span_us: float, has_device_list: bool) -> dict[str, int]:
    """What is odd about a trace's GPU activities but still usable, with counts (only what was found)."""
    found: dict[str, int] = {}
    n = len(a.start)
    if n:
        order = np.lexsort((a.start, a.stream, a.device))
        start, end = a.start[order], a.end[order]
        same = (a.device[order][1:] == a.device[order][:-1]) & (a.stream[order][1:] == a.stream[order][:-1])
        lane = np.concatenate([[0], np.cumsum(~same)])  # consecutive lanes (device, stream) numbered
        width = float(end.max() - start.min()) + 1.0
        ends_so_far = np.maximum.accumulate(end + lane * width)  # the latest end before, within the lane
        found["activities overlapping an earlier one on the same stream (CUDA graphs or concurrent kernels)"] = int(
            np.count_nonzero(same & (start[1:] + lane[1:] * width < ends_so_far[:-1]))
        )
        if span_us > 0:
            found["activities lasting longer than the whole trace (its earliest to latest start)"] = int(
                np.count_nonzero(a.end - a.start > span_us)
            )
        found["timestamps with sub-µs digits (kept exactly)"] = int(
            np.count_nonzero(a.start != np.floor(a.start)) + np.count_nonzero(a.end != np.floor(a.end))
        )
        if has_device_list:
            missing = set(distinct(a.device).tolist()) - set(gpu_names)
            found["activities on a device the trace's device list lacks"] = int(
                np.count_nonzero(isin(a.device, list(missing)))
            )
        else:
            found["activities of a trace without a device list (GPU names unknown)"] = n
    return {why: count for why, count in found.items() if count}

"""Reading a CUDA memory snapshot (``torch.cuda.memory._dump_snapshot``) recorded on any machine.

A snapshot is ``{"segments": [...], "device_traces": [[event, ...], ...], ...}`` of plain dicts, lists,
strings and numbers. A pickle of any protocol is read through :func:`core.intake.load_pickle_stream`
(classes refused, bytes counted): while the unpickler builds the structure, every batch of trace events
it appends is moved into compact columns (one number per field) and the event dicts are emptied, so a
1 GB file never becomes the ~6 GB of Python objects a plain ``pickle.load`` makes. JSON (what
``json.dump(torch.cuda.memory._snapshot())`` writes) and gzip of either are read too.

Stacks are stored once per distinct stack (a *site*); events refer to them by number. Nothing here
interprets the events: :mod:`core.workload.snapshot.analysis` does.
"""

from __future__ import annotations

from array import array
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from itertools import repeat
from operator import itemgetter, methodcaller
from sys import getrefcount
from typing import Any, cast

import numpy as np

from core.errors import InputRefused
from core.intake import cut_name, is_pickle, loads_json, open_input, read_limited
from core.limits import LIMITS
from core.pickle_stream import load_pickle_stream
from core.units import GIB, MIB
from core.workload.snapshot.frames import Frame

ACTIONS = (
    "alloc",
    "free_requested",
    "free_completed",
    "segment_alloc",
    "segment_free",
    "segment_map",
    "segment_unmap",
    "snapshot",
    "oom",
    "user_defined",
)
CODE: dict[str | None, int] = {name: i for i, name in enumerate(ACTIONS)}  # .get(None): no action
# An out-of-memory event has no address: torch writes ``device_free`` (what CUDA still had free) in its place
# (``TraceEntry`` in torch/cuda/memory.py), and the ``addr`` column keeps it, as torch's own trace entry does.
OOM = CODE["oom"]
UNKNOWN_ACTION = 255
# Only these events' stacks are read: the stack of a free is where it was freed, which no view uses. So a
# free's frames list is emptied as its dict is (torch shares it only between free_requested and its
# free_completed; an allocation's stack is captured at the allocation and shared only with its segment_alloc).
STACK_ACTIONS = frozenset(CODE[a] for a in ("alloc", "segment_alloc", "segment_map", "oom"))
FREE_ACTIONS = frozenset(CODE[a] for a in ("free_requested", "free_completed", "segment_free", "segment_unmap"))
MAX_PICKLE_BYTES = 32 * GIB  # read as a stream: memory stays bounded whatever the size
MAX_JSON_BYTES = 512 * MIB  # JSON is parsed whole
MAX_ADDRESS = 2**64
MAX_SIZE = 2**50  # 1 PiB: an event, a block or a segment larger than this is malformed
MAX_TIME_US = 2**62
MAX_TOTAL = 2**62  # the sizes of all events and segments together: past it no sum may be trusted to int64
MAX_DEVICE = 1024
WHAT = "memory snapshot"
_ID_CACHE_LIMIT = 200_000
_FIELDS = itemgetter("action", "addr", "size", "time_us")
_FRAMES = methodcaller("get", "frames")
_STACK_CODE = np.array([code in STACK_ACTIONS for code in range(256)])  # by action code: keeps a stack
_FREE_CODE = np.array([code in FREE_ACTIONS for code in range(256)])  # by action code: a free's stack, dropped


# What holds a frames list no event or block shares, as ``add`` counts while loading: the unpickler's memo, its
# event's dict, ``frames``, ``chosen`` and getrefcount's own argument. One more holder is a block (or another
# event still to come in this batch); a pickle without a memo shares nothing.
_UNSHARED_REFS = 5


def _within(values: array, top: int) -> bool:
    """Every one of these int64 ``values`` in [0, ``top``), checked by NumPy on the array's own memory."""
    view = np.frombuffer(values, np.int64)
    return not len(view) or bool(view.min() >= 0 and view.max() < top)


def _pick(indices: list[int], values: list) -> tuple:
    """``values`` at ``indices`` (one or more), gathered in C."""
    return (values[indices[0]],) if len(indices) == 1 else itemgetter(*indices)(values)


class Sites:
    """Distinct stacks, numbered. Torch shares frame lists and frame objects between events, so a stack is
    first looked up by the identity of its list, then by the identities of its frames (cheap, and for a batch
    of events done in C: :meth:`of_many`), then by content; the identity caches keep what they name alive so an
    identity is never reused while it is a key. A stack keeps its first
    :data:`~core.limits.Limits.frames_per_stack` frames and a last one that says how many were dropped, so a
    100,000-frame stack costs what a short one does."""

    def __init__(self) -> None:
        self.stacks: list[tuple[Frame, ...]] = []
        self._by_content: dict[tuple[Frame, ...], int] = {}
        self._by_ids: dict[tuple[int, ...], int] = {}
        self._pinned: list[list] = []  # the frames behind the keys of _by_ids
        self._by_list: dict[int, tuple[int, list]] = {}

    def of(self, frames: Any) -> int:
        if not frames or type(frames) is not list:
            return -1
        hit = self._by_list.get(id(frames))
        if hit is not None and len(hit[1]) == len(frames):
            return hit[0]
        cap = LIMITS.frames_per_stack
        kept = frames[:cap]
        key = tuple(map(id, kept)) if len(frames) <= cap else (*map(id, kept), -len(frames))
        site = self._by_ids.get(key)
        if site is None:
            content = tuple(_frame(f) for f in kept)
            if len(frames) > cap:
                content += (("…", 0, f"({len(frames) - cap:,} more frames not kept; the limit is {cap:,})"),)
            site = self._by_content.get(content)
            if site is None:
                site = len(self.stacks)
                self.stacks.append(content)
                self._by_content[content] = site
            if len(self._by_ids) >= _ID_CACHE_LIMIT:
                self._by_ids.clear()
                self._pinned.clear()
            self._by_ids[key] = site
            self._pinned.append(kept)
        if len(self._by_list) >= _ID_CACHE_LIMIT:
            self._by_list.clear()
        self._by_list[id(frames)] = (site, frames)
        return site

    def of_many(self, lists: tuple | list) -> list[int]:
        """:meth:`of` for each of many frames lists: where all are lists no longer than the cap, every known
        stack is found by its frames' identities in C, and only the others are looked at one by one."""
        if not (set(map(type, lists)) <= {list} and max(map(len, lists), default=0) <= LIMITS.frames_per_stack):
            return list(map(self.of, lists))
        ids_of_each = cast("Iterable[Iterable[int]]", map(map, repeat(id), lists))  # in C: no Python call per list
        keys: map[tuple[int, ...]] = map(tuple, ids_of_each)
        found = list(map(self._by_ids.get, keys))
        if None in found:
            of = self.of
            return [of(frames) if site is None else site for site, frames in zip(found, lists)]
        return cast(list[int], found)

    def forget_identities(self) -> None:
        """After loading: the objects behind the identities are about to be freed."""
        self._by_ids.clear()
        self._pinned.clear()
        self._by_list.clear()


def _frame(f: Any) -> Frame:
    if type(f) is not dict:
        return ("?", 0, _text(f))
    line = f.get("line", 0)
    return (_text(f.get("filename", "?")), line if type(line) is int else 0, _text(f.get("name", "?")))


def _text(value: Any) -> str:
    """A field of the file read as text: a string (cut) or a number as it is, anything else named by its type.
    Never the str() of a container, which costs its whole expanded tree (a list of a list of … shared through
    the memo prints 2^40 items from 400 bytes), nor of an integer of thousands of digits."""
    if type(value) is str:
        return cut_name(value)
    if (type(value) in (int, bool) and value.bit_length() <= 64) or type(value) is float or value is None:
        return str(value)
    return f"a {type(value).__name__}"


class _Columns:
    """One device's trace events as typed arrays (≈ 33 bytes an event instead of ≈ 600 as dicts)."""

    def __init__(self) -> None:
        self.action = array("B")
        self.addr = array("Q")
        self.size = array("q")
        self.time_us = array("q")
        self.site = array("i")
        self.malformed = 0
        self.unknown_actions: dict[str, int] = {}
        self.quirks: dict[str, int] = {}  # why an event was left out → how many

    def add(self, items: list, sites: Sites, *, loading: bool = False) -> None:
        """Append events and empty their dicts (the unpickler's memo still holds them, now small). A batch of
        well-formed events is taken a field at a time, in C; a batch holding anything odd goes event by
        event, so what is wrong with each is counted. While the unpickler is ``loading``, an allocation's
        frames list that nothing else holds is emptied too once its site is known (the memo would keep its
        frames, ~40 % of a 1 GB snapshot's peak memory); one a block also holds (torch gives an allocation's
        block and its event the same list) is kept for the block."""
        try:
            names, addrs, sizes, times = zip(*map(_FIELDS, items)) if items else ((), (), (), ())
            codes = array("B", map(CODE.get, names, repeat(UNKNOWN_ACTION)))
            addr, size, time_us = array("Q", addrs), array("q", sizes), array("q", times)
        except (KeyError, TypeError, OverflowError):  # not a dict, a field missing, not a whole number in range
            return self._add_each(items, sites)
        if (
            UNKNOWN_ACTION in codes
            or OOM in codes  # its device_free is read in place of addr
            or not {*map(type, addrs), *map(type, sizes), *map(type, times)} <= {int}  # not bool
            or not _within(size, MAX_SIZE)
            or not _within(time_us, MAX_TIME_US)
        ):
            return self._add_each(items, sites)
        frames = list(map(_FRAMES, items))
        kinds = np.frombuffer(codes, np.uint8)
        stacked = np.flatnonzero(_STACK_CODE[kinds]).tolist()
        site = np.full(len(items), -1, np.int32)
        if stacked:
            chosen = _pick(stacked, frames)
            site[stacked] = sites.of_many(chosen)
            if loading:
                held = list(map(getrefcount, chosen))
                unshared = [f for f, refs in zip(chosen, held) if refs <= _UNSHARED_REFS and type(f) is list]
                deque(map(list.clear, unshared), maxlen=0)
        freed = np.flatnonzero(_FREE_CODE[kinds]).tolist()
        if freed:
            deque(map(list.clear, (f for f in _pick(freed, frames) if type(f) is list)), maxlen=0)
        deque(map(dict.clear, items), maxlen=0)
        self.action += codes
        self.addr += addr
        self.size += size
        self.time_us += time_us
        self.site.frombytes(site.tobytes())

    def _add_each(self, items: list, sites: Sites) -> None:
        action, addr_col, size_col, time_col, site_col = (
            self.action.append,
            self.addr.append,
            self.size.append,
            self.time_us.append,
            self.site.append,
        )
        code_of = CODE.get
        stack_actions, free_actions = STACK_ACTIONS, FREE_ACTIONS
        of = sites.of
        for e in items:
            if type(e) is not dict:
                self._quirk(f"an event is a {type(e).__name__}, not a dict")
                continue
            name = e.get("action")
            code = code_of(name, UNKNOWN_ACTION) if type(name) is str else UNKNOWN_ACTION
            addr = e.get("device_free", 0) if code == OOM else e.get("addr", 0)
            size = e.get("size", 0)
            t = e.get("time_us", 0)
            if not (
                type(addr) is int
                and type(size) is int
                and type(t) is int
                and 0 <= addr < MAX_ADDRESS
                and 0 <= size < MAX_SIZE
                and 0 <= t < MAX_TIME_US
            ):
                self._quirk(_why_malformed(addr, size, t))
                e.clear()
                continue
            if code == UNKNOWN_ACTION:
                key = _text(name)[:40]
                self.unknown_actions[key] = self.unknown_actions.get(key, 0) + 1
            action(code)
            addr_col(addr)
            size_col(size)
            time_col(t)
            if code in stack_actions:
                site_col(of(e.get("frames")))
            else:
                site_col(-1)
                if code in free_actions and type(e.get("frames")) is list:
                    e["frames"].clear()
            e.clear()

    def _quirk(self, why: str) -> None:
        self.malformed += 1
        self.quirks[why] = self.quirks.get(why, 0) + 1


def _why_malformed(addr: Any, size: Any, t: Any) -> str:
    for key, value, top in (("addr", addr, MAX_ADDRESS), ("size", size, MAX_SIZE), ("time_us", t, MAX_TIME_US)):
        if type(value) is not int:
            return f"an event's {key} is a {type(value).__name__}, not an integer"
        if not 0 <= value < top:
            return f"an event's {key} is negative or past {top:,}"
    return "an event's fields are out of range"


class _Drain:
    """Called by the unpickler between chunks: moves the events of every trace list found so far into
    columns. Lists are found in the unpickler's memo (a copy, so only now and then: when nothing grew for
    a while, with the wait doubling each time), since they are built bottom-up and have no parent yet."""

    QUIET_BEFORE_SCAN = 4  # chunks without a new batch of events before the memo is searched again

    def __init__(self, sites: Sites, progress: Callable[[str], None] | None = None) -> None:
        self.sites = sites
        self.progress = progress
        self.events = 0
        self.lists: dict[int, tuple[list, _Columns]] = {}
        self.quiet = 0
        self.wait = 1

    def __call__(self, unpickler) -> None:
        if self.drain():
            self.quiet, self.wait = 0, self.QUIET_BEFORE_SCAN
            return
        self.quiet += 1
        if self.quiet >= self.wait:
            self.scan(unpickler.memo.copy().values())
            self.quiet, self.wait = 0, self.wait * 2

    def scan(self, objects) -> None:
        for obj in objects:
            if type(obj) is list and obj and type(obj[0]) is dict and "action" in obj[0] and id(obj) not in self.lists:
                self.lists[id(obj)] = (obj, _Columns())

    def drain(self) -> bool:
        grew = False
        for lst, columns in self.lists.values():
            if lst:
                items = lst[:]
                del lst[:]
                columns.add(items, self.sites, loading=True)
                self.events += len(items)
                grew = True
        if grew and self.progress is not None:
            self.progress(f"{self.events:,} events read")
        return grew


@dataclass
class DeviceTrace:
    """One device's events in recording order: numpy columns, sites numbered into :attr:`Snapshot.sites`."""

    action: np.ndarray  # uint8, index into ACTIONS (255: an action this lab does not know)
    addr: np.ndarray  # uint64 (an oom event's device_free)
    size: np.ndarray  # int64 bytes
    time_us: np.ndarray  # int64 µs since the epoch (0 where the snapshot has no times)
    site: np.ndarray  # int32, -1: no stack
    malformed: int = 0
    unknown_actions: dict = field(default_factory=dict)
    quirks: dict = field(default_factory=dict)  # why events were left out or changed → how many

    def __len__(self) -> int:
        return len(self.action)

    @classmethod
    def from_columns(cls, c: _Columns) -> DeviceTrace:
        return cls(
            np.frombuffer(c.action, np.uint8).copy(),
            np.frombuffer(c.addr, np.uint64).copy(),
            np.frombuffer(c.size, np.int64).copy(),
            np.frombuffer(c.time_us, np.int64).copy(),
            np.frombuffer(c.site, np.int32).copy(),
            c.malformed,
            dict(c.unknown_actions),
            dict(c.quirks),
        )


@dataclass
class Block:
    address: int
    size: int
    requested_size: int
    state: str  # active_allocated | active_pending_free | active_awaiting_free | inactive
    site: int


@dataclass
class Segment:
    device: int
    address: int
    total_size: int
    stream: int
    segment_type: str
    expandable: bool
    blocks: list[Block]


@dataclass
class Snapshot:
    traces: dict[int, DeviceTrace]
    segments: list[Segment]
    sites: list[tuple[Frame, ...]]
    settings: dict
    source: dict  # format, bytes read
    other_devices: list[int] = field(default_factory=list)  # devices of the file not loaded here
    quirks: dict = field(default_factory=dict)  # segments and blocks left out or read the old way (why → how many)

    def devices(self) -> list[int]:
        return sorted(set(self.traces) | {s.device for s in self.segments} | set(self.other_devices))

    def busiest_device(self) -> int:
        """The device that held the most memory: the most reserved at the dump, or in its trace's segments at their
        height (reserved from the trace's own segment events), whichever is more; of equal memory, the one with the
        most events. A device whose events all freed what they took (a second GPU the process touched, recorded
        because history was switched on there) is not the one the user means: a two-device snapshot opened on the
        device with nothing in it read peak, baseline and live 0 B."""
        reserved: dict[int, int] = {}
        for s in self.segments:
            reserved[s.device] = reserved.get(s.device, 0) + s.total_size
        held = {d: max(reserved.get(d, 0), self._trace_height(d)) for d in self.devices()}
        if not held:
            return 0
        return max(held, key=lambda d: (held[d], len(self.traces.get(d) or ()), -d))

    def _trace_height(self, device: int) -> int:
        """The most memory ``device``'s trace had reserved at once, counted from its own segment events (what it
        reserved before recording unknown: from zero); 0 without a trace."""
        trace = self.traces.get(device)
        if trace is None or not len(trace):
            return 0
        grow = np.isin(trace.action, (CODE["segment_alloc"], CODE["segment_map"]))
        shrink = np.isin(trace.action, (CODE["segment_free"], CODE["segment_unmap"]))
        change = np.where(grow, trace.size, 0) - np.where(shrink, trace.size, 0)
        return max(int(np.cumsum(change).max()), 0)


def read_snapshot(path, progress: Callable[[str], None] | None = None) -> Snapshot:
    """Read a snapshot file (pickle of any protocol, JSON, gzip of either); InputRefused names the problem.
    ``progress`` hears how many events a pickle has given so far, as it streams."""
    with open_input(path, WHAT) as stream:
        head = stream.peek(64)[:64]
        if not head:
            raise InputRefused(f"the {WHAT} is empty (0 bytes)")
        sites = Sites()
        if is_pickle(head):
            drain = _Drain(sites, progress)
            top = load_pickle_stream(stream, MAX_PICKLE_BYTES, what=WHAT, path=path, on_chunk=drain)
            drain.drain()
            snapshot = _build(
                top, sites, drain.lists, {"format": f"pickle (protocol {head[1] if head[0] == 0x80 else '0-1'})"}
            )
        elif head.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] in (b"{", b"["):
            data = loads_json(read_limited(stream, MAX_JSON_BYTES, WHAT), what=WHAT)  # gunzipped by open_input
            snapshot = _build(data, sites, {}, {"format": "JSON"})
        else:
            raise InputRefused(f"this is not a {WHAT}: it is neither a pickle nor JSON (it starts with {head[:8]!r})")
    sites.forget_identities()
    return snapshot


def _build(top: Any, sites: Sites, drained: dict, source: dict) -> Snapshot:
    if isinstance(top, list) and all(isinstance(s, dict) and "total_size" in s for s in top):
        top = {"segments": top, "device_traces": []}  # torch.cuda.memory_snapshot(): segments only
    if (
        not isinstance(top, dict)
        or not isinstance(top.get("segments"), list)
        or not isinstance(top.get("device_traces", []), list)
    ):
        kind = type(top).__name__
        keys = ", ".join(map(_text, list(top)[:6])) if isinstance(top, dict) else ""
        raise InputRefused(
            f"this is not a {WHAT}: expected a dict with 'segments' and 'device_traces' "
            f"(what torch.cuda.memory._dump_snapshot writes), found a {kind}" + (f" with keys {keys}" if keys else "")
        )
    # Taken before any event is read: an event dict is emptied once read, and a file may give the top dict itself
    # (or the settings) as an event by fetching its memo slot again.
    segments_in, settings = top["segments"], top.get("allocator_settings")
    traces: dict[int, DeviceTrace] = {}
    for device, events in enumerate(top.get("device_traces") or []):
        if not isinstance(events, list):
            raise InputRefused(
                f"this is not a {WHAT}: device_traces[{device}] is a {type(events).__name__}, not a list of events"
            )
        known = drained.get(id(events))
        columns = known[1] if known else _Columns()
        columns.add(events, sites)
        traces[device] = _in_time_order(DeviceTrace.from_columns(columns))
    quirks: dict[str, int] = {}
    segments = [seg for i, s in enumerate(segments_in) if (seg := _segment(s, i, sites, quirks)) is not None]
    total = sum(float(t.size.sum(dtype=np.float64)) for t in traces.values())
    total += sum(float(s.total_size) + sum(float(b.size) for b in s.blocks) for s in segments)
    if total >= MAX_TOTAL:
        raise InputRefused(
            f"the sizes in this {WHAT} add up to {total:,.0f} bytes, past the {MAX_TOTAL:,} that any sum of them "
            "is allowed (it is not a real snapshot)"
        )
    settings = (
        {_text(k): v for k, v in settings.items() if isinstance(v, (str, int, float, bool))}
        if isinstance(settings, dict)
        else {}
    )
    return Snapshot(traces, segments, sites.stacks, settings, source, quirks=quirks)


def _in_time_order(trace: DeviceTrace) -> DeviceTrace:
    """Times that go back are moved up to the latest before them (and counted): a duration or an x axis never
    runs backwards."""
    t = trace.time_us
    if len(t) > 1:
        latest = np.maximum.accumulate(t)
        back = int(np.count_nonzero(latest != t))
        if back:
            trace.time_us = latest
            trace.quirks["an event's time_us is before the event before it (moved up to it)"] = back
    return trace


def _in_range(value: Any, top: int) -> bool:
    return type(value) is int and 0 <= value < top


def _segment(s: Any, i: int, sites: Sites, quirks: dict[str, int]) -> Segment | None:
    if not isinstance(s, dict) or not isinstance(s.get("address"), int) or not isinstance(s.get("total_size"), int):
        raise InputRefused(f"this is not a {WHAT}: segments[{i}] has no integer address and total_size")
    device = s.get("device", 0)
    if not (_in_range(s["address"], MAX_ADDRESS) and _in_range(s["total_size"], MAX_SIZE)) or (
        isinstance(device, int) and not 0 <= device <= MAX_DEVICE
    ):
        why = "a segment's address, total_size or device is negative or too large (segment left out)"
        quirks[why] = quirks.get(why, 0) + 1
        return None
    blocks, offset = [], s["address"]
    for b in s.get("blocks") or []:
        if not isinstance(b, dict) or not isinstance(b.get("size"), int):
            raise InputRefused(f"this is not a {WHAT}: a block of segments[{i}] has no integer size")
        address = b["address"] if isinstance(b.get("address"), int) else offset  # old torch: blocks tile the segment
        requested, frames = b.get("requested_size"), b.get("frames")
        if "history" in b and "frames" not in b:
            requested, frames = _from_history(b["history"], quirks)
        if not (_in_range(b["size"], MAX_SIZE) and _in_range(address, MAX_ADDRESS)) or (
            isinstance(requested, int) and not 0 <= requested < MAX_SIZE
        ):
            why = "a block's address, size or requested_size is negative or too large (block left out)"
            quirks[why] = quirks.get(why, 0) + 1
            continue
        blocks.append(
            Block(
                address,
                b["size"],
                requested if isinstance(requested, int) else b["size"],
                _text(b.get("state", "")),
                sites.of(frames),
            )
        )
        offset = address + b["size"]
    stream = s.get("stream", 0)
    return Segment(
        device if isinstance(device, int) else 0,
        s["address"],
        s["total_size"],
        stream if isinstance(stream, int) and -(2**63) <= stream < 2**63 else 0,
        _text(s.get("segment_type", "")),
        bool(s.get("is_expandable", False)),
        blocks,
    )


OLD_BLOCKS = "a block written by an older torch (2.0: 'history', no 'address'): its requested size and stack read from its first history entry, its address from its place in the segment"


def _from_history(history: Any, quirks: dict[str, int]) -> tuple[Any, Any]:
    """A torch 2.0 block's requested size and stack: its first history entry's, as torch's memory_viz reads
    them (``_block_extra_legacy``); counted, so the report can say the file is of the older format."""
    quirks[OLD_BLOCKS] = quirks.get(OLD_BLOCKS, 0) + 1
    first = history[0] if isinstance(history, list) and history and isinstance(history[0], dict) else {}
    return first.get("real_size"), first.get("frames")

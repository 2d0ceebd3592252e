"""Reading one job's flight-recorder dumps: every rank's last collectives, as torch's c10d recorder writes them.

torch keeps the last ``TORCH_FR_BUFFER_SIZE`` collectives of each process group in a ring buffer and writes it
per rank (``TORCH_FR_DUMP_TEMP_FILE`` + rank, on a watchdog timeout or on demand) as a pickle of plain data
(``_dump_fr_trace``) or as JSON (``_dump_fr_trace_json``: no stack frames, the group status as strings). Both
forms of the dump versions torch writes (2.10 today; earlier 2.x dumps lack some fields, which are then left
unknown, never guessed) are read here: the pickle only through the lab's class-refusing, memory-guarded
unpickler, the JSON strict and with its containers counted, each file within the ``fr_*`` limits of :class:`core.limits.Limits`.
A field torch writes as a string that is anything else is refused, naming the field, never turned into text; what
reading the entries walks is counted over the whole import (:class:`Tally`), so a list that many entries share, or
millions of entries repeated by memo fetches across several files, cost what their bytes allow and no more.

A dump does not name its own rank: like torch's analyser, the rank is the number the file name ends with
(``nccl_trace_rank_3``, ``rank3.json``), and every file must share one prefix. Files that cannot be one job's
ranks — a rank twice, other recorder versions, groups of one name with other members or descriptions, or
buffers whose times lie further apart than the collectives' timeout allows — are refused, naming the files.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import chain
from operator import itemgetter
from pathlib import Path
from typing import Any

from core.errors import ConfigError, InputRefused
from core.import_budget import read_bytes
from core.intake import cut_name, is_pickle, loads_json, open_input, read_json_input
from core.limits import LIMITS
from core.pickle_stream import load_pickle_stream
from core.workload.files import job_files

WHAT = "flight-recorder dump"
_SUFFIXES = re.compile(r"(\.(json|pickle|pkl|gz))+$", re.I)
_RANK = re.compile(r"^(.*?)(\d+)$")
_P2P_PEER = re.compile(r"(\d+)\s*(->|<-)\s*(\d+)")
MAX_RANK = 2**31 - 1


@dataclass(slots=True)
class Entry:
    """One recorded collective or point-to-point op of one rank, with the fields the matching reads."""

    record_id: int  # the rank's count of ops recorded, from 0: an oldest above 0 means the ring buffer wrapped
    group: str  # the process group's name: the same on every rank (its pg_id is a per-process counter)
    group_desc: str
    pg_id: int | None
    seq: int  # collective_seq_id, or p2p_seq_id for a point-to-point op
    p2p: bool
    op: str  # "all_reduce", "send", … (the profiling name less its backend)
    backend: str  # "nccl", "gloo", …
    peer: tuple[int, int] | None  # (source, destination) of a send or recv, as the profiling name says
    input_sizes: tuple[tuple[int, ...], ...]
    input_dtypes: tuple[str, ...] | None  # None: the dump version records none
    state: str  # scheduled | started | completed (NCCL reads the GPU's events; gloo leaves "scheduled")
    created_ns: int | None  # wall clock, ns since the epoch
    timeout_ms: int | None
    frames: tuple[str, ...]  # "file:line name", innermost first; empty in JSON dumps


@dataclass
class Dump:
    """One rank's dump: its entries in record order and what it says of its groups."""

    rank: int
    file: str
    version: str
    entries: list[Entry]
    group_ranks: dict[str, tuple[int, ...]]  # name → member ranks, where pg_config lists them
    group_descs: dict[str, str]
    status: dict[str, dict[str, int]]  # group name → last_enqueued / last_started / last_completed collective
    quirks: dict[str, int] = field(default_factory=dict)


def dump_files(paths: list[str] | tuple[str, ...]) -> list[Path]:
    """The dumps of an import (:func:`core.workload.files.job_files`)."""
    return job_files(paths, "dump", "one job's dumps")


def rank_of(path: Path) -> tuple[str, int]:
    """(prefix, rank) from a dump's name: the number it ends with, less .json/.pickle/.gz."""
    m = _RANK.match(_SUFFIXES.sub("", path.name))
    if not m:
        raise ConfigError(
            f"{path.name}: no rank in the name: a dump is named by the rank it ends with (TORCH_FR_DUMP_TEMP_FILE "
            "+ rank, e.g. nccl_trace_rank_3)"
        )
    digits = m.group(2).lstrip("0") or "0"
    if len(digits) > len(str(MAX_RANK)) or int(digits) > MAX_RANK:
        raise ConfigError(
            f"{path.name}: rank {cut_name(digits, 20)} in the name is past {MAX_RANK:,}, the highest rank a job can "
            "have (torch keeps a rank in a 32-bit int)"
        )
    return m.group(1), int(digits)


def load(path: Path) -> Any:
    """A dump's plain data, pickle or JSON (gzip of either), by its first bytes."""
    with open_input(path, WHAT) as stream:
        if is_pickle(stream.peek(2)[:2]):
            return load_pickle_stream(stream, LIMITS.fr_dump_bytes, what=WHAT, path=path, max_depth=None)
    return loads_json(read_json_input(path, LIMITS.fr_dump_bytes, LIMITS.fr_json_containers, WHAT), what=WHAT)


class Tally:
    """What reading one import's dumps has taken, over all its files: entries (at most ``fr_entries``) and the items
    of their fields walked (shapes' dimensions, dtypes, frames: at most ``pickle_tree_objects`` + its per-byte share
    of the bytes the import read, a gzip counted at what it may inflate to). A list that many entries share by memo
    fetches counts each time it is read: 1 M fetches of one entry in each of eight 4 KiB gzip dumps took 2.6 GiB."""

    def __init__(self) -> None:
        self.entries = 0
        self.items = 0
        self.bytes = 0
        self.limit = LIMITS.pickle_tree_objects

    def read(self, path: Path) -> None:
        self.bytes += read_bytes(path)
        self.limit = LIMITS.pickle_tree_objects + LIMITS.pickle_tree_objects_per_byte * self.bytes

    def add_entries(self, count: int) -> None:
        self.entries += count
        if self.entries > LIMITS.fr_entries:
            raise InputRefused(
                f"the dumps of this import hold {self.entries:,} entries so far, more than the {LIMITS.fr_entries:,} "
                "limit on one import (fr_entries, over all its files)"
            )

    def walk(self, items: int) -> None:
        self.items += items
        if self.items > self.limit:
            raise InputRefused(
                f"reading its entries walks more than {self.limit:,} items (shapes' dimensions, dtypes, frames; a list "
                f"shared by many entries counted each time it is read), past the pickle_tree_objects limit for the "
                f"{self.bytes:,} bytes this import read ({LIMITS.pickle_tree_objects:,} + "
                f"{LIMITS.pickle_tree_objects_per_byte} a byte)"
            )


def read_dump(path: Path, tally: Tally | None = None) -> Dump:
    """One rank's dump read and checked, counted in ``tally`` (one per import: the caps hold over all its files);
    anything that is not a dump is refused naming the file."""
    _, rank = rank_of(path)
    tally = tally or Tally()
    try:
        tally.read(path)
        data = load(path)
        return _parse(data, rank, path.name, tally)
    except InputRefused as exc:
        raise ConfigError(f"{path.name}: {exc}") from None


def _refuse(why: str) -> InputRefused:
    return InputRefused(f"not a {WHAT}: {why}")


_INT_TEXT = re.compile(r"-?\d{1,20}")


def _int(value: Any) -> int | None:
    """An integer field (the JSON form writes the group status as strings, and 0 for a time it has none)."""
    if type(value) is int:
        return value
    if isinstance(value, str) and _INT_TEXT.fullmatch(value):
        return int(value)
    return None


def _string(value: Any, field: str, limit: int = LIMITS.name_chars) -> str:
    """A field torch writes as a string, at most ``limit`` characters; anything else is refused naming the field,
    never turned into text (a list that holds itself, or 40 levels of shared ones, prints forever)."""
    if type(value) is not str:
        raise _refuse(f"{field} is {_kind(value)}, not a string")
    return value if len(value) <= limit else value[:limit]


_SCALARS = {str, int, float, bool, type(None)}


def _all_of(items: Iterable, kind: type) -> bool:
    """Whether every item is exactly of ``kind`` (a bool is no int), in one pass in C."""
    return set(map(type, items)) <= {kind}


def _kind(value: Any) -> str:
    return "missing" if value is None else f"a {type(value).__name__}"


def _number(value: Any, field: str) -> int | None:
    """:func:`_int` of a field torch writes as a number (text in the JSON form); a container is refused."""
    if type(value) in (list, tuple, dict, set, frozenset):
        raise _refuse(f"{field} is {_kind(value)}, not a number")
    return _int(value)


def _line(value: Any) -> str:
    """A frame's line: a number or text, '?' where it has none."""
    if value is None:
        return "?"
    if type(value) is int and abs(value) < 10**20:
        return str(value)
    return _string(value, "a frame's line")


class _Shared:
    """What many entries repeat (stacks, sizes, dtypes), built once and shared: a stack by the identities of its
    frame dicts (the pickle shares one dict between the entries whose stacks hold it; every one is alive while
    the dump is read, so identities are unique), equal tuples as one object."""

    def __init__(self) -> None:
        self.stacks: dict[tuple[int, ...], tuple[str, ...]] = {}
        self.tuples: dict[tuple, tuple] = {}
        self.names: dict[str, tuple[str, str, tuple[int, int] | None]] = {}
        self.fields: dict[tuple, tuple] = {}
        self.last: _Last | None = None

    def one(self, value: tuple) -> tuple:
        return self.tuples.setdefault(value, value)

    def sizes(self, value: Any, tally: Tally) -> tuple[tuple[int, ...], ...]:
        """Input shapes: lists of whole numbers (anything else refused), read once per distinct field: every entry
        repeats the same few. Their dimensions are counted before they are read."""
        if value is None:
            return ()
        if type(value) is not list:
            raise _refuse(f"an entry's input_sizes is {_kind(value)}, not a list of shapes")
        tally.walk(len(value))
        if not _all_of(value, list):
            raise _refuse("an entry's input_sizes is not a list of shapes (lists of whole numbers)")
        tally.walk(sum(map(len, value)))
        raw = tuple(map(tuple, value))
        if not _all_of(chain.from_iterable(raw), int):
            raise _refuse("an entry's input_sizes is not a list of shapes (lists of whole numbers)")
        known = self.fields.get(raw)
        if known is None:
            known = self.fields[raw] = self.one(raw)
        return known

    def name(self, name: str) -> tuple[str, str, tuple[int, int] | None]:
        """A profiling name ("gloo:all_reduce", "nccl:send 0->1") as its backend, op and point-to-point pair."""
        known = self.names.get(name)
        if known is None:
            backend, _, op = name.partition(":")
            if not op:
                backend, op = "", name
            op, _, rest = op.strip().partition(" ")
            peer = None
            if rest and (peer_match := _P2P_PEER.search(rest)):
                a, arrow, b = int(peer_match.group(1)), peer_match.group(2), int(peer_match.group(3))
                peer = (a, b) if arrow == "->" else (b, a)
            known = self.names[name] = (backend[:64], op[: LIMITS.name_chars], peer)
        return known

    def dtypes(self, value: Any, tally: Tally) -> tuple[str, ...] | None:
        """None: the dump version records none."""
        if value is None:
            return None
        if type(value) is not list:
            raise _refuse(f"an entry's input_dtypes is {_kind(value)}, not a list of strings")
        tally.walk(len(value))
        raw = tuple(value)
        if not _all_of(raw, str):
            raise _refuse("an entry's input_dtypes is not a list of strings")
        known = self.fields.get(raw)
        if known is None:
            known = self.fields[raw] = self.one(tuple(d[:64] for d in raw))
        return known

    def frames(self, value: Any, tally: Tally) -> tuple[str, ...]:
        """A stack as "file:line name" lines, at most ``frames_per_stack``."""
        if value is None:
            return ()
        if type(value) is not list:
            raise _refuse(f"an entry's frames are {_kind(value)}, not a list")
        value = value[: LIMITS.frames_per_stack]
        tally.walk(len(value))
        key = tuple(map(id, value))
        lines = self.stacks.get(key)
        if lines is None:
            lines = self.stacks[key] = self.one(tuple(map(_frame, value)))
        return lines


def _frame(f: Any) -> str:
    """One frame as "file:line name"."""
    if type(f) is not dict:
        raise _refuse(f"a frame is {_kind(f)}, not a dict")
    if not _all_of(f, str) or not set(map(type, f.values())) <= _SCALARS:
        raise _refuse("a frame is not a dict of strings and numbers (filename, line, name)")
    get = f.get
    file, name = get("filename"), get("name")
    file = "?" if file is None else _string(file, "a frame's filename")
    name = "?" if name is None else _string(name, "a frame's name")
    return f"{file}:{_line(get('line'))} {name}"[: LIMITS.name_chars]


def _ranks(text: Any, group: str, tally: Tally) -> tuple[int, ...]:
    """pg_config's ranks: "[0, 1, 2]" (a string in both forms), each rank once and at most :data:`MAX_RANK`. The
    ranks a group declares are what the analysis makes rows of, so their count is held to the bytes that can write
    them down all different (a 6 KB gzip of '[0, 0, …]' declared 2 M ranks: 33 s, 740 MB and a 17 MB stored run)."""
    if isinstance(text, (list, str)):
        tally.walk(len(text))
    if isinstance(text, list):
        ranks = tuple(r for r in text if type(r) is int)
    elif isinstance(text, str) and _RANKS_TEXT.fullmatch(text):
        inside = text[1:-1]
        count = inside.count(",") + 1 if inside.strip() else 0
        if count and len(inside) < _least_text(count):
            raise _refuse(
                f"pg_config lists {count:,} ranks in group {group!r} in {len(inside):,} characters, fewer than it "
                "takes to write that many different ranks (a group holds each rank once)"
            )
        try:
            ranks = tuple(map(int, inside.split(","))) if count else ()
        except ValueError:  # an empty item, or a number of thousands of digits
            return ()
    else:
        return ()
    if ranks and (min(ranks) < 0 or max(ranks) > MAX_RANK):
        raise _refuse(f"pg_config lists a rank past 0 to {MAX_RANK:,} in group {group!r}")
    if len(set(ranks)) < len(ranks):
        raise _refuse(f"pg_config lists a rank twice in group {group!r} (a group holds each rank once)")
    return ranks


_RANKS_TEXT = re.compile(r"\[[\d\s,]*\]")


def _least_text(count: int) -> int:
    """The fewest characters ``count`` different ranks are written in: 0 to count - 1, separated by commas."""
    total, digits, first = count - 1, 1, 0
    while first < count:
        last = min(count, 10**digits)
        total += (last - first) * digits
        first, digits = last, digits + 1
    return total


# The fields an entry repeats from the one before it, in most dumps (a training loop's all_reduces): only the
# ids and the time differ. They are compared with those of the last entry read the long way, which were checked to
# be strings, numbers and flat lists: comparing stops at the first item that differs in type, so a comparison costs
# at most what that entry's fields hold (counted again in the tally), whatever the new entry holds (two lists 40
# levels deep of [x, x] took 2^40 steps to compare). Its frames are dicts of strings and numbers (:func:`_frame`), at
# most ``frames_per_stack`` of them: an entry with a longer stack is never compared with.
_REPEATED = itemgetter(
    "process_group", "profiling_name", "is_p2p", "input_sizes", "input_dtypes", "state", "frames", "pg_id", "timeout_ms"
)


@dataclass(slots=True)
class _Last:
    """The last entry read the long way: its repeated fields as compared, and what comparing with them may walk."""

    repeated: tuple
    entry: Entry
    items: int


def _entry(e: Any, shared: _Shared, quirks: dict[str, int], tally: Tally) -> Entry | None:
    """One entry of a dump (None, counted as a quirk, where it is not one). Most repeat the last entry read the long
    way in all but their ids and time: they are built from it, at the cost of the items comparing with it walks."""
    if type(e) is not dict:
        quirks["an entry is not a dict"] = quirks.get("an entry is not a dict", 0) + 1
        return None
    get = e.get
    seq_c, seq_p, record = get("collective_seq_id"), get("p2p_seq_id"), get("record_id")
    if type(seq_c) is not int or type(seq_p) is not int or type(record) is not int:  # the JSON form: text
        seq_c, seq_p, record = _int(seq_c), _int(seq_p), _int(record)
    created = get("time_created_ns")
    created = (created if type(created) is int else _int(created)) or None
    try:
        repeated = _REPEATED(e)
    except KeyError:  # a field this dump version lacks
        repeated = None
    last = shared.last
    if (
        last is not None
        and repeated == last.repeated
        and seq_c is not None
        and seq_p is not None
        and record is not None
    ):
        tally.items += last.items
        if tally.items > tally.limit:
            tally.walk(0)
        p = last.entry
        return Entry(
            record, p.group, p.group_desc, p.pg_id, seq_p if p.p2p else seq_c, p.p2p, p.op, p.backend, p.peer,
            p.input_sizes, p.input_dtypes, p.state, created, p.timeout_ms, p.frames,
        )  # fmt: skip
    return _new_entry(e, (seq_c, seq_p, record, created), repeated, shared, quirks, tally)


def _new_entry(
    e: dict, ids: tuple[int | None, ...], repeated: tuple | None, shared: _Shared, quirks: dict[str, int], tally: Tally
) -> Entry | None:
    """An entry that repeats none before it (or not all of its ids are known), read the long way: every field
    checked, and kept as the last one read where a later entry may be compared with it."""
    seq_c, seq_p, record, created = ids
    get = e.get
    group, name = get("process_group"), get("profiling_name")
    if name is not None:
        _string(name, "an entry's profiling_name")
    if (
        not isinstance(group, (list, tuple))
        or len(group) != 2
        or name is None
        or seq_c is None
        or seq_p is None
        or record is None
    ):
        quirks["an entry lacks its group, name or sequence ids"] = (
            quirks.get("an entry lacks its group, name or sequence ids", 0) + 1
        )
        return None
    backend, op, peer = shared.name(name)
    flag = get("is_p2p")
    if flag is not None and type(flag) is not bool:
        raise _refuse(f"an entry's is_p2p is {_kind(flag)}, not true or false")
    p2p = flag if type(flag) is bool else op in ("send", "recv")
    timeout, state, frames = get("timeout_ms"), get("state"), get("frames")
    items = tally.items
    entry = Entry(
        record_id=record,
        group=_string(group[0], "an entry's group name"),
        group_desc=_string(group[1], "an entry's group description"),
        pg_id=_number(get("pg_id"), "an entry's pg_id"),
        seq=seq_p if p2p else seq_c,
        p2p=p2p,
        op=op,
        backend=backend,
        peer=peer,
        input_sizes=shared.sizes(get("input_sizes"), tally),
        input_dtypes=shared.dtypes(get("input_dtypes"), tally),
        state=(_string(state, "an entry's state", 32) if state is not None else "") or "scheduled",
        created_ns=created,
        timeout_ms=timeout if type(timeout) is int else _number(timeout, "an entry's timeout_ms"),
        frames=shared.frames(frames, tally),
    )
    stack = frames or ()
    if repeated is not None and len(stack) <= LIMITS.frames_per_stack:  # every frame read: dicts of str and int
        walked = tally.items - items + len(entry.group) + len(entry.group_desc) + len(name) + sum(map(len, stack))
        shared.last = _Last(repeated, entry, 1 + walked)
    else:
        shared.last = None
    return entry


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _parse(data: Any, rank: int, file: str, tally: Tally) -> Dump:
    if not isinstance(data, dict) or "version" not in data:
        raise _refuse("no version (a dump is a dict with version, pg_config and entries)")
    version = _string(data["version"], "its version")
    if not re.fullmatch(r"\d+\.\d+", version):
        raise _refuse(f"its version is {cut_name(version, 40)!r}, not MAJOR.MINOR")
    if not version.startswith("2."):
        raise _refuse(f"recorder version {version}: this reader knows the 2.x dumps of torch 2.x")
    raw_entries = data.get("entries", [])  # the JSON form leaves it out when the buffer is empty
    if not isinstance(raw_entries, list):
        raise _refuse("its entries are not a list")
    tally.add_entries(len(raw_entries))  # before any is read
    quirks: dict[str, int] = {}
    shared = _Shared()
    entries = [x for e in raw_entries if (x := _entry(e, shared, quirks, tally)) is not None]
    entries.sort(key=lambda x: x.record_id)
    config = _dict(data.get("pg_config"))
    group_ranks, group_descs = {}, {}
    for key, info in config.items():
        name = _string(key, "a group name in pg_config")
        if isinstance(info, dict) and (ranks := _ranks(info.get("ranks"), cut_name(name, 40), tally)):
            group_ranks[name] = ranks
            group_descs[name] = _string(
                info.get("desc", ""), f"the description of group {cut_name(name, 40)!r} in pg_config"
            )
    names = {x.pg_id: x.group for x in entries if x.pg_id is not None}  # pg_status is keyed by pg_id
    status = {}
    raw_status = _dict(data.get("pg_status"))
    for pg_id, s in raw_status.items():
        key = _int(pg_id)
        if key in names and isinstance(s, dict):
            status[names[key]] = {
                k: v for k in ("last_enqueued_collective", "last_started_collective", "last_completed_collective")
                if (v := _number(s.get(k), f"pg_status's {k}")) is not None
            }  # fmt: skip
    return Dump(rank, file, version, entries, group_ranks, group_descs, status, quirks)


def check_names(files: list[Path]) -> None:
    """Refuse files of more than one name prefix before any is read: one job's dumps share its prefix."""
    prefixes: dict[str, list[str]] = {}
    for path in files:
        prefixes.setdefault(rank_of(path)[0], []).append(path.name)
    if len(prefixes) > 1:
        named = "; ".join(f"{p or '(none)'}: {', '.join(names[:3])}" for p, names in prefixes.items())
        raise ConfigError(f"dumps of more than one name (TORCH_FR_DUMP_TEMP_FILE): {named}; give one job's dumps")


def check_one_job(dumps: list[Dump]) -> None:
    """Refuse dumps that cannot be the ranks of one job, naming the files."""
    by_rank: dict[int, str] = {}
    for d in dumps:
        if d.rank in by_rank:
            raise ConfigError(f"{by_rank[d.rank]} and {d.file} are both rank {d.rank}: one job has each rank once")
        by_rank[d.rank] = d.file
    first = dumps[0]
    for d in dumps[1:]:
        if d.version != first.version:
            raise ConfigError(
                f"ranks of two different jobs: {first.file} is recorder version {first.version}, {d.file} {d.version}"
            )
    members: dict[str, tuple[tuple[int, ...], str, str]] = {}
    for d in dumps:
        for name, ranks in d.group_ranks.items():
            seen = members.setdefault(name, (ranks, d.group_descs[name], d.file))
            if (seen[0], seen[1]) != (ranks, d.group_descs[name]):
                raise ConfigError(
                    f"ranks of two different jobs: group {name!r} is {seen[1]!r} of ranks {list(seen[0])} in "
                    f"{seen[2]}, {d.group_descs[name]!r} of ranks {list(ranks)} in {d.file}"
                )
    _check_times(dumps)


def _check_times(dumps: list[Dump]) -> None:
    """Ranks of one job wait for each other in every collective: one rank's whole buffer cannot end before
    another's begins by more than the longest timeout (the waiting rank would have been stopped)."""
    spans = []
    for d in dumps:
        times = [x.created_ns for x in d.entries if x.created_ns]
        if times:
            spans.append((min(times), max(times), d.file))
    timeouts = [x.timeout_ms for d in dumps for x in d.entries if x.timeout_ms]
    slack_ns = (max(timeouts) if timeouts else 30 * 60 * 1000) * 1_000_000
    if not spans:
        return
    earliest_end = min(spans, key=lambda s: s[1])
    latest_start = max(spans, key=lambda s: s[0])
    if latest_start[0] - earliest_end[1] > slack_ns:
        gap_s = (latest_start[0] - earliest_end[1]) / 1e9
        raise ConfigError(
            f"ranks of two different jobs: {earliest_end[2]}'s last entry was recorded {gap_s:,.0f} s before "
            f"{latest_start[2]}'s first, longer than the collectives' timeout ({slack_ns / 1e9:,.0f} s)"
        )

"""The opcode check a pickle from outside passes before the unpickler acts on any of its bytes.

:class:`PickleGuard` reads the opcodes as they stream past and refuses the few that would make the unpickler
spend far more than the file holds: memory (a memo index, a declared length, a pile of pending values, past the
limits of :class:`core.limits.Limits`) and time (hashing shared tuples, :class:`_TupleCost`). Most of a file is
matched by regular expressions in C — runs of opcodes that only push, and whole filled containers nested three
deep (a snapshot's events, a flight-recorder dump's entries) — and only what they cannot match is read in Python,
so the check costs about what unpickling the same bytes does (a regular expression takes a step per opcode, as the
unpickler does). :mod:`core.pickle_stream` feeds it.
"""

from __future__ import annotations

import functools
import pickletools
import re
from collections.abc import Callable

from core.errors import InputRefused
from core.intake import DEFAULT_MAX_DEPTH
from core.limits import LIMITS, Limits
from core.units import exact_size_text


def _opcode_tables() -> tuple[list[int | None], list[tuple[int, int, int]]]:
    """Per opcode byte: the shape of its argument, and its stack effect as (pops, pushes, pops-to-mark)."""
    shape: list[int | None] = [None] * 256  # None: no such opcode
    effect = [(0, 0, 0)] * 256
    for op in pickletools.opcodes:
        code = ord(op.code)
        arg = op.arg
        if arg is None:
            shape[code] = 0
        elif arg.n >= 0:
            shape[code] = arg.n
        elif arg.n == pickletools.TAKEN_FROM_ARGUMENT1:
            shape[code] = _LEN1
        elif arg.n in (pickletools.TAKEN_FROM_ARGUMENT4, pickletools.TAKEN_FROM_ARGUMENT4U):
            shape[code] = _LEN4
        elif arg.n == pickletools.TAKEN_FROM_ARGUMENT8U:
            shape[code] = _LEN8
        else:  # up to a newline (GLOBAL and INST: two lines)
            shape[code] = _LINES2 if arg.name.endswith("_pair") else _LINE
        before = [item.name for item in op.stack_before]
        to_mark = "mark" in before
        effect[code] = (before.index("mark") if to_mark else len(before), len(op.stack_after), int(to_mark))
    shape[ord(b"\x95")] = _FRAME  # FRAME: its 8-byte length covers opcodes that follow, read like any
    effect[0x94] = (0, 0, 0)  # MEMOIZE keeps the stack as it is (pickletools writes it as a pop and a push)
    return shape, effect


_LEN1, _LEN4, _LEN8, _FRAME, _LINE, _LINES2 = -1, -4, -8, -9, -10, -20
_SHAPE, _EFFECT = _opcode_tables()
_MARK, _STOP, _PUT, _LONG_BINPUT, _POP = ord("("), ord("."), ord("p"), ord("r"), ord("0")
_WIDTH = {_LEN1: 1, _LEN4: 4, _LEN8: 8, _FRAME: 8}
_GETS = frozenset(b"hjg")  # BINGET, LONG_BINGET, GET: a value fetched from the memo
_DUP, _SETITEM, _FROZENSET, _EMPTY_TUPLE = ord("2"), ord("s"), 0x91, ord(")")
_STORES = frozenset(b"pqr\x94")  # PUT, BINPUT, LONG_BINPUT, MEMOIZE: the value on top into the memo
_KEEPS = _STORES | frozenset(b"\x80\x95")  # and PROTO, FRAME: the stack as it is
_TUPLE_ITEMS = {0x85: 1, 0x86: 2, 0x87: 3, ord("t"): None, _FROZENSET: None}  # None: the values since the mark
_HASHING = frozenset(b"su\x90d")  # SETITEM(S), ADDITEMS, DICT: hash every key or element they take
_UNHASHABLE = frozenset(b"]}\x8f")  # EMPTY_LIST, EMPTY_DICT, EMPTY_SET: hashing fails at once
_EXPOSING = frozenset(b"eu\x901")  # APPENDS, SETITEMS, ADDITEMS, POP_MARK: the value below the mark is on top after
Cost = tuple[int, int]  # a value's (steps to hash it, negative where hashing fails there; tuples nested in it)
ATOM: Cost = (1, 0)
Region = tuple[int, bool, list[Cost]]  # where the plain pushes before an opcode start; at its mark; known before

# A run of opcodes that only push or keep the stack as it is, with small fixed arguments (or a length under 256):
# matched in C, so a snapshot of a gigabyte is checked at the speed of a regular expression. Each byte of the run
# counts as one pushed value (an over-count: a value takes at least one byte). Anything else (marks, pops, tuples,
# long strings, a memo index ≥ 2^24, a frame ≥ 1 MiB) is read below. DOTALL: "." is any byte.


# A memo fetch followed by a store (at once, or after a DUP, PROTO or FRAME, or after a MARK, which an APPENDS of
# nothing takes off again) copies what it fetched into another slot: read in Python, for the copy may be a tuple.
# No pickler writes it (they store only what they just built). A fetch that ends the bytes read so far waits for
# the next byte (read in Python, where the run stops).
_NOT_STORED = rb"(?=[^pqr\x94\x95\x802(])"


def _counted(between: bytes = b"") -> bytes:
    """A length byte n, then ``between``, then n bytes."""
    return rb"(?:" + b"|".join(re.escape(bytes([n])) + between + b".{%d}" % n for n in range(256)) + rb")"


@functools.cache
def _plain_op() -> bytes:
    """One opcode that only pushes or keeps the stack as it is, with its argument: alternatives that start with
    a literal byte, the commonest first (sre tries them in order)."""
    return (
        rb"(?:"
        + b"|".join(
            (
                rb"j.{4}" + _NOT_STORED,  # LONG_BINGET
                rb"h." + _NOT_STORED,  # BINGET
                rb"\x94",  # MEMOIZE
                rb"K.",  # BININT1
                rb"J.{4}",  # BININT
                rb"[}\]N)\x88\x89\x8f2]",  # EMPTY_DICT, EMPTY_LIST, NONE, EMPTY_TUPLE, NEWTRUE, NEWFALSE, EMPTY_SET, DUP
                rb"[\x8c\x8aCU]" + _counted(),  # SHORT_BINUNICODE, LONG1, SHORT_BINBYTES, SHORT_BINSTRING
                rb"[XB]" + _counted(b"\x00\x00\x00"),  # BINUNICODE, BINBYTES under 256 bytes
                rb"M.{2}",  # BININT2
                rb"q.",  # BINPUT
                rb"r.{3}\x00",  # LONG_BINPUT below 2^24
                rb"G.{8}",  # BINFLOAT
                rb"\x80.",  # PROTO
                rb"\x95.{2}[\x00-\x0f]\x00{5}",  # FRAME below 1 MiB
            )
        )
        + rb")"
    )


@functools.cache
def _possessive_holds() -> bool:
    """Whether this Python's ``re`` keeps a lookahead inside a possessive repeat. CPython before 3.11.5 (Debian 12's
    system Python is 3.11.2) skips it: ``(?:h.(?=[^pq])|K.)*+`` ran over a memo fetch that a store follows, and the
    guard read past the very opcodes it must see. Asked of the engine, not of its version number."""
    try:
        matched = re.match(rb"(?:h.(?=[^pq])|K.)*+", b"K\x01h\x01q\x02", re.DOTALL)
    except re.error:  # before 3.11 there are no possessive repeats at all
        return False
    return matched is not None and matched.end() == 2


@functools.cache
def _plain_run() -> re.Pattern[bytes]:
    """Compiled on the first pickle checked, not at import (~10 ms; most commands read none). Greedy where
    possessive repeats are broken: with nothing after the repeat, the first match is the same run."""
    return re.compile(_plain_op() + (rb"*+" if _possessive_holds() else rb"*"), re.DOTALL)


# A run of filled containers, as a pickler writes the items of a list of dicts (a snapshot's events, a dump's
# entries): each a MARK, at most GROUP_ITEMS[0] plain opcodes, tuples or filled inner containers (each a MARK, at
# most GROUP_ITEMS[1] of the same with containers of GROUP_ITEMS[2] inside), and its SETITEMS or APPENDS, then at
# most GROUP_LEAVES plain opcodes (the next container's push). Matched in one call, so the guard reads an entry at
# the speed of a regular expression, not of a Python loop turn per MARK. Each group leaves the stack as it found
# it, having held at most GROUP_PEAK values more meanwhile; what stays are the plain opcodes after each, and there
# are no more groups than "(" bytes in the run. A tuple inside (TUPLE1-3) is never followed by a store, a DUP, a
# frame or a MARK: it is used once, so the tuples of a group form trees whose hashing :class:`_TupleCost` bounds
# by the group's bytes; and a group starts only where no tuple built before it can be on top (its MARK would sit
# on that tuple, and a SETITEMS with nothing to set would put it back on top).
GROUP_ITEMS = (2_000, 1_000, 1_000)
GROUP_LEAVES = 4
GROUP_PEAK = sum(GROUP_ITEMS) + len(GROUP_ITEMS) + GROUP_LEAVES


@functools.cache
def _group_run() -> re.Pattern[bytes]:
    op = _plain_op()
    tup = rb"[\x85-\x87](?![\x80\x94\x95qr2(])"  # TUPLE1-3, used once
    level = b""
    for n in reversed(GROUP_ITEMS):  # the innermost container first
        level = rb"\((?:" + op + b"|" + tup + (b"|" + level if level else b"") + rb"){0,%d}+[ue]" % n
    return re.compile(rb"(?:" + level + rb"(?:" + op + rb"){0,%d}+)++" % GROUP_LEAVES, re.DOTALL)


def _no_group(_buf: bytes, _pos: int) -> None:
    """No group matched: the guard reads the opcodes one by one."""


class _TupleCost:
    """What hashing can cost the unpickler. It hashes every dict key and set element, a tuple through every level
    (Python caches no tuple's hash): 40 tuples of two memo fetches each, a 332-byte file, take 2^40 steps; a
    million nested ones overflow the C stack. Lists and dicts are never hashed (hashing one fails), and what reads
    the result walks it by identity, so hashing is the only place where shared objects cost more than their bytes.

    Each value counts as a :data:`Cost`. A memo fetch adds a reference, not a copy: it costs what the tuple stored
    in its slot costs (``slots``, where the store names its slot) or what the costliest tuple stored by MEMOIZE
    costs (``unnamed``: its slot is the count of slots filled, which is not followed here). Only a tuple makes either
    grow, by being stored while it is on top of the stack (``top``): every opcode that can put one there — a tuple
    opcode, a memo fetch followed by a store, a mark taken off — is read here, not matched. A value pushed where
    this count did not read costs at most the costliest tuple built or fetched. The steps of every tuple and of all
    hashing stay under the ``pickle_tree_objects`` limit, derived from the bytes read; tuples nest at most
    ``DEFAULT_MAX_DEPTH`` levels (deeper ones the reader refuses anyway)."""

    def __init__(self, limits: Limits, refuse: Callable[[str], None]) -> None:
        self.limits = limits
        self.refuse = refuse
        self.unnamed: Cost = (1, 1)  # a slot filled where this count did not read: an empty tuple at most
        self.slots: dict[int, Cost] = {}  # slot → the tuple stored there by a store that names it
        self.fetched: Cost = self.unnamed  # the costliest memo fetch
        self.built: Cost = ATOM  # the costliest tuple (or frozenset) built
        self.top: Cost | None = None  # a tuple that may be on top of the stack
        self.below: list[Cost | None] = []  # per open mark, what `top` was when it was pushed
        self.hashed = 0

    def unread(self) -> Cost:
        return max(self.fetched[0], self.built[0]), max(self.fetched[1], self.built[1])

    def fetch(self, slot: int) -> Cost:
        named = self.slots.get(slot, ATOM)
        return max(self.unnamed[0], named[0]), max(self.unnamed[1], named[1])

    def _bound(self, offset: int, figure: int, what: str) -> None:
        limit = self.limits.pickle_tree_objects + self.limits.pickle_tree_objects_per_byte * offset
        if figure > limit:
            self.refuse(
                f"{what} at offset {offset:,}: {figure:,} steps (a tuple hashes through every level, each memo "
                f"fetch of a tuple walked again), past the pickle_tree_objects limit of {limit:,} for the bytes "
                f"read so far ({self.limits.pickle_tree_objects:,} + {self.limits.pickle_tree_objects_per_byte} a byte)"
            )

    def _hash(self, steps: int, offset: int) -> None:
        self.hashed += steps
        self._bound(offset, self.hashed, "hashing its dict keys and set elements would take more steps")

    def tuple_built(self, op: int, buf: bytes, region: Region, at: int, offset: int, since_mark: int) -> Cost:
        """The cost of the tuple (or frozenset) built by ``op`` at ``buf[at]``: its items are the last values
        pushed by the plain opcodes from ``region``'s start (exact: the region starts at its mark), else at most
        ``since_mark`` values, the ones this count did not read below them."""
        costs = self._pushed(buf, region, at)
        wanted = _TUPLE_ITEMS[op] or (len(costs) if region[1] else max(since_mark, len(costs)))
        taken = costs[max(len(costs) - wanted, 0) :]
        unread = self.unread()
        missing = wanted - len(taken)
        steps, depth, fails = 1 + missing * unread[0], 1 + (unread[1] if missing else 0), False
        for item_steps, item_depth in taken:
            depth = max(depth, 1 + item_depth)
            if not fails:  # hashing stops at the first item it cannot hash
                steps += abs(item_steps)
                fails = item_steps < 0
        self._bound(offset, steps, "it builds a tuple")
        if depth > DEFAULT_MAX_DEPTH:
            self.refuse(
                f"it nests tuples {depth:,} levels deep at offset {offset:,}, deeper than {DEFAULT_MAX_DEPTH} "
                "levels (hashing one recurses through every level)"
            )
        if op == _FROZENSET:  # its elements are hashed now; its own hash walks its entries, once
            self._hash(steps, offset)
            cost = (1 + wanted, 0)
        else:
            cost = (-steps if fails else steps, depth)
        self.built = (max(self.built[0], abs(cost[0])), max(self.built[1], cost[1]))
        return cost

    def hashed_keys(self, values: int, offset: int) -> None:
        """Up to ``values`` keys or elements hashed, each costing at most what an unread value costs."""
        steps = self.unread()[0]
        if steps > 1:  # atoms only: nothing to count
            self._hash(values * steps, offset)

    def hashed_group(self, nbytes: int, offset: int) -> None:
        """A run of filled containers of ``nbytes``: its tuples are trees of its own values (never shared, never
        stored), so hashing all its keys walks each value at most once, each a memo fetch at most."""
        self._hash(nbytes * self.fetched[0], offset)

    def store(self, slot: int | None) -> None:
        """The value on top stored in ``slot`` (None: by MEMOIZE)."""
        if self.top is None:
            return
        cost = (abs(self.top[0]), self.top[1])
        if slot is None:
            self.unnamed = max(self.unnamed[0], cost[0]), max(self.unnamed[1], cost[1])
        else:
            self.slots[slot] = cost
        self.fetched = max(self.fetched[0], cost[0]), max(self.fetched[1], cost[1])

    def after_run(self, buf: bytes, lo: int, hi: int) -> None:
        """A run of plain opcodes ``buf[lo:hi]`` with ``top`` perhaps a tuple: a store before the run's first push
        stores it; after a push it is covered (it can come back only by an opcode read in Python)."""
        while lo < hi:
            op = buf[lo]
            if op in _STORES:
                self.store(_slot(buf, lo))
            elif op not in _KEEPS and op != _DUP:
                self.top = None
                return
            lo = _next_op(buf, lo)

    def moved(self, op: int, buf: bytes, at: int, built: Cost | None) -> None:
        """``top`` and the marks' after the opcode at ``buf[at]``, read in Python (``built``: the tuple it built)."""
        _, _, to_mark = _EFFECT[op]
        if op == _MARK:
            self.below.append(self.top)
            self.top = None
        elif op in _STORES:
            self.store(_slot(buf, at))
        elif op in _GETS:  # read here only where a store follows: what it fetched may be stored again
            self.top = self.fetch(_slot(buf, at) or 0)
        elif to_mark:
            under = self.below.pop() if self.below else self.unread()
            self.top = under if op in _EXPOSING else built
        elif op == _POP:  # what is on top now (or whether it took a mark off) is not followed here
            self.top = self.unread()
            self.below = [self.unread()] * len(self.below)
        elif op in _TUPLE_ITEMS:
            self.top = built
        elif op not in _KEEPS and op != _DUP:
            self.top = None

    def _pushed(self, buf: bytes, region: Region, hi: int) -> list[Cost]:
        """The cost of each value pushed by the opcodes from ``region``'s start to ``buf[hi]`` (complete opcodes
        that only push or keep the stack as it is), after those it knows already."""
        lo, _, costs = region
        costs = list(costs)
        shape_of, slots, unnamed = _SHAPE, self.slots, self.unnamed
        while lo < hi:
            op = buf[lo]
            if op in _GETS:
                costs.append(self.fetch(_slot(buf, lo) or 0) if slots else unnamed)
            elif op == _DUP:
                costs.append(costs[-1] if costs else self.unread())
            elif op in _UNHASHABLE:
                costs.append((-1, 0))
            elif op == _EMPTY_TUPLE:
                costs.append((1, 1))
            elif _EFFECT[op][1]:
                costs.append(ATOM)
            shape = shape_of[op] or 0
            lo = lo + 1 + shape if shape >= 0 else _next_op(buf, lo)
        return costs


def _slot(buf: bytes, at: int) -> int | None:
    """The memo slot the fetch or store at ``buf[at]`` names (None: MEMOIZE, or text that is not a number)."""
    op = buf[at]
    if op in b"hq":
        return buf[at + 1]
    if op in b"jr":
        return int.from_bytes(buf[at + 1 : at + 5], "little")
    if op in b"gp":
        text = buf[at + 1 : buf.find(b"\n", at + 1)]
        return int(text) if text.isdigit() else None
    return None


def _next_op(buf: bytes, at: int) -> int:
    """Where the opcode after the complete one at ``buf[at]`` starts."""
    shape = _SHAPE[buf[at]] or 0
    if shape >= 0:
        return at + 1 + shape
    if shape in _WIDTH:
        width = _WIDTH[shape]
        return at + 1 + width + (0 if shape == _FRAME else int.from_bytes(buf[at + 1 : at + 1 + width], "little"))
    first = buf.find(b"\n", at + 1)
    return (buf.find(b"\n", first + 1) if shape == _LINES2 else first) + 1


class PickleGuard:
    """Reads a pickle's opcodes as they stream past, before the unpickler acts on them, and refuses the few
    that would make it allocate far more than the file holds: a memo index beyond the limit (or beyond the
    bytes read so far, since a pickler numbers memo slots in order), a string, bytes or frame longer than the
    limit, more values pending on the stack than the limit (a run of DUP, or of any push), and tuples whose
    hashing would cost more than the limit (:class:`_TupleCost`). Linear, and holds at most one opcode's worth
    of bytes between two feeds."""

    def __init__(self, what: str, limits: Limits = LIMITS) -> None:
        self.what = what
        self.limits = limits
        self.offset = 0  # stream offset of the first byte not yet fed
        self._tail = b""  # an opcode cut by the end of the last feed
        self._skip = 0  # bytes of a long payload still to pass
        self._depth = 0
        self._marks: list[int] = []
        self._tuples = _TupleCost(limits, self._refuse)
        self._containers = 0
        self.done = False

    def feed(self, data: bytes) -> None:
        if self.done or not data:
            self.offset += len(data)
            return
        start = self.offset - len(self._tail)
        self.offset += len(data)
        if self._skip:
            passed = min(self._skip, len(data))
            self._skip -= passed
            data = data[passed:]
            start += passed
            if not data:
                return
        self._count_containers(data)
        buf = self._tail + data if self._tail else data
        used = self._scan(buf, start)
        self._tail = buf[used:]
        if len(self._tail) > self.limits.pickle_line_bytes + 64:
            self._refuse(f"an opcode argument runs past the {exact_size_text(self.limits.pickle_line_bytes)} limit")

    def _refuse(self, why: str) -> None:
        raise InputRefused(f"the {self.what} was refused before unpickling: {why}")

    def _scan(self, buf: bytes, start: int) -> int:
        """Opcodes of ``buf`` (at stream offset ``start``) up to the last complete one; returns how far it read."""
        n, pos, depth, tuples = len(buf), 0, self._depth, self._tuples
        run, shape_of = _plain_run().match, _SHAPE
        # the groups' fast path needs possessive repeats (a backtrack would find a SETITEMS inside an argument):
        # without them each opcode of a group is read one at a time, as any other
        groups = _group_run().match if _possessive_holds() else _no_group
        region: Region = (0, False, [])
        while True:
            end = run(buf, pos).end()  # type: ignore[union-attr]  # a run of zero opcodes still matches
            if end > pos and tuples.top is not None:
                tuples.after_run(buf, pos, end)
            depth += end - pos
            pos = end
            self._check_pending(depth)
            if pos >= n:
                break
            op = buf[pos]
            if op == _MARK and tuples.top is None and (grouped := groups(buf, pos)):
                end = grouped.end()
                depth += GROUP_LEAVES * buf.count(b"(", pos, end)
                self._check_pending(depth + GROUP_PEAK)
                tuples.hashed_group(end - pos, start + pos)
                pos, region = end, (end, False, [])
                continue
            shape = shape_of[op]
            if shape is None or op == _STOP:  # the unpickler stops (or fails) here: nothing after it is read
                self.done = True
                pos = n
                break
            at = pos
            if shape >= 0:  # fixed argument: the commonest here (marks, tuples, stores), read inline
                if pos + 1 + shape > n:
                    break
                if op == _LONG_BINPUT:
                    self._check_memo(int.from_bytes(buf[pos + 1 : pos + 5], "little"), start + pos)
                pos += 1 + shape
            else:
                end = (
                    self._counted_end(buf, pos, shape, start)
                    if shape in _WIDTH
                    else self._lines_end(buf, pos, op, shape, start)
                )
                if end < 0:  # the argument's length or line is not all here yet
                    break
                if end > n:  # a payload to pass over that runs on into the data still to come
                    self._skip = end - n
                    tuples.top = None  # a string or bytes object on top
                    self._depth = depth + 1
                    return n
                pos = end
            depth, region = self._apply(op, buf, at, pos, start, depth, region)
        self._depth = depth
        return pos

    def _counted_end(self, buf: bytes, pos: int, shape: int, start: int) -> int:
        """Where the opcode at ``buf[pos]`` with a declared length ends: past its payload (perhaps past ``buf``:
        the rest comes later), or past its length for a frame, whose content is opcodes read on; -1 while the
        length itself is not all here. A length over the limit on one object is refused before anything reads it."""
        width = _WIDTH[shape]
        if pos + 1 + width > len(buf):
            return -1
        length = int.from_bytes(buf[pos + 1 : pos + 1 + width], "little")
        if length > self.limits.pickle_declared_bytes:
            name = "frame" if shape == _FRAME else "string or bytes object"
            self._refuse(
                f"it declares a {name} of {length:,} bytes at offset {start + pos:,}, over the "
                f"{exact_size_text(self.limits.pickle_declared_bytes)} limit on one object"
            )
        return pos + 1 + width + (0 if shape == _FRAME else length)

    def _lines_end(self, buf: bytes, pos: int, op: int, shape: int, start: int) -> int:
        """Where the opcode at ``buf[pos]`` whose argument(s) end in a newline ends; -1 while its last line is not
        all here (refused once that line is longer than the limit). A PUT's memo index is checked on the way."""
        first = buf.find(b"\n", pos + 1)
        last = buf.find(b"\n", first + 1) if shape == _LINES2 and first >= 0 else first
        if last < 0:
            if len(buf) - pos > self.limits.pickle_line_bytes:
                self._refuse(f"an argument line is longer than {exact_size_text(self.limits.pickle_line_bytes)}")
            return -1
        if op == _PUT:
            try:
                index = int(buf[pos + 1 : last])
            except ValueError:
                index = 0  # the unpickler says what is wrong with it
            self._check_memo(index, start + pos)
        return last + 1

    def _apply(self, op: int, buf: bytes, at: int, end: int, start: int, depth: int, region: Region):
        """The stack effect of the opcode at ``buf[at:end]``, with the tuples it builds and the keys it hashes
        counted; returns the depth and the region of plain pushes that starts after it."""
        pops, pushes, to_mark = _EFFECT[op]
        marks, tuples = self._marks, self._tuples
        since_mark = depth - marks[-1] if marks else depth
        after: list[Cost] = []
        if op in _TUPLE_ITEMS:
            after = [tuples.tuple_built(op, buf, region, at, start + at, since_mark)]
        elif op in _HASHING:
            tuples.hashed_keys(2 if op == _SETITEM else since_mark, start + at)
        tuples.moved(op, buf, at, after[0] if after else None)
        if op == _MARK:
            marks.append(depth + 1)
            return depth + 1, (end, True, [])
        if to_mark:
            depth = (marks.pop() - 1 if marks else depth) - pops + pushes
        else:
            depth += pushes - pops
        return max(depth, 0), ((end, False, after) if pops or to_mark else region)

    def _count_containers(self, data: bytes) -> None:
        """Containers are the costliest objects a byte makes (an empty dict: 64 bytes from one): every byte that
        may start one (EMPTY_DICT, EMPTY_LIST, EMPTY_SET, MARK) counts, wherever it lies (an over-count)."""
        self._containers += len(data) - len(data.translate(None, b"}](\x8f"))  # one pass in C
        limit = self.limits.pickle_containers + self.offset // self.limits.pickle_bytes_per_container
        if self._containers > limit:
            self._refuse(
                f"it makes more than {limit:,} containers in its first {self.offset:,} bytes, past the "
                f"pickle_containers limit ({self.limits.pickle_containers:,} + one per "
                f"{self.limits.pickle_bytes_per_container} bytes)"
            )

    def _check_pending(self, values: int) -> None:
        if values > self.limits.pickle_pending_values:
            self._refuse(
                f"it stacks up more than {self.limits.pickle_pending_values:,} values "
                "(the limit on values pending on the unpickler's stack)"
            )

    def _check_memo(self, index: int, offset: int) -> None:
        if index >= self.limits.pickle_memo_index or index > offset:
            self._refuse(
                f"it stores memo slot {index:,} at offset {offset:,} (a pickler numbers slots in order; "
                f"the limit is {self.limits.pickle_memo_index:,} slots)"
            )

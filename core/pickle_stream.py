"""Reading a pickle too large to hold as Python objects (a memory snapshot of a gigabyte), safely.

The plain-data unpickler of :mod:`core.intake` reads it from a counting stream that lets the caller empty the
lists being built between chunks (:func:`load_pickle_stream`). Before the unpickler acts on any byte, a
:class:`PickleGuard` has read the opcodes up to it and refused the few that would make the unpickler allocate
far more than the file holds (a memo index, a declared length, a pile of pending values past the limits of
:class:`core.intake.Limits`). For a large file the guard runs in a process of its own, on another core, ahead
of the unpickler (``python -m core.pickle_stream FD WHAT``), instead of taking turns with it: it reads the file
the reader opened, through the descriptor it inherits, never the path opened again (a path can be made to name
another file between two opens).
"""

from __future__ import annotations

import functools
import gc
import gzip
import io
import os
import pickle
import pickletools
import re
import subprocess
import sys
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from core.intake import (
    CHUNK_BYTES,
    DEFAULT_MAX_DEPTH,
    GZIP_MAGIC,
    LIMITS,
    STREAM_BUFFER_BYTES,
    InputRefused,
    Limits,
    PlainDataUnpickler,
    check_depth,
    decoded,
)
from core.units import exact_size_text

GUARD_PROCESS_BYTES = 32 << 20  # a file larger than this is checked by a process of its own (~0.3 s inline)
REPORT_BYTES = 4 << 20  # how often that process reports how far it has checked
PACKAGE_ROOT = str(Path(__file__).resolve().parent.parent)  # where that process finds ``core``
PASS_ALL = 1 << 62  # its last report: nothing the unpickler can still read needs checking


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
    return shape, effect


_LEN1, _LEN4, _LEN8, _FRAME, _LINE, _LINES2 = -1, -4, -8, -9, -10, -20
_SHAPE, _EFFECT = _opcode_tables()
_MARK, _STOP, _PUT, _LONG_BINPUT = ord("("), ord("."), ord("p"), ord("r")
_WIDTH = {_LEN1: 1, _LEN4: 4, _LEN8: 8, _FRAME: 8}
_GETS = frozenset(b"hjg")  # BINGET, LONG_BINGET, GET: a value fetched from the memo
_DUP, _SETITEM, _FROZENSET = ord("2"), ord("s"), 0x91
_TUPLE_ITEMS = {0x85: 1, 0x86: 2, 0x87: 3, ord("t"): None, _FROZENSET: None}  # None: the values since the mark
_HASHING = frozenset(b"su\x90d")  # SETITEM(S), ADDITEMS, DICT: hash every key or element they take
_UNHASHABLE = frozenset(b"]}\x8f")  # EMPTY_LIST, EMPTY_DICT, EMPTY_SET: hashing fails at once
Region = tuple[int, bool, list[int]]  # where the plain pushes before an opcode start; at its mark; known before
# A run of opcodes that only push or keep the stack as it is, with small fixed arguments (or a length
# byte): matched in C, so a snapshot of a gigabyte is checked at the speed of a regular expression.
# Each byte of the run counts as one pushed value (an over-count: a value takes at least one byte).
# Anything else (marks, pops, long strings, a memo index ≥ 2^24, a frame ≥ 1 MiB) is read below.
_ANY = rb"[\x00-\xff]"
_COUNTED = rb"(?:" + b"|".join(re.escape(bytes([n])) + _ANY + b"{%d}" % n for n in range(256)) + rb")"


def _plain_op() -> bytes:
    """One opcode that only pushes or keeps the stack as it is, with its argument: alternatives that start with
    a literal byte, the commonest first (sre tries them in order)."""
    return (
        rb"(?:"
        + b"|".join(
            re.escape(op) + arg
            for op, arg in (
                (b"j", _ANY + b"{4}"),  # LONG_BINGET
                (b"h", _ANY),  # BINGET
                (b"\x94", b""),  # MEMOIZE
                (b"\x8a", _COUNTED),  # LONG1
                (b"K", _ANY),  # BININT1
                (b"J", _ANY + b"{4}"),  # BININT
                (b"}", b""),  # EMPTY_DICT
                (b"]", b""),  # EMPTY_LIST
                (b"\x8c", _COUNTED),  # SHORT_BINUNICODE
                (b"M", _ANY + b"{2}"),  # BININT2
                (b"q", _ANY),  # BINPUT
                (b"r", _ANY + rb"{3}\x00"),  # LONG_BINPUT below 2^24
                (b"G", _ANY + b"{8}"),  # BINFLOAT
                (b"N", b""),  # NONE
                (b")", b""),  # EMPTY_TUPLE
                (b"\x88", b""),  # NEWTRUE
                (b"\x89", b""),  # NEWFALSE
                (b"\x8f", b""),  # EMPTY_SET
                (b"2", b""),  # DUP
                (b"C", _COUNTED),  # SHORT_BINBYTES
                (b"U", _COUNTED),  # SHORT_BINSTRING
                (b"\x80", _ANY),  # PROTO
                (b"\x95", _ANY + rb"{2}[\x00-\x0f]\x00{5}"),  # FRAME below 1 MiB
            )
        )
        + rb")"
    )


@functools.cache
def _plain_run() -> re.Pattern[bytes]:
    """Compiled on the first pickle checked, not at import: it costs ~50 ms, and most commands read none."""
    return re.compile(_plain_op() + rb"*+")


# A run of filled containers, as a pickler writes the items of a list of dicts (a snapshot's events): each a
# MARK, at most 2,000 plain opcodes or filled inner containers (each a MARK, at most 1,000 plain opcodes, and
# SETITEMS or APPENDS), and its SETITEMS or APPENDS, then at most 4 plain opcodes (the next container's push).
# Matched in one call, so the guard reads an event at the speed of a regular expression, not of a Python loop
# turn per MARK. Each such group leaves the stack as it found it, having held at most GROUP_PEAK values more
# meanwhile; what stays are the plain opcodes after each, at most GROUP_LEAVES per group, and there are no
# more groups than "(" bytes in the run.
GROUP_PEAK = 3_004
GROUP_LEAVES = 4
GROUPS_FROM_BYTES = 8 << 20  # its ~0.1 s to compile pays off only past here (a small file is read without it)


@functools.cache
def _group_run() -> re.Pattern[bytes]:
    op = _plain_op()
    inner = rb"\((?:" + op + rb"){0,1000}+[ue]"
    group = rb"\((?:" + op + rb"|" + inner + rb"){0,2000}+[ue]"
    return re.compile(rb"(?:" + group + rb"(?:" + op + rb"){0,%d}+)++" % GROUP_LEAVES)


class _TreeCount:
    """Every tuple (or frozenset) a pickle builds, counted as an expanded tree — each memo fetch of one counted
    again — and what hashing dict keys and set elements costs the unpickler, which hashes a tuple through every
    level (40 tuples of two memo fetches each: a 332-byte file, 2^40 steps). Both stay under the
    ``pickle_tree_objects`` limit, derived from the bytes read. Tuples are the only containers that are hashed,
    and they cannot change once built, so this bounds the unpickler; lists and dicts are never hashed, and what
    reads the result walks by identity. A value fetched from the memo, or pushed where this count did not read,
    counts as the largest tuple built so far (an over-count: plain data has small tuples, if any). A size is
    negative for what cannot be hashed (a tuple holding a list fails there): hashing it costs only the items
    before that."""

    def __init__(self, limits: Limits, refuse: Callable[[str], None]) -> None:
        self.limits = limits
        self.refuse = refuse
        self.largest = 1
        self.hashed = 0

    def _bound(self, offset: int, figure: int, what: str) -> None:
        limit = self.limits.pickle_tree_objects + self.limits.pickle_tree_objects_per_byte * offset
        if figure > limit:
            self.refuse(
                f"{what} at offset {offset:,}: {figure:,} objects counted as a tree (each reuse of a memo slot "
                f"counted again), past the pickle_tree_objects limit of {limit:,} for the bytes read so far "
                f"({self.limits.pickle_tree_objects:,} + {self.limits.pickle_tree_objects_per_byte} a byte)"
            )

    def tuple_built(self, op: int, buf: bytes, region: Region, at: int, offset: int, since_mark: int) -> int:
        """The size of the tuple built by ``op`` at ``buf[at]``: its items are the last values pushed by the
        plain opcodes from ``region``'s start (exact: the region starts at its mark), else at most
        ``since_mark`` values, the ones this count did not read below them."""
        sizes = self._pushed(buf, region, at)
        wanted = _TUPLE_ITEMS[op] or (len(sizes) if region[1] else max(since_mark, len(sizes)))
        taken = sizes[max(len(sizes) - wanted, 0) :]
        size = 1 + (wanted - len(taken)) * self.largest
        for item in taken:
            size += abs(item)
            if item < 0:  # hashing stops here
                size = -size
                break
        self._bound(offset, abs(size), "it builds a tuple")
        if op == _FROZENSET:
            self.hashed += abs(size)
            self._bound(offset, self.hashed, "hashing its dict keys and set elements would take more steps")
        self.largest = max(self.largest, abs(size))
        return size

    def hashed_keys(self, values: int, offset: int) -> None:
        """Up to ``values`` keys or elements hashed, each at most the largest tuple (atoms only: nothing to count)."""
        if self.largest > 1:
            self.hashed += values * self.largest
            self._bound(offset, self.hashed, "hashing its dict keys and set elements would take more steps")

    def _pushed(self, buf: bytes, region: Region, hi: int) -> list[int]:
        """The tree size of each value pushed by the opcodes from ``region``'s start to ``buf[hi]`` (complete
        opcodes that only push or keep the stack as it is), after those it knows already."""
        lo, _, sizes = region
        sizes = list(sizes)
        while lo < hi:
            op = buf[lo]
            shape = _SHAPE[op] or 0
            if shape >= 0:
                end = lo + 1 + shape
            elif shape in _WIDTH:
                width = _WIDTH[shape]
                end = (
                    lo + 1 + width + (0 if shape == _FRAME else int.from_bytes(buf[lo + 1 : lo + 1 + width], "little"))
                )
            else:
                first = buf.find(b"\n", lo + 1)
                end = (buf.find(b"\n", first + 1) if shape == _LINES2 else first) + 1
            if op in _GETS:
                sizes.append(self.largest)
            elif op == _DUP:
                sizes.append(sizes[-1] if sizes else self.largest)
            elif op in _UNHASHABLE:
                sizes.append(-1)
            elif _EFFECT[op][1]:
                sizes.append(1)
            lo = end
        return sizes


class PickleGuard:
    """Reads a pickle's opcodes as they stream past, before the unpickler acts on them, and refuses the few
    that would make it allocate far more than the file holds: a memo index beyond the limit (or beyond the
    bytes read so far, since a pickler numbers memo slots in order), a string, bytes or frame longer than the
    limit, and more values pending on the stack than the limit (a run of DUP, or of any push). Linear, and
    holds at most one opcode's worth of bytes between two feeds."""

    def __init__(self, what: str, limits: Limits = LIMITS) -> None:
        self.what = what
        self.limits = limits
        self.offset = 0  # stream offset of the first byte not yet fed
        self._tail = b""  # an opcode cut by the end of the last feed
        self._skip = 0  # bytes of a long payload still to pass
        self._depth = 0
        self._marks: list[int] = []
        self._tree = _TreeCount(limits, self._refuse)
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
        limits, n, pos, depth, marks = self.limits, len(buf), 0, self._depth, self._marks
        run, shape_of = _plain_run().match, _SHAPE
        groups = _group_run().match if start >= GROUPS_FROM_BYTES else None
        region: Region = (0, False, [])
        while True:
            matched = run(buf, pos)  # a run of zero opcodes still matches
            end = matched.end() if matched else pos
            depth += end - pos
            pos = end
            self._check_pending(depth)
            if pos >= n:
                break
            op = buf[pos]
            if op == _MARK and groups is not None and (grouped := groups(buf, pos)):
                end = grouped.end()
                depth += GROUP_LEAVES * buf.count(b"(", pos, end)
                self._check_pending(depth + GROUP_PEAK)
                if self._tree.largest > 1:
                    self._tree.hashed_keys(end - pos, start + pos)
                pos, region = end, (end, False, [])
                continue
            shape = shape_of[op]
            if shape is None or op == _STOP:  # the unpickler stops (or fails) here: nothing after it is read
                self.done = True
                pos = n
                break
            at = pos
            if shape >= 0:  # fixed argument
                if pos + 1 + shape > n:
                    break
                if op == _LONG_BINPUT:
                    self._check_memo(int.from_bytes(buf[pos + 1 : pos + 5], "little"), start + pos)
                pos += 1 + shape
            elif shape in _WIDTH:
                width = _WIDTH[shape]
                if pos + 1 + width > n:
                    break
                length = int.from_bytes(buf[pos + 1 : pos + 1 + width], "little")
                if length > limits.pickle_declared_bytes:
                    name = "frame" if shape == _FRAME else "string or bytes object"
                    self._refuse(
                        f"it declares a {name} of {length:,} bytes at offset {start + pos:,}, over the "
                        f"{exact_size_text(limits.pickle_declared_bytes)} limit on one object"
                    )
                pos += 1 + width
                if shape != _FRAME:  # a payload to pass over (a frame's content is opcodes: read on)
                    if pos + length > n:
                        self._skip = pos + length - n
                        pos = n
                        self._depth, self._marks = depth + 1, marks
                        return pos
                    pos += length
            else:  # text argument(s) ending in a newline
                first = buf.find(b"\n", pos + 1)
                last = buf.find(b"\n", first + 1) if shape == _LINES2 and first >= 0 else first
                if last < 0:
                    if n - pos > limits.pickle_line_bytes:
                        self._refuse(f"an argument line is longer than {exact_size_text(limits.pickle_line_bytes)}")
                    break
                if op == _PUT:
                    try:
                        index = int(buf[pos + 1 : last])
                    except ValueError:
                        index = 0  # the unpickler says what is wrong with it
                    self._check_memo(index, start + pos)
                pos = last + 1
            depth, region = self._apply(op, buf, at, pos, start, depth, region)
        self._depth, self._marks = depth, marks
        return pos

    def _apply(self, op: int, buf: bytes, at: int, end: int, start: int, depth: int, region: Region):
        """The stack effect of the opcode at ``buf[at:end]``, with the tuples it builds and the keys it hashes
        counted; returns the depth and the region of plain pushes that starts after it."""
        pops, pushes, to_mark = _EFFECT[op]
        marks = self._marks
        since_mark = depth - marks[-1] if marks else depth
        after: list[int] = []
        if op in _TUPLE_ITEMS:
            after = [self._tree.tuple_built(op, buf, region, at, start + at, since_mark)]
        elif op in _HASHING:
            self._tree.hashed_keys(2 if op == _SETITEM else since_mark, start + at)
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


class _InlineGuard:
    """A :class:`PickleGuard` in the reading process: shown each byte before the unpickler gets it."""

    def __init__(self, what: str) -> None:
        self._guard = PickleGuard(what)

    def clear(self, data: bytes | memoryview, at: int) -> None:
        """Check the part of ``data`` (the stream's bytes from offset ``at``) not checked yet."""
        seen = self._guard.offset
        if at + len(data) > seen:
            self._guard.feed(bytes(data[seen - at :]))

    def close(self) -> None:
        pass


class _GuardProcess:
    """A :class:`PickleGuard` in a process of its own (``python -m core.pickle_stream FD WHAT``), reading the
    reader's open file ``fd`` (inherited) on another core, ahead of the unpickler: it reports each offset it has
    passed, or why it refuses the file, and the reader waits only when the unpickler would get past what it has
    passed."""

    def __init__(self, fd: int, what: str) -> None:
        self._what = what
        self._passed = 0
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", __name__, str(fd), what],
                stdout=subprocess.PIPE,
                stdin=subprocess.DEVNULL,
                pass_fds=(fd,),
                env={
                    **os.environ,
                    "PYTHONPATH": os.pathsep.join(filter(None, [PACKAGE_ROOT, os.environ.get("PYTHONPATH")])),
                },
            )
        except OSError as exc:
            raise InputRefused(f"cannot check the {what}: the checking process did not start ({exc})") from None

    def clear(self, data: bytes | memoryview, at: int) -> None:
        need = at + len(data)
        stdout = self._proc.stdout
        assert stdout is not None  # opened as a pipe above
        while self._passed < need:
            line = stdout.readline()
            if line.startswith(b"!"):
                raise InputRefused(line[1:].decode(errors="replace").rstrip("\n"))
            if not line:
                code = self._proc.wait()
                raise InputRefused(f"the check of the {self._what} ended without a verdict (exit {code})")
            self._passed = int(line)

    def close(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.wait()
        if self._proc.stdout is not None:
            self._proc.stdout.close()


def _guard_process_main(argv: list[str]) -> int:
    """The :class:`_GuardProcess` side: every ``REPORT_BYTES`` checked, the offset passed, as a line; at the end
    (or at STOP, after which the unpickler reads nothing) a pass for everything; a refusal as ``!message``."""
    fd, what = argv
    out = sys.stdout.buffer
    guard = PickleGuard(what)
    try:
        raw = cast(io.BufferedReader, io.BufferedReader(_PositionalFile(int(fd)), STREAM_BUFFER_BYTES))
        with decoded(raw, what) as stream:
            while (chunk := stream.read(REPORT_BYTES)) and not guard.done:
                guard.feed(chunk)
                out.write(b"%d\n" % guard.offset)
                out.flush()
        out.write(b"%d\n" % PASS_ALL)
    except InputRefused as exc:
        out.write(b"!" + str(exc).encode() + b"\n")
    except BrokenPipeError:  # the reader is gone (it failed or was cancelled): nothing to tell, nor to flush at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    out.flush()
    return 0


class _PositionalFile(io.RawIOBase):
    """An inherited file descriptor read from its start with ``pread``: the offset it shares with the reader's
    open file is left alone."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._at = 0

    def readable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def readinto(self, buffer) -> int:
        n = os.preadv(self._fd, [buffer], self._at)
        self._at += n
        return n


class _CountedStream:
    """What the C unpickler reads from: counts the bytes it consumes, refuses past the cap, has every byte
    cleared by a guard before the unpickler sees it, and calls ``on_chunk`` each time the unpickler comes back
    for more (about every ``STREAM_BUFFER_BYTES``)."""

    def __init__(
        self,
        raw: io.BufferedReader,
        limit_bytes: int,
        what: str,
        on_chunk: Callable[[], None] | None,
        guard: _InlineGuard | _GuardProcess,
    ) -> None:
        self._raw = raw
        self._limit = limit_bytes
        self._what = what
        self._on_chunk = on_chunk
        self._guard = guard
        self.consumed = 0

    def _count(self, data: bytes | memoryview) -> None:
        self._guard.clear(data, self.consumed)
        self.consumed += len(data)
        if self.consumed > self._limit:
            raise InputRefused(f"the {self._what} is larger than the {exact_size_text(self._limit)} limit")

    def read(self, n: int = -1) -> bytes:
        allowed = self._limit + 1 - self.consumed
        want = allowed if n is None or n < 0 else min(n, allowed)
        if want <= CHUNK_BYTES:
            data = self._raw.read(want)
        else:  # a length the file declares: hold only what it really has, not what it claims
            parts = []
            while want > 0 and (part := self._raw.read(min(want, CHUNK_BYTES))):
                parts.append(part)
                want -= len(part)
            data = b"".join(parts)
        self._count(data)
        return data

    def readinto(self, buffer) -> int:
        view = memoryview(buffer)[: self._limit + 1 - self.consumed]
        n = self._raw.readinto(view)
        self._count(view[:n])
        return n

    def readline(self) -> bytes:
        data = self._raw.readline(min(self._limit + 1 - self.consumed, LIMITS.pickle_line_bytes + 1))
        self._count(data)
        return data

    def peek(self, n: int = 0) -> bytes:
        if self._on_chunk is not None:
            self._on_chunk()
        data = self._raw.peek(n)
        self._guard.clear(data, self.consumed)
        return data


def content_bytes(source: int | str | os.PathLike) -> int:
    """About how many bytes reading an open file (``fd``) or a path gives: its size, or for gzip the size its
    trailer states (modulo 4 GiB), whichever is larger."""
    if not isinstance(source, int):
        with open(source, "rb") as fh:
            return content_bytes(fh.fileno())
    size = os.fstat(source).st_size
    if size < 18 or os.pread(source, 2, 0) != GZIP_MAGIC:
        return size
    return max(size, int.from_bytes(os.pread(source, 4, size - 4), "little"))


def _source_fd(stream: io.BufferedReader) -> int | None:
    """The descriptor of the file ``stream`` reads (through gzip too), or None for a stream of no file."""
    try:
        return stream.fileno()
    except (OSError, ValueError, AttributeError):  # io.UnsupportedOperation is both an OSError and a ValueError
        return None


def load_pickle_stream(
    stream: io.BufferedReader,
    limit_bytes: int,
    *,
    what: str = "file",
    path: str | os.PathLike | None = None,
    on_chunk: Callable[[pickle.Unpickler], None] | None = None,
    max_depth: int = DEFAULT_MAX_DEPTH,
) -> Any:
    """A plain-data pickle read from a stream, any protocol, with at most ``limit_bytes`` consumed.

    ``path`` names the file ``stream`` reads from its start: when it is given and the file is large, the guard
    runs in a process of its own, on the descriptor the stream reads (never on ``path`` opened again).
    ``on_chunk(unpickler)`` runs between chunks while the structure is being built: it may take the
    items out of lists that are still growing (reach them through ``unpickler.memo``) so that a file
    far larger than memory allows as Python objects is read in bounded memory. Garbage collection is
    paused meanwhile: nothing built by an unpickler is garbage, and its passes over millions of fresh
    objects would only cost time.
    """
    unpickler: pickle.Unpickler | None = None

    def hook() -> None:
        assert on_chunk is not None and unpickler is not None  # set before the unpickler first calls it
        on_chunk(unpickler)

    fd = _source_fd(stream) if path is not None else None
    guard = (
        _GuardProcess(fd, what) if fd is not None and content_bytes(fd) > GUARD_PROCESS_BYTES else _InlineGuard(what)
    )
    counted = _CountedStream(stream, limit_bytes, what, hook if on_chunk else None, guard)
    unpickler = PlainDataUnpickler(counted)
    collecting = gc.isenabled()
    gc.disable()
    try:
        data = unpickler.load()
    except pickle.UnpicklingError as exc:
        if "truncated" in str(exc):
            raise InputRefused(f"the {what} ends early: it is truncated ({exc})") from None
        raise InputRefused(f"the {what} was refused: {exc}") from None
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise InputRefused(f"the {what} ended early ({exc or 'end of file'}); it is truncated") from None
    except (ValueError, TypeError, IndexError, KeyError, AttributeError, OverflowError) as exc:
        if isinstance(exc, InputRefused):
            raise
        raise InputRefused(
            f"the {what} is not a readable pickle ({type(exc).__name__}: {exc}); it may be truncated"
        ) from None
    finally:
        guard.close()
        # The hook refers to the unpickler, which refers to the stream, which refers to the hook: without this
        # the cycle would keep the unpickler's memo (every object it read) alive until the next collection.
        unpickler = None
        if collecting:
            gc.enable()
    check_depth(data, max_depth, what)
    return data


if __name__ == "__main__":
    sys.exit(_guard_process_main(sys.argv[1:]))

"""The one way a file from outside enters the lab: bounded, depth-capped, never executed.

Every file the lab takes in (a runs file to import, a memory snapshot, a profiler trace) comes
through here. Bytes are counted as they are read, because a device or a pipe reports size 0
(``/dev/zero`` would otherwise be read forever); gzip is undone under the same cap on what it expands
to; JSON is strict (no NaN/Infinity) and its nesting is capped, because a 900-level structure loads
but then breaks every recursive consumer; pickles go through an unpickler that refuses every class, so
a hostile file can neither exhaust memory nor run code. A pickle too large to hold as Python objects
(a memory snapshot of 1 GB) is read as a stream instead: the same plain-data unpickler, fed through a
counting stream that lets the caller empty the lists being built between chunks
(:func:`load_pickle_stream`). Every refusal is an :class:`InputRefused` whose message says what is
wrong, in words a user can act on.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import gzip
import io
import json
import mmap
import os
import pickle
import pickletools
import re
import stat
import tempfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, cast

from core.units import exact_size_text

CHUNK_BYTES = 1 << 20
STREAM_BUFFER_BYTES = 1 << 20  # how much the streaming unpickler reads between two calls of on_chunk
DEFAULT_MAX_DEPTH = 64
GZIP_MAGIC = b"\x1f\x8b"


@dataclass(frozen=True)
class Limits:
    """Every cap on what a file from outside (and the worker's report of it) may make the lab hold.

    Stated here once; each refusal names the limit it hit. docs/OPERATIONS.md ("Limits on imported
    files") lists them for users.
    """

    # A pickle, checked opcode by opcode as the unpickler is fed, before it acts on them:
    pickle_memo_index: int = 1 << 26  # memo slots (the C unpickler sizes its memo table by the largest index)
    pickle_pending_values: int = 2_000_000  # values waiting on the unpickler's stack (counted generously)
    pickle_declared_bytes: int = 256 << 20  # one string, bytes object or frame, as its length prefix declares
    pickle_line_bytes: int = 1 << 20  # one argument line of protocol 0
    # What an import keeps of each stack and name (longer ones are cut, the cut is noted):
    frames_per_stack: int = 256
    name_chars: int = 1024
    # One line of the worker's output (a result is one line):
    worker_line_bytes: int = 64 << 20
    # The files of one import of a job's rank traces (a folder or several files), each read in turn:
    rank_files: int = 512


LIMITS = Limits()


def cut_name(text: str, limit: int = LIMITS.name_chars) -> str:
    """``text`` if it is within ``limit`` characters, else its start and its full length: "abc…(1,048,576 chars)"."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}…({len(text):,} chars)"


class InputRefused(ValueError):
    """A file the lab will not take in; nothing was stored."""


def _chunks(source: str | os.PathLike | BinaryIO, what: str) -> Iterator[bytes]:
    if not isinstance(source, (str, os.PathLike)):  # a stream
        while chunk := source.read(CHUNK_BYTES):
            yield chunk
        return
    path = Path(source)
    try:
        mode = path.stat().st_mode
        if stat.S_ISDIR(mode):
            raise InputRefused(f"{path} is a directory, not a {what}")
        with open(path, "rb") as fh:
            while chunk := fh.read(CHUNK_BYTES):
                yield chunk
    except OSError as exc:
        raise InputRefused(f"cannot read {path}: {exc.strerror or exc}") from None


def read_limited(source: str | os.PathLike | BinaryIO, limit_bytes: int, what: str = "file") -> bytes:
    """All bytes of a path or an open binary stream, refusing at ``limit_bytes`` + 1 (whatever size it claims)."""
    buffer = bytearray()
    for chunk in _chunks(source, what):
        buffer += chunk
        if len(buffer) > limit_bytes:
            raise InputRefused(f"the {what} is larger than the {exact_size_text(limit_bytes)} limit")
    return bytes(buffer)


def gunzip_limited(raw: bytes, limit_bytes: int, what: str = "file") -> bytes:
    """Undo gzip (several members allowed) without ever holding more than ``limit_bytes`` of output."""
    out = bytearray()
    data = raw
    while data:
        inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        try:
            while True:
                out += inflater.decompress(data, limit_bytes + 1 - len(out))
                if len(out) > limit_bytes:
                    raise InputRefused(f"the {what} expands to more than the {exact_size_text(limit_bytes)} limit")
                data = inflater.unconsumed_tail
                if inflater.eof or not data:
                    break
        except zlib.error as exc:
            raise InputRefused(f"the {what} is not valid gzip ({exc}); it may be truncated") from None
        if not inflater.eof:
            raise InputRefused(f"the {what} is a truncated gzip file")
        data = inflater.unused_data
    return bytes(out)


def read_input(source: str | os.PathLike | BinaryIO, limit_bytes: int, what: str = "file") -> bytes:
    """A file's content, gunzipped if it is gzip (by its magic bytes, not its name), both under ``limit_bytes``."""
    raw = read_limited(source, limit_bytes, what)
    if raw[:2] == GZIP_MAGIC:
        return gunzip_limited(raw, limit_bytes, what)
    return raw


def check_depth(value: Any, max_depth: int = DEFAULT_MAX_DEPTH, what: str = "file") -> None:
    """Refuse containers nested deeper than ``max_depth`` (iteratively: no recursion to exhaust).

    Each container is visited once, at the first depth it is reached: a pickle can share one object
    many times over (84 bytes make 2^40 paths through 40 shared tuples), so walking paths is exponential.
    """
    seen: set[int] = set()
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        if id(item) in seen:
            continue
        seen.add(id(item))
        if depth > max_depth:
            raise InputRefused(f"the {what} nests deeper than {max_depth} levels")
        stack.extend(
            (child, depth + 1) for child in children if isinstance(child, (dict, list, tuple)) and id(child) not in seen
        )


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def loads_json(raw: bytes, *, max_depth: int = DEFAULT_MAX_DEPTH, what: str = "file") -> Any:
    """Strict JSON (UTF-8, optional BOM; NaN and Infinity refused), nesting capped."""
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InputRefused(f"the {what} is not UTF-8 text") from None
    try:
        data = json.loads(text, parse_constant=_refuse_constant)
    except RecursionError:
        raise InputRefused(f"the {what} nests deeper than {max_depth} levels") from None
    except ValueError as exc:
        raise InputRefused(f"the {what} is not valid JSON ({exc}); it may be truncated") from None
    check_depth(data, max_depth, what)
    return data


def is_pickle(raw: bytes) -> bool:
    """A pickle of protocol 2+ starts with PROTO (0x80); protocols 0-1 of a dict or list with these."""
    return raw[:1] == b"\x80" or raw[:2] in (b"(d", b"(l", b"}q", b"]q", b"}(", b"](")


class _PlainDataUnpickler(pickle.Unpickler):
    """Builds only what pickle makes without a class: dicts, lists, tuples, strings, numbers, None."""

    def find_class(self, module: str, name: str):
        raise pickle.UnpicklingError(f"it names the class {module}.{name}; only plain data is accepted")

    def persistent_load(self, pid):
        raise pickle.UnpicklingError("it refers to a persistent object; only plain data is accepted")


def loads_pickle(raw: bytes, *, max_depth: int = DEFAULT_MAX_DEPTH, what: str = "file") -> Any:
    """A pickle of plain data, any protocol, never running code; nesting capped."""
    try:
        data = _PlainDataUnpickler(io.BytesIO(raw)).load()
    except pickle.UnpicklingError as exc:
        raise InputRefused(f"the {what} was refused: {exc}") from None
    except RecursionError:
        raise InputRefused(f"the {what} nests deeper than {max_depth} levels") from None
    except (EOFError, ValueError, TypeError, IndexError, KeyError, AttributeError, OverflowError) as exc:
        raise InputRefused(
            f"the {what} is not a readable pickle ({type(exc).__name__}: {exc}); it may be truncated"
        ) from None
    check_depth(data, max_depth, what)
    return data


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
# A run of opcodes that only push or keep the stack as it is, with small fixed arguments (or a length
# byte): matched in C, so a snapshot of a gigabyte is checked at the speed of a regular expression.
# Each byte of the run counts as one pushed value (an over-count: a value takes at least one byte).
# Anything else (marks, pops, long strings, a memo index ≥ 2^24, a frame ≥ 1 MiB) is read below.
_ANY = rb"[\x00-\xff]"
_COUNTED = rb"(?:" + b"|".join(re.escape(bytes([n])) + _ANY + b"{%d}" % n for n in range(256)) + rb")"


@functools.cache
def _plain_run() -> re.Pattern[bytes]:
    """Compiled on the first pickle checked, not at import: it costs ~50 ms, and most commands read none."""
    return re.compile(  # alternatives that start with a literal byte, the commonest first (sre tries them in order)
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
        + rb")*+"
    )


class _PickleGuard:
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
        self._done = False

    def feed(self, data: bytes) -> None:
        if self._done or not data:
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
        run, shape_of, effect_of = _plain_run().match, _SHAPE, _EFFECT
        while True:
            matched = run(buf, pos)  # a run of zero opcodes still matches
            end = matched.end() if matched else pos
            depth += end - pos
            pos = end
            if depth > limits.pickle_pending_values:
                self._refuse(
                    f"it stacks up more than {limits.pickle_pending_values:,} values "
                    "(the limit on values pending on the unpickler's stack)"
                )
            if pos >= n:
                break
            op = buf[pos]
            shape = shape_of[op]
            if shape is None or op == _STOP:  # the unpickler stops (or fails) here: nothing after it is read
                self._done = True
                pos = n
                break
            if shape >= 0:  # fixed argument
                if pos + 1 + shape > n:
                    break
                if op == _LONG_BINPUT:
                    self._check_memo(int.from_bytes(buf[pos + 1 : pos + 5], "little"), start + pos)
                pos += 1 + shape
            elif shape in (_LEN1, _LEN4, _LEN8, _FRAME):
                width = {_LEN1: 1, _LEN4: 4, _LEN8: 8, _FRAME: 8}[shape]
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
            pops, pushes, to_mark = effect_of[op]
            if op == _MARK:
                depth += 1
                marks.append(depth)
            elif to_mark:
                depth = (marks.pop() - 1 if marks else depth) - pops + pushes
            else:
                depth += pushes - pops
            depth = max(depth, 0)
        self._depth, self._marks = depth, marks
        return pos

    def _check_memo(self, index: int, offset: int) -> None:
        if index >= self.limits.pickle_memo_index or index > offset:
            self._refuse(
                f"it stores memo slot {index:,} at offset {offset:,} (a pickler numbers slots in order; "
                f"the limit is {self.limits.pickle_memo_index:,} slots)"
            )


class _CountedStream:
    """What the C unpickler reads from: counts the bytes it consumes, refuses past the cap, shows every byte
    to a :class:`_PickleGuard` before the unpickler sees it, and calls ``on_chunk`` each time the unpickler
    comes back for more (about every ``STREAM_BUFFER_BYTES``)."""

    def __init__(
        self, raw: io.BufferedReader, limit_bytes: int, what: str, on_chunk: Callable[[], None] | None
    ) -> None:
        self._raw = raw
        self._limit = limit_bytes
        self._what = what
        self._on_chunk = on_chunk
        self._guard = _PickleGuard(what)
        self.consumed = 0

    def _count(self, data: bytes | memoryview) -> None:
        self._show(data, self.consumed)
        self.consumed += len(data)
        if self.consumed > self._limit:
            raise InputRefused(f"the {self._what} is larger than the {exact_size_text(self._limit)} limit")

    def _show(self, data: bytes | memoryview, at: int) -> None:
        """Feed the guard the part of ``data`` (the stream's bytes from offset ``at``) it has not seen."""
        seen = self._guard.offset
        if at + len(data) > seen:
            self._guard.feed(bytes(data[seen - at :]))

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
        self._show(data, self.consumed)
        return data


@contextmanager
def open_input(source: str | os.PathLike, what: str = "file") -> Iterator[io.BufferedReader]:
    """A path opened for streaming: a buffered binary stream of its content, gunzipped if it is gzip
    (by its magic bytes). Sizes are not checked here: the reader that consumes it counts."""
    path = Path(source)
    try:
        if stat.S_ISDIR(path.stat().st_mode):
            raise InputRefused(f"{path} is a directory, not a {what}")
        fh = cast(io.BufferedReader, open(path, "rb", buffering=STREAM_BUFFER_BYTES))  # as "rb" opens
    except OSError as exc:
        raise InputRefused(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        if fh.peek(2)[:2] == GZIP_MAGIC:
            with gzip.GzipFile(fileobj=fh, mode="rb") as gz:
                yield io.BufferedReader(gz, STREAM_BUFFER_BYTES)
        else:
            yield fh
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise InputRefused(f"the {what} is not valid gzip ({exc}); it may be truncated") from None
    finally:
        fh.close()


def load_pickle_stream(
    stream: io.BufferedReader,
    limit_bytes: int,
    *,
    what: str = "file",
    on_chunk: Callable[[pickle.Unpickler], None] | None = None,
    max_depth: int = DEFAULT_MAX_DEPTH,
) -> Any:
    """A plain-data pickle read from a stream, any protocol, with at most ``limit_bytes`` consumed.

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

    counted = _CountedStream(stream, limit_bytes, what, hook if on_chunk else None)
    unpickler = _PlainDataUnpickler(counted)
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
        if collecting:
            gc.enable()
    check_depth(data, max_depth, what)
    return data


@contextmanager
def open_mapped(source: str | os.PathLike, limit_bytes: int, what: str = "file") -> Iterator[memoryview]:
    """A file's content as a read-only buffer that is not Python heap: the file itself memory-mapped, or, for
    gzip (by its magic bytes), its content inflated into an unlinked temporary file, counted against
    ``limit_bytes`` as it is written, and mapped. A typed decoder reads the buffer and keeps only the fields it
    declares, so a file of gigabytes never exists as Python objects, and the pages it touched go back to the
    OS when it is done. Empty content is an empty buffer."""
    path = Path(source)
    try:
        if stat.S_ISDIR(path.stat().st_mode):
            raise InputRefused(f"{path} is a directory, not a {what}")
        fh = open(path, "rb")
    except OSError as exc:
        raise InputRefused(f"cannot read {path}: {exc.strerror or exc}") from None
    with fh:
        if fh.read(2) == GZIP_MAGIC:
            fh.seek(0)
            with tempfile.TemporaryFile() as out:
                try:
                    with gzip.GzipFile(fileobj=fh, mode="rb") as gz:
                        _copy_limited(gz, out, limit_bytes, what, "expands to")
                except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
                    raise InputRefused(f"the {what} is not valid gzip ({exc}); it may be truncated") from None
                except OSError as exc:
                    raise InputRefused(f"cannot inflate the {what}: {exc.strerror or exc}") from None
                with _mapped(out) as view:
                    yield view
            return
        size = os.fstat(fh.fileno()).st_size
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):  # a pipe or a device: no size to trust, copy it
            fh.seek(0)
            with tempfile.TemporaryFile() as out:
                _copy_limited(fh, out, limit_bytes, what, "is larger than")
                with _mapped(out) as view:
                    yield view
            return
        if size > limit_bytes:
            raise InputRefused(f"the {what} is larger than the {exact_size_text(limit_bytes)} limit")
        with _mapped(fh) as view:
            yield view


def _copy_limited(src: io.BufferedIOBase, dst: BinaryIO, limit_bytes: int, what: str, verb: str) -> None:
    written = 0
    while chunk := src.read(CHUNK_BYTES):
        written += len(chunk)
        if written > limit_bytes:
            raise InputRefused(f"the {what} {verb} more than the {exact_size_text(limit_bytes)} limit")
        dst.write(chunk)
    dst.flush()


def release_pages(view: memoryview) -> None:
    """Hand the pages of a mapped file (:func:`open_mapped`) that were read back to the OS: they leave the
    process's resident memory and are read again from the page cache if touched. A no-op for other buffers."""
    mapped = view.obj
    if isinstance(mapped, mmap.mmap) and hasattr(mmap, "MADV_DONTNEED") and len(mapped):
        mapped.madvise(mmap.MADV_DONTNEED)


@contextmanager
def _mapped(fh: BinaryIO) -> Iterator[memoryview]:
    if os.fstat(fh.fileno()).st_size == 0:
        yield memoryview(b"")
        return
    mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    view = memoryview(mm)
    try:
        yield view
    finally:
        # Views into the map still alive (held by an error's traceback): the map is unmapped with the last of them.
        with contextlib.suppress(BufferError):
            view.release()
            mm.close()

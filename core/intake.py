"""The one way a file from outside enters the lab: bounded, depth-capped, never executed.

Every file the lab takes in (a runs file to import, a memory snapshot, a profiler trace) comes
through here. Bytes are counted as they are read, because a device or a pipe reports size 0
(``/dev/zero`` would otherwise be read forever); gzip is undone under the same cap on what it expands
to; JSON is strict (no NaN/Infinity) and its nesting is capped, because a 900-level structure loads
but then breaks every recursive consumer; pickles go through an unpickler that refuses every class, so
a hostile file can neither exhaust memory nor run code. A pickle too large to hold as Python objects
(a memory snapshot of 1 GB) is read as a stream instead, by the same plain-data unpickler
(:mod:`core.pickle_stream`). Every refusal is an :class:`InputRefused` whose message says what is
wrong, in words a user can act on.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import mmap
import os
import pickle
import stat
import tempfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO, cast

from core.errors import InputRefused
from core.limits import LIMITS, Limits
from core.units import exact_size_text

CHUNK_BYTES = 1 << 20
STREAM_BUFFER_BYTES = 1 << 20  # how much the streaming unpickler reads between two calls of on_chunk
DEFAULT_MAX_DEPTH = 64
GZIP_MAGIC = b"\x1f\x8b"


def cut_name(text: str, limit: int = LIMITS.name_chars) -> str:
    """``text`` if it is within ``limit`` characters, else its start and its full length: "abc…(1,048,576 chars)"."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}…({len(text):,} chars)"


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
    return b"".join(_inflated(raw, limit_bytes, what))


def _inflated(raw: bytes, limit_bytes: int, what: str) -> Iterator[bytes]:
    """The content of gzip ``raw`` (several members allowed), a chunk of at most :data:`CHUNK_BYTES` at a time,
    refused once it passes ``limit_bytes`` or :func:`inflated_limit` of its size (a JSON dump or runs file is held
    to the inflate ratio as a pickle is: 1 MB of gzip held 512 MiB of a dump's whitespace before it was refused)."""
    total = 0
    ratio_limit = inflated_limit(len(raw))
    data = raw
    while data:
        inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        try:
            while not inflater.eof:
                piece = inflater.decompress(data, CHUNK_BYTES)
                data = inflater.unconsumed_tail
                total += len(piece)
                if total > limit_bytes:
                    raise InputRefused(f"the {what} expands to more than the {exact_size_text(limit_bytes)} limit")
                if total > ratio_limit:
                    raise past_ratio(what, len(raw), ratio_limit)
                if not piece and not data:
                    raise InputRefused(f"the {what} is a truncated gzip file")
                yield piece
        except zlib.error as exc:
            raise InputRefused(f"the {what} is not valid gzip ({exc}); it may be truncated") from None
        data = inflater.unused_data


def read_input(source: str | os.PathLike | BinaryIO, limit_bytes: int, what: str = "file") -> bytes:
    """A file's content, gunzipped if it is gzip (by its magic bytes, not its name), both under ``limit_bytes``."""
    raw = read_limited(source, limit_bytes, what)
    if raw[:2] == GZIP_MAGIC:
        return gunzip_limited(raw, limit_bytes, what)
    return raw


def read_json_input(source: str | os.PathLike | BinaryIO, limit_bytes: int, max_containers: int, what: str) -> bytes:
    """:func:`read_input` for a JSON file, with the objects and lists it would make counted as it is inflated
    (:func:`json_containers`): past ``max_containers`` it is refused before anything is decoded, its content
    past the limit counted, never kept (a small gzip of millions of ``{}`` holds a chunk at a time)."""
    raw = read_limited(source, limit_bytes, what)
    pieces = _inflated(raw, limit_bytes, what) if raw[:2] == GZIP_MAGIC else iter((raw,))
    kept: list[bytes] = []
    count = 0
    for piece in pieces:
        count += json_containers(piece)
        if count <= max_containers:
            kept.append(piece)
    check_containers(count, max_containers, what)
    return kept[0] if len(kept) == 1 else b"".join(kept)


def json_containers(text: bytes) -> int:
    """How many objects and lists JSON ``text`` can make at most: its ``{`` and ``[`` (C-speed; one inside a
    string counts too, so the count is generous, never short)."""
    return text.count(b"{") + text.count(b"[")


def check_containers(count: int, max_containers: int, what: str) -> None:
    """Refuse a JSON file of more than ``max_containers`` objects and lists, with its count."""
    if count > max_containers:
        raise InputRefused(f"the {what} holds {count:,} JSON objects and lists, more than the {max_containers:,} limit")


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


class PlainDataUnpickler(pickle.Unpickler):
    """Builds only what pickle makes without a class: dicts, lists, tuples, strings, numbers, None."""

    def find_class(self, module: str, name: str):
        raise pickle.UnpicklingError(f"it names the class {module}.{name}; only plain data is accepted")

    def persistent_load(self, pid):
        raise pickle.UnpicklingError("it refers to a persistent object; only plain data is accepted")


def after_the_end(what: str, end: int) -> InputRefused:
    """The refusal of a pickle followed by more bytes: nobody would read them, no check would have seen them."""
    return InputRefused(
        f"the {what} goes on after its pickle ends at byte {end:,}: a file holds one pickle and nothing after it"
    )


def loads_pickle(raw: bytes, *, max_depth: int = DEFAULT_MAX_DEPTH, what: str = "file") -> Any:
    """A pickle of plain data, any protocol, never running code; nesting capped."""
    buffer = io.BytesIO(raw)
    try:
        data = PlainDataUnpickler(buffer).load()
    except pickle.UnpicklingError as exc:
        raise InputRefused(f"the {what} was refused: {exc}") from None
    except RecursionError:
        raise InputRefused(f"the {what} nests deeper than {max_depth} levels") from None
    except (EOFError, ValueError, TypeError, IndexError, KeyError, AttributeError, OverflowError) as exc:
        raise InputRefused(
            f"the {what} is not a readable pickle ({type(exc).__name__}: {exc}); it may be truncated"
        ) from None
    if buffer.tell() < len(raw):
        raise after_the_end(what, buffer.tell())
    check_depth(data, max_depth, what)
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
    with fh, decoded(fh, what) as stream:
        yield stream


@contextmanager
def decoded(fh: io.BufferedReader, what: str = "file") -> Iterator[io.BufferedReader]:
    """``fh`` (an opened file, read from its start), gunzipped if it is gzip (by its magic bytes): what
    :func:`open_input` yields, and what the pickle guard reads of the same open file. Inflation stops at
    :func:`inflated_limit` of the file's size, before any of it is decoded."""
    try:
        if fh.peek(2)[:2] == GZIP_MAGIC:
            with gzip.GzipFile(fileobj=fh, mode="rb") as gz:
                yield io.BufferedReader(_InflationCap(gz, os.fstat(fh.fileno()).st_size, what), STREAM_BUFFER_BYTES)
        else:
            yield fh
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise InputRefused(f"the {what} is not valid gzip ({exc}); it may be truncated") from None


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


def inflated_limit(compressed_bytes: int, limits: Limits = LIMITS) -> int:
    """How far a gzip file of ``compressed_bytes`` may inflate: a real snapshot or trace inflates 5–20×."""
    return min(limits.inflated_bytes, max(limits.inflate_floor_bytes, limits.inflate_ratio * compressed_bytes))


class _InflationCap(io.RawIOBase):
    """A gzip stream that refuses to give more than :func:`inflated_limit` of its compressed size."""

    def __init__(self, gz: gzip.GzipFile, compressed_bytes: int, what: str) -> None:
        self._gz = gz
        self._compressed = compressed_bytes
        self._limit = inflated_limit(compressed_bytes)
        self._what = what
        self._inflated = 0

    def readable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._gz.fileno()

    def readinto(self, buffer) -> int:
        n = self._gz.readinto(buffer)
        self._inflated += n
        if self._inflated > self._limit:
            raise past_ratio(self._what, self._compressed, self._limit)
        return n


def past_ratio(what: str, compressed_bytes: int, limit: int) -> InputRefused:
    """The refusal of a gzip file that inflates past :func:`inflated_limit` of its size."""
    return InputRefused(
        f"the {what} ({compressed_bytes:,} bytes of gzip) inflates past {limit:,} bytes, the inflate_ratio limit "
        f"({LIMITS.inflate_ratio}× its size, at least {exact_size_text(LIMITS.inflate_floor_bytes)})"
    )


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

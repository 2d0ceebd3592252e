"""The one way a file from outside enters the lab: bounded, depth-capped, never executed.

Every file the lab takes in (a runs file to import, a memory snapshot, a profiler trace) comes
through here. Bytes are counted as they are read, because a device or a pipe reports size 0
(``/dev/zero`` would otherwise be read forever); gzip is undone under the same cap on what it expands
to; JSON is strict (no NaN/Infinity) and its nesting is capped, because a 900-level structure loads
but then breaks every recursive consumer; pickles go through an unpickler that refuses every class, so
a hostile file can neither exhaust memory nor run code. Every refusal is an :class:`InputRefused`
whose message says what is wrong, in words a user can act on.
"""
from __future__ import annotations

import io
import json
import os
import pickle
import stat
import zlib
from pathlib import Path
from typing import Any, BinaryIO, Iterator

CHUNK_BYTES = 1 << 20
DEFAULT_MAX_DEPTH = 64
GZIP_MAGIC = b"\x1f\x8b"


class InputRefused(ValueError):
    """A file the lab will not take in; nothing was stored."""


def _mib(n: int) -> str:
    return f"{n / 2**20:,.0f} MiB" if n >= 2**20 else f"{n:,} bytes"


def _chunks(source: str | os.PathLike | BinaryIO, what: str) -> Iterator[bytes]:
    if hasattr(source, "read"):
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
            raise InputRefused(f"the {what} is larger than the {_mib(limit_bytes)} limit")
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
                    raise InputRefused(f"the {what} expands to more than the {_mib(limit_bytes)} limit")
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
    """Refuse containers nested deeper than ``max_depth`` (iteratively: no recursion to exhaust)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        if depth > max_depth:
            raise InputRefused(f"the {what} nests deeper than {max_depth} levels")
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list, tuple)))


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
        raise InputRefused(f"the {what} is not a readable pickle ({type(exc).__name__}: {exc}); "
                           f"it may be truncated") from None
    check_depth(data, max_depth, what)
    return data

"""Reading a pickle too large to hold as Python objects (a memory snapshot of a gigabyte), safely.

The plain-data unpickler of :mod:`core.intake` reads it from a counting stream that lets the caller empty the
lists being built between chunks (:func:`load_pickle_stream`). Before the unpickler acts on any byte, a
:class:`core.pickle_guard.PickleGuard` has read the opcodes up to it and refused the few that would make the
unpickler spend far more than the file holds (a memo index, a declared length, a pile of pending values, shared
tuples to hash, past the limits of :class:`core.limits.Limits`). For a large file the guard runs in a process of its own, on another core, ahead
of the unpickler (``python -m core.pickle_stream FD WHAT``), instead of taking turns with it: it reads the file
the reader opened, through the descriptor it inherits, never the path opened again (a path can be made to name
another file between two opens).
"""

from __future__ import annotations

import gc
import gzip
import io
import os
import pickle
import subprocess
import sys
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from core.errors import InputRefused
from core.intake import (
    CHUNK_BYTES,
    DEFAULT_MAX_DEPTH,
    GZIP_MAGIC,
    STREAM_BUFFER_BYTES,
    PlainDataUnpickler,
    after_the_end,
    check_depth,
    decoded,
)
from core.limits import LIMITS
from core.pickle_guard import PickleGuard
from core.units import exact_size_text

GUARD_PROCESS_BYTES = 32 << 20  # a file larger than this is checked by a process of its own (~0.3 s inline)
REPORT_BYTES = 4 << 20  # how often that process reports how far it has checked
PACKAGE_ROOT = str(Path(__file__).resolve().parent.parent)  # where that process finds ``core``
PASS_ALL = 1 << 62  # its last report: nothing the unpickler can still read needs checking


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
    max_depth: int | None = DEFAULT_MAX_DEPTH,
) -> Any:
    """A plain-data pickle read from a stream, any protocol, with at most ``limit_bytes`` consumed.

    ``path`` names the file ``stream`` reads from its start: when it is given and the file is large, the guard
    runs in a process of its own, on the descriptor the stream reads (never on ``path`` opened again).
    ``on_chunk(unpickler)`` runs between chunks while the structure is being built: it may take the
    items out of lists that are still growing (reach them through ``unpickler.memo``) so that a file
    far larger than memory allows as Python objects is read in bounded memory. Garbage collection is
    paused meanwhile: nothing built by an unpickler is garbage, and its passes over millions of fresh
    objects would only cost time. ``max_depth`` None: nesting is not checked, for a caller that reads only the
    fields it names and never walks or prints what it does not know (the walk costs as much as the unpickling).
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
        if stream.read(1):  # the unpickler gave back what it read ahead: this is what follows its STOP
            raise after_the_end(what, counted.consumed)
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
    if max_depth is not None:
        check_depth(data, max_depth, what)
    return data


if __name__ == "__main__":
    sys.exit(_guard_process_main(sys.argv[1:]))

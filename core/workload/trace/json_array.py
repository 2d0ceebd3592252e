"""The top-level elements of a JSON array, found in its bytes without building any of them.

A trace's event list can hold 100 M tiny elements (``[0,0,0,…]``: 190 KiB of gzip); any decoder that builds the
list first, even of undecoded spans, holds tens of bytes per element before a single one can be counted. Here
the array's bytes are scanned 128 KiB at a time (``bytes.translate`` keeps the bytes that matter, numpy does
the rest): quotes not escaped by an odd run of backslashes open and close strings, brackets and braces outside strings nest, and a comma outside strings at depth 1 ends
an element. The elements are then handed out in batches of byte offsets, so what is alive at once is one
batch, whatever the array holds. The bytes must be valid JSON (a decoder checked them); only the element
boundaries are found here, so a batch still goes through the typed decoder.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

SCAN_BYTES = 1 << 17  # bytes scanned at once: bounds the scanner's temporary arrays (about 1 MiB; 4 MiB took 35)
_QUOTE, _OPEN, _CLOSE, _COMMA = 1, 2, 3, 4  # what bytes.translate makes of the bytes that matter (others: 0)
_CODES = bytes(
    _QUOTE if c == ord('"') else _OPEN if c in b"[{" else _CLOSE if c in b"]}" else _COMMA if c == ord(",") else 0
    for c in range(256)
)
_DELTA = np.array([0, 0, 1, -1, 0], np.int8)  # what each code does to the depth, outside strings


class _Scan:
    """What one chunk leaves to the next: the depth, whether a string is open, and the backslashes just before."""

    def __init__(self) -> None:
        self.depth = 0
        self.in_string = 0
        self.backslashes = 0

    def escaped(self, raw: bytes, quotes: np.ndarray) -> np.ndarray:
        """Which ``quotes`` (positions in ``raw``) follow an odd run of backslashes (the run may start in an
        earlier chunk)."""
        at = np.flatnonzero(np.frombuffer(raw, np.uint8) == ord("\\"))
        if len(at):
            new = np.ones(len(at), bool)
            new[1:] = np.diff(at) != 1
            first = np.flatnonzero(new)
            last = np.append(first[1:], len(at)) - 1
            run_end, run_len = at[last], last - first + 1
            if at[0] == 0:
                run_len[0] += self.backslashes
            elif self.backslashes:
                run_end, run_len = np.append(-1, run_end), np.append(self.backslashes, run_len)
        else:
            run_end, run_len = np.array([-1]), np.array([self.backslashes])
        self.backslashes = int(run_len[-1]) if run_end[-1] == len(raw) - 1 else 0
        i = np.minimum(np.searchsorted(run_end, quotes - 1), len(run_end) - 1)
        return (run_end[i] == quotes - 1) & (run_len[i] % 2 == 1)

    def ends(self, raw: bytes) -> np.ndarray:
        """Positions in ``raw`` of the commas at depth 1 outside strings and of the bracket that closes the array."""
        codes = np.frombuffer(raw.translate(_CODES), np.uint8)
        at = np.flatnonzero(codes)
        token = codes[at]
        quote = token == _QUOTE
        if self.backslashes or b"\\" in raw:
            quote[quote] = ~self.escaped(raw, at[quote])
        quotes = np.cumsum(quote, dtype=np.int64)
        outside = ((quotes + self.in_string) & 1) == 0  # a closing quote counts as outside: it moves nothing
        depth = np.cumsum(np.where(outside, _DELTA[token], 0), dtype=np.int64) + self.depth
        if len(at):
            self.in_string = int((self.in_string + quotes[-1]) & 1)
            self.depth = int(depth[-1])
        return at[outside & (((token == _COMMA) & (depth == 1)) | ((token == _CLOSE) & (depth == 0)))]


def element_ends(buf) -> Iterator[np.ndarray]:
    """Offsets in ``buf`` (one JSON array) of where each top-level element ends: the commas between elements and
    the closing bracket, in order, a chunk's worth at a time."""
    scan = _Scan()
    view = memoryview(buf)
    for lo in range(0, len(view), SCAN_BYTES):
        yield scan.ends(bytes(view[lo : lo + SCAN_BYTES])) + lo


def batches(buf, max_items: int, max_bytes: int) -> Iterator[tuple[int, np.ndarray]]:
    """The elements of the array ``buf`` (its first byte is its ``[``) in batches ``(start, ends)``: element ``i``
    of a batch is ``buf[e[i-1] + 1 : e[i]]`` with ``e[-1] = start`` (the opening bracket or the comma before); at
    most ``max_items`` elements and, unless one element alone is longer, ``max_bytes`` bytes each. An empty
    array is one batch of one empty element."""
    start = 0
    pending = np.zeros(0, np.int64)
    for ends in element_ends(buf):
        pending = np.concatenate([pending, ends])
        while len(pending) >= max_items or (len(pending) and pending[-1] - start > max_bytes):
            n = min(max_items, max(1, int(np.searchsorted(pending, start + max_bytes, side="right"))))
            yield start, pending[:n]
            start, pending = int(pending[n - 1]), pending[n:]
    if len(pending):
        yield start, pending

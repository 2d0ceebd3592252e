"""Units: bytes, durations, rates and timestamps as text, one definition for the CLI, the pages, the report
and the charts. Standard library only, and nothing from ``core``: every layer may import it.

Rules, chosen once:

- **Bytes** are binary (1 KiB = 1024 B, as the allocator and ``nvidia-smi`` count). :func:`bytes_text` picks
  the largest unit (B, KiB, MiB, GiB, TiB) that the value reaches and prints a fixed ``digits`` decimals
  (one by default, so a column of sizes lines up: ``"1.5 KiB"``, ``"1.0 GiB"``); whole bytes have no
  decimals (``"512 B"``); thousands are separated by commas; a value that rounds up to 1024 of a unit is
  written in the next (``"1.0 MiB"``, never ``"1,024.0 KiB"``). Negative values (a change) keep their sign.
- **Exact sizes** (:func:`exact_size_text`) are labels of sizes that are exact by construction — a size
  a user chose (a collective's message, a copy) or a limit (``"256 MiB"`` import limit): the largest unit
  that divides the size, with no decimals (``"1 GiB"``, ``"1536 B"``), so that :func:`parse_size` reads
  the label back to the same bytes and a limit is never rounded.
- **Durations** (:func:`duration_text`) are in µs, ms, s or min, whichever keeps the number between 1 and
  1000 (minutes from 60 s on).
- **Timestamps** (:func:`timestamp_text`) are the stored ISO-8601 strings (UTC) cut to the second (or the
  minute) with a space for the ``T``: ``"2026-03-01 12:34:56"``.
- **Rates** (:func:`rate_text`): a value and its unit, e.g. ``"912.3 GB/s"``; bandwidth in GB/s is decimal
  (1 GB = 10⁹ bytes), as nccl-tests and CUDA's bandwidthTest report it.
- **Shapes** (:func:`shape_text`, :func:`shapes_text`) are a tensor's sizes joined by ``×``, as a person writes
  them: ``4×8``, several separated by commas (``4×8, 8``), a scalar ``scalar`` — never a Python list (``[[4, 8]]``).
- **Numbers in a column** (:func:`numbers_text`) are written in one notation: decimal with thousands separated
  (``"606,519"``, ``"0.0066"``) where every one lies between 0.001 and 10¹⁵, else every one as a power of ten
  (``"1.79769×10³⁰⁸"``, ``"6.5504×10⁴"``) — never ``1.7976931348623157e+308`` beside ``65504``.
- **Missing values** (a figure not measured, not applicable, or with no reason to give) are written
  :data:`MISSING`, ``"—"``, in every table, never ``None`` or ``nan``; the page says once why a column has them.
- **Throughput** (:func:`throughput_unit`) is stored in TFLOPS (TOPS for integer ops) and shown in TFLOPS on
  a GPU, in GFLOPS (GOPS) on a CPU, whose figures are a thousand times smaller.
"""

from __future__ import annotations

import re

KIB = 2**10
MIB = 2**20
GIB = 2**30
TIB = 2**40
_BINARY = (("TiB", TIB), ("GiB", GIB), ("MiB", MIB), ("KiB", KIB))
_UP = (("B", 1),) + _BINARY[::-1]
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(b|k|kib|m|mib|g|gib)?\s*$", re.IGNORECASE)
_SIZE_UNITS = {"b": 1, "k": KIB, "kib": KIB, "m": MIB, "mib": MIB, "g": GIB, "gib": GIB}
GFLOPS_PER_TFLOPS = 1e3
MISSING = "—"  # a value a table does not have


def count_text(n: int, noun: str, plural: str | None = None) -> str:
    """A count and its noun, singular or plural as English has it, with thousands separated: ``count_text(1,
    "row")`` → ``"1 row"``, ``count_text(1200, "run")`` → ``"1,200 runs"`` (never "1 rows" or "run(s)")."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def shape_text(dims: list[int] | tuple[int, ...]) -> str:
    """A tensor's shape as a person writes it: ``[4, 8]`` → ``"4×8"``; a scalar's ``[]`` → ``"scalar"``."""
    return "×".join(str(d) for d in dims) if dims else "scalar"


def shapes_text(shapes: list | tuple) -> str:
    """Several tensors' shapes (an operator's inputs): ``[[4, 8], [8]]`` → ``"4×8, 8"``; none → ``"none"``."""
    return ", ".join(shape_text(d) for d in shapes) if shapes else "none"


_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")
DECIMAL_RANGE = (1e-3, 1e15)  # a column whose non-zero magnitudes all lie in [low, high) is written in decimals


def power_of_ten_text(x: float, digits: int = 4) -> str:
    """``x`` as a power of ten with at most ``digits`` significant digits: 65504 → ``"6.5504×10⁴"``."""
    mantissa, exponent = f"{x:.{digits - 1}e}".split("e")
    mantissa = mantissa.rstrip("0").rstrip(".") if "." in mantissa else mantissa
    return f"{mantissa}×10{str(int(exponent)).translate(_SUPERSCRIPT)}"


def numbers_text(values, digits: int = 4) -> list[str]:
    """A column's numbers as text in one notation, at most ``digits`` significant digits (whole numbers in full):
    decimal, thousands separated, where every non-zero magnitude lies in :data:`DECIMAL_RANGE`, else every one as a
    power of ten; a missing value (None, NaN) reads :data:`MISSING`, an infinity ``"inf"``."""

    def missing(v) -> bool:
        return v is None or (isinstance(v, float) and v != v)

    finite = [abs(float(v)) for v in values if not missing(v) and abs(float(v)) not in (0.0, float("inf"))]
    decimal = all(DECIMAL_RANGE[0] <= v < DECIMAL_RANGE[1] for v in finite)

    def one(v) -> str:
        if missing(v):
            return MISSING
        x = float(v)
        if x == 0 or abs(x) == float("inf"):
            return "0" if x == 0 else f"{x:f}"
        if not decimal:
            return power_of_ten_text(x, digits)
        return f"{x:,.0f}" if x.is_integer() or abs(x) >= 10**digits else f"{x:,.{digits}g}"

    return [one(v) for v in values]


def bytes_text(n: float, digits: int = 1) -> str:
    """``n`` bytes in the largest binary unit it reaches, with ``digits`` decimals: 1536 → ``"1.5 KiB"``."""
    for unit, scale in _UP:
        places = 0 if scale == 1 else digits
        if unit == "TiB" or round(abs(n) / scale, places) < 1024:
            return f"{n / scale:,.{places}f} {unit}"
    raise AssertionError("unreachable")


def exact_size_text(nbytes: int) -> str:
    """A size in the largest unit that divides it, without decimals: ``"1 GiB"``, ``"3 MiB"``, ``"1000 B"``;
    :func:`parse_size` reads it back."""
    for unit, scale in _BINARY[1:]:
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale} {unit}"
    return f"{nbytes} B"


def size_text(nbytes: int) -> str:
    """A size as exactly as it is and as a reader takes it in: :func:`exact_size_text` where a unit divides it into
    fewer than 1024 (``"8 MiB"``), else the bytes, thousands separated, with the nearest binary unit beside them:
    ``"402,176 B (392.8 KiB)"``, ``"31,502,336 B (30.0 MiB)"`` (never ``"30764 KiB"`` beside the others)."""
    exact = exact_size_text(nbytes)
    count, unit = exact.split(" ")
    return exact if int(count) < 1024 or unit == "GiB" else f"{nbytes:,} B ({bytes_text(nbytes)})"


def parse_size(text: str) -> int:
    """'1KiB', '16MiB', '1GiB', '4k', '1048576' → bytes (K/M/G are binary, as in nccl-tests)."""
    match = _SIZE.match(str(text))
    if not match:
        raise ValueError(f"{text!r} is not a size: write bytes or a number with KiB, MiB or GiB (e.g. 1MiB)")
    value = float(match.group(1)) * _SIZE_UNITS[(match.group(2) or "b").lower()]
    if not value.is_integer():
        raise ValueError(f"{text!r} is not a whole number of bytes")
    return int(value)


def duration_text(seconds: float, digits: int = 1) -> str:
    """``seconds`` in ns, µs, ms, s or min, whichever fits: 0.0125 → ``"12.5 ms"``, 90 → ``"1.5 min"``; under a
    µs in whole ns (a trace's sub-µs kernels and gaps: 3.5e-7 → ``"350 ns"``, not ``"0.3 µs"``); nothing at all is
    ``"0 s"`` (not ``"0.0 s"`` beside figures in µs and ms, as if it were measured to a tenth of a second)."""
    size = abs(seconds)
    if size == 0:
        return "0 s"  # nothing: no unit to choose and no digit to give
    if size >= 60:
        return f"{seconds / 60:,.{digits}f} min"
    if size >= 1 or size == 0:
        return f"{seconds:.{digits}f} s"
    if size >= 1e-3:
        return f"{seconds * 1e3:.{digits}f} ms"
    if size >= 1e-6:
        return f"{seconds * 1e6:.{digits}f} µs"
    return f"{seconds * 1e9:.0f} ns"


def us_text(us: float, digits: int = 1) -> str:
    """A time a trace or a snapshot counts in µs, written as :func:`duration_text` writes any time."""
    return duration_text(us / 1e6, digits)


def rate_text(value: float, unit: str, digits: int = 1) -> str:
    """A rate with its unit: ``rate_text(912.34, "GB/s")`` → ``"912.3 GB/s"``."""
    return f"{value:,.{digits}f} {unit}"


def throughput_unit(is_cuda: bool, ops: bool = False) -> tuple[str, float]:
    """The unit a stored TFLOPS value is shown in on this device, and the factor it is multiplied by:
    ``("TFLOPS", 1.0)`` on a GPU, ``("GFLOPS", 1000.0)`` on a CPU (TOPS/GOPS with ``ops``)."""
    unit = ("T" if is_cuda else "G") + ("OPS" if ops else "FLOPS")
    return unit, 1.0 if is_cuda else GFLOPS_PER_TFLOPS


def timestamp_text(iso: str | None, minutes: bool = False) -> str:
    """A stored ISO timestamp as a person reads it: ``"2026-03-01T12:34:56.789+00:00"`` →
    ``"2026-03-01 12:34:56"`` (``"2026-03-01 12:34"`` with ``minutes``); None → ``""``; shorter strings
    are kept as they are."""
    if not iso:
        return ""
    return str(iso)[: 16 if minutes else 19].replace("T", " ")

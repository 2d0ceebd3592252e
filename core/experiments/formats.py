"""``formats``: what each number format can hold, and what it stores for one value — asked of PyTorch.

Three pieces, all in one run so the page and ``python -m core formats --value X`` agree:

* the **format table** (``meta["table"]``): bits, range, epsilon, read from ``torch.finfo`` /
  ``torch.iinfo`` where torch has them. TF32 has no torch dtype: it is derived from its definition
  (fp32's 8-bit exponent with a 10-bit mantissa). int4 and float4 e2m1, which ``iinfo``/``finfo``
  refuse, are derived from their definitions too; the ``source`` column says which is which.
* the **value inspector** (``rows``): the value cast with torch to every format, the error against
  the typed decimal (exact :class:`~decimal.Decimal` arithmetic), the bit pattern split into
  sign | exponent | mantissa, and the outcome in ``status``: exact, rounded, subnormal, overflow
  (to inf or NaN), saturated (clamped to max), underflow (to zero), sign lost, nan, unsupported.
* the **spacing data** (``meta["spacing"]``): the gap to the next representable number (ULP) over
  each float format's whole range, measured by stepping the bit pattern by one.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING

from core.errors import ConfigError
from core.experiment import Context, Experiment, Output, Progress
from core.rows.formats import FormatInfo, FormatsSummary, FormatValue, SpacingPoint

if TYPE_CHECKING:
    import torch

# The formats the course notes discuss, in table order (their torch dtypes by name; tf32 has none); other
# float dtypes torch offers are appended.
_NAMED = {
    "fp64": "float64",
    "fp32": "float32",
    "tf32": None,
    "bf16": "bfloat16",
    "fp16": "float16",
    "fp8_e4m3fn": "float8_e4m3fn",
    "fp8_e5m2": "float8_e5m2",
}
_BITS_VIEW = {8: "int64", 4: "int32", 2: "int16", 1: "uint8"}  # the integer dtype a pattern of each width is read as
# Formats without finfo/iinfo support in torch: (sign, exponent, mantissa) bits and bias, by definition.
_TF32_DEF = dict(sign_bits=1, exponent_bits=8, mantissa_bits=10, bias=127)
_FP4_E2M1_DEF = dict(sign_bits=1, exponent_bits=2, mantissa_bits=1, bias=1)
TF32_DROPPED_BITS = 23 - 10  # fp32 mantissa bits a TF32 input loses
INT_RANGES = {"int8": (-128, 127), "int4": (-8, 7)}


@dataclass(frozen=True)
class Format:
    name: str  # "fp32", "tf32", "int4", ...
    kind: str  # "float" or "int"
    dtype: torch.dtype | None  # None where torch has no dtype (tf32) or cannot cast (int4)


def _bits_view(dtype: torch.dtype) -> torch.dtype:
    """The integer dtype of the same width, to read ``dtype``'s bit patterns."""
    import torch

    return getattr(torch, _BITS_VIEW[dtype.itemsize])


def _extra_float_dtypes() -> list[torch.dtype]:
    """Float dtypes this torch build adds beyond the named ones (fnuz fp8, e8m0, fp4 ...)."""
    import torch

    known = {getattr(torch, d) for d in _NAMED.values() if d is not None}
    found = {getattr(torch, n) for n in dir(torch) if isinstance(getattr(torch, n), torch.dtype)}
    extra = [d for d in found if d.is_floating_point and not d.is_complex and d not in known]
    return sorted(extra, key=str)


def _short(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.").replace("float", "fp")


def formats() -> list[Format]:
    import torch

    out = [Format(n, "float", getattr(torch, d) if d else None) for n, d in _NAMED.items()]
    out += [Format(_short(d), "float", d) for d in _extra_float_dtypes()]
    return out + [Format("int8", "int", torch.int8), Format("int4", "int", None)]


def _from_definition(sign_bits: int, exponent_bits: int, mantissa_bits: int, bias: int, ieee_top: bool) -> dict:
    """Range of a binary float format from its field widths (``ieee_top``: top exponent = inf/NaN)."""
    top = 2**exponent_bits - (2 if ieee_top else 1)
    return {
        "max": (2 - 2.0**-mantissa_bits) * 2.0 ** (top - bias),
        "smallest_normal": 2.0 ** (1 - bias),
        "smallest_subnormal": 2.0 ** (1 - bias - mantissa_bits),
        "eps": 2.0**-mantissa_bits,
    }


def _pattern_value(dtype: torch.dtype, pattern: int) -> float:
    import torch

    return torch.tensor([pattern], dtype=_bits_view(dtype)).view(dtype).double().item()


def _float_row(fmt: Format) -> dict:
    """finfo's numbers, with epsilon measured by stepping 1.0's bit pattern (finfo is wrong for some fp8)."""
    import torch

    dtype = fmt.dtype
    assert dtype is not None  # tf32, the one float format without a dtype, has its own row
    try:
        info = torch.finfo(dtype)
        one = torch.ones(1, dtype=dtype)
        eps = _next_up(fmt, one).item() - 1.0
        mantissa = round(-math.log2(eps))
        sign = 0 if str(dtype).endswith("fnu") else 1  # e8m0fnu is unsigned
        lowest = _pattern_value(dtype, 1)  # the first pattern above zero
        subnormal = lowest if lowest < info.smallest_normal else None
        note = (
            ""
            if eps == info.eps
            else f"torch.finfo says eps={info.eps:g}, but the gap above 1.0 measures {eps:g}; the table shows the gap"
        )
        return {
            "bits": info.bits,
            "sign_bits": sign,
            "exponent_bits": info.bits - sign - mantissa,
            "mantissa_bits": mantissa,
            "bytes": dtype.itemsize,
            "max": info.max,
            "min": info.min if sign else 0.0,
            "smallest_normal": info.smallest_normal,
            "smallest_subnormal": subnormal,
            "eps": eps,
            "source": f"torch.finfo({dtype}); eps and bit fields measured from bit patterns",
            "note": note,
        }
    except (TypeError, RuntimeError) as exc:
        if dtype == getattr(torch, "float4_e2m1fn_x2", None):
            d = _from_definition(**_FP4_E2M1_DEF, ieee_top=False)
            return {
                "bits": 4,
                **{k: v for k, v in _FP4_E2M1_DEF.items() if k != "bias"},
                "bytes": 0.5,
                **d,
                "min": -d["max"],
                "source": f"definition (E2M1, bias 1, no inf/NaN, two per byte): torch.finfo fails: {exc}",
            }
        return {"source": f"torch.finfo({dtype}) failed: {exc}"}


def _tf32_row() -> dict:
    """TF32's numbers from its definition (torch has no dtype for it)."""
    d = _from_definition(**_TF32_DEF, ieee_top=True)
    return {
        "bits": 19,
        **{k: v for k, v in _TF32_DEF.items() if k != "bias"},
        "bytes": 4,
        **d,
        "min": -d["max"],
        "source": "definition: fp32's sign and 8-bit exponent, 10-bit mantissa "
        "(no torch dtype; stored in memory as fp32, 4 bytes)",
    }


def _int_row(fmt: Format) -> dict:
    """An integer format's numbers: torch.iinfo's, or int4's from its definition (iinfo refuses it)."""
    import torch

    lo, hi = INT_RANGES[fmt.name]
    bits = int(math.log2(hi - lo + 1))
    source = (
        f"torch.iinfo({fmt.dtype})"
        if fmt.dtype is not None
        else "definition: 4-bit two's complement (torch.iinfo refuses torch.int4; no cast kernel)"
    )
    if fmt.dtype is not None:
        info = torch.iinfo(fmt.dtype)
        lo, hi, bits = info.min, info.max, info.bits
    return {
        "bits": bits,
        "sign_bits": 1,
        "exponent_bits": 0,
        "mantissa_bits": bits - 1,
        "bytes": bits / 8,
        "max": float(hi),
        "min": float(lo),
        "smallest_normal": None,
        "smallest_subnormal": None,
        "eps": 1.0,
        "source": source,
    }


def format_table() -> list[FormatInfo]:
    """One row per format: field widths, range, epsilon and where each number comes from (the keys in the order
    runs store them: a range from a definition has its min after eps)."""
    rows = []
    for fmt in formats():
        row = _tf32_row() if fmt.name == "tf32" else _int_row(fmt) if fmt.kind == "int" else _float_row(fmt)
        mant = row.get("mantissa_bits")
        digits = (
            (mant + 1) * math.log10(2)
            if fmt.kind == "float" and mant is not None
            else (math.log10(row["max"]) if "max" in row else None)
        )
        head = {"format": fmt.name, "kind": fmt.kind, "torch_dtype": str(fmt.dtype) if fmt.dtype else None, "note": ""}
        rows.append(FormatInfo.from_row({**head, **row, "decimal_digits": digits}))
    return rows


# ---- the value inspector -------------------------------------------------------------------------


def tf32_round(x: torch.Tensor) -> torch.Tensor:
    """fp32 → TF32 → fp32: round the mantissa to 10 bits, to nearest, ties to even (bit arithmetic).

    Inf and NaN pass through; a carry out of the largest binade becomes inf, as in any RNE rounding.
    """
    import torch

    bits = x.to(torch.float32).view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    special = (bits & 0x7F800000) == 0x7F800000
    keep = (bits >> TF32_DROPPED_BITS) & 1
    rounded = (bits + (1 << (TF32_DROPPED_BITS - 1)) - 1 + keep) & ~((1 << TF32_DROPPED_BITS) - 1)
    out = torch.where(special, bits, rounded) & 0xFFFFFFFF
    return torch.where(out >= 2**31, out - 2**32, out).to(torch.int32).view(torch.float32)


def _cast(fmt: Format, value: float, device: str) -> tuple[float, int, int]:
    """(stored value, bit pattern as unsigned int, pattern width) of ``value`` in ``fmt``, cast on ``device``."""
    import torch

    x = torch.tensor(value, dtype=torch.float64, device=device)
    if fmt.name == "tf32":
        t = tf32_round(x)
        pattern = int(t.view(torch.int32).item()) & 0xFFFFFFFF
        return t.double().item(), pattern >> TF32_DROPPED_BITS, 19
    if fmt.kind == "int":
        if not math.isfinite(value) and math.isnan(value):
            raise ValueError("integers have no NaN")
        lo, hi = INT_RANGES[fmt.name]
        q = int(x.round().clamp(lo, hi).to(torch.int64).item())  # torch.round: half to even
        if fmt.dtype is not None:
            q = int(torch.tensor(q).to(fmt.dtype).item())
        width = int(math.log2(hi - lo + 1))
        return float(q), q & ((1 << width) - 1), width
    assert fmt.dtype is not None  # every other float format has one
    t = x.to(fmt.dtype)
    width = fmt.dtype.itemsize * 8
    pattern = int(t.view(_bits_view(fmt.dtype)).item()) & ((1 << width) - 1)
    return t.double().item(), pattern, width


def _errors(stored: float, exact: Decimal | None, value: float) -> tuple[float, float]:
    if exact is None or not math.isfinite(stored):  # a NaN/inf input or an overflowed store
        if math.isnan(stored) or math.isnan(value):
            return (0.0, 0.0) if math.isnan(stored) and math.isnan(value) else (math.nan, math.nan)
        return (0.0, 0.0) if stored == value else (math.inf, math.inf)
    abs_err = abs(Decimal(stored) - exact)
    rel = float(abs_err / abs(exact)) if exact != 0 else (0.0 if abs_err == 0 else math.inf)
    return float(abs_err), rel


def _status(value: float, stored: float, info: FormatInfo, exact: Decimal | None) -> str:
    if math.isnan(value):
        return "nan"
    if math.isnan(stored):
        return "overflow"  # a finite value that became NaN (fnuz fp8 formats have no inf)
    if math.isinf(stored) and not math.isinf(value):
        return "overflow"
    big, small = info.max, info.min
    if big is not None and ((value > big and stored == big) or (small is not None and value < small == stored)):
        return "saturated"
    if value != 0 and stored == 0:
        return "underflow"
    if value < 0 < stored:
        return "sign lost"
    if (Decimal(stored) == exact) if exact is not None else stored == value:
        return "exact"
    return "subnormal" if _is_subnormal(stored, info) else "rounded"


def _is_subnormal(stored: float, info: FormatInfo) -> bool:
    normal = info.smallest_normal
    return bool(info.is_float and normal and 0 < abs(stored) < normal)


def _split(pattern: int, width: int, info: FormatInfo) -> dict:
    """The pattern's sign, exponent and mantissa bits as text, and all of them joined by "|"."""
    text = format(pattern, f"0{width}b")
    if not info.is_float:
        return {"sign": text[0], "exponent": "", "mantissa": text[1:], "bits": text}
    s, e = info.sign_bits, info.exponent_bits
    assert s is not None and e is not None  # a format torch casts to has its fields in the table
    parts = [text[:s], text[s : s + e], text[s + e :]]
    return {"sign": parts[0], "exponent": parts[1], "mantissa": parts[2], "bits": "|".join(p for p in parts if p)}


def exact_decimal(value: float) -> Decimal | None:
    """The number the user typed: the shortest decimal that round-trips to ``value`` (None for inf/NaN)."""
    return Decimal(repr(value)) if math.isfinite(value) else None


def inspect(value: float, table: list[FormatInfo] | None = None, device: str = "cpu") -> list[FormatValue]:
    """One row per format: what torch stores for ``value``, its error, bit fields and outcome."""
    by_format = {i.format: i for i in (table or format_table())}
    exact = exact_decimal(value)
    rows = []
    for fmt in formats():
        info = by_format[fmt.name]
        try:
            stored, pattern, width = _cast(fmt, value, device)
        except (RuntimeError, TypeError, ValueError) as exc:
            reason = f"cannot store {value} as {fmt.name}: {str(exc).splitlines()[0]}"
            rows.append(FormatValue(fmt.name, value, status="unsupported", reason=reason))
            continue
        abs_err, rel_err = _errors(stored, exact, value)
        status = _status(value, stored, info, exact)
        rows.append(
            FormatValue(
                fmt.name,
                value,
                stored,
                abs_err,
                rel_err,
                **_split(pattern, width, info),
                hex=f"0x{pattern:0{(width + 3) // 4}x}",
                status=status,
                overflow=status in ("overflow", "saturated"),
                underflow=status == "underflow",
                is_nan=math.isnan(stored),
                subnormal=_is_subnormal(stored, info),
                method=_METHOD.get(fmt.name, f"torch.tensor(x, dtype=float64).to({fmt.dtype})"),
            )
        )
    return rows


_METHOD = {
    "tf32": "x.to(float32), mantissa rounded to 10 bits (nearest, ties to even)",
    "int8": "round half to even, clamp to [-128, 127] (scale 1), .to(torch.int8)",
    "int4": "round half to even, clamp to [-8, 7] (scale 1); torch has no int4 cast kernel",
}


# ---- spacing (ULP) -------------------------------------------------------------------------------


def _next_up(fmt: Format, t: torch.Tensor) -> torch.Tensor:
    """The next representable number above each (positive, finite) element, by stepping the bits."""
    import torch

    if fmt.name == "tf32":
        bits = t.to(torch.float32).view(torch.int32) + (1 << TF32_DROPPED_BITS)
        return bits.view(torch.float32).double()
    assert fmt.dtype is not None  # every other float format has one
    return (t.view(_bits_view(fmt.dtype)) + 1).view(fmt.dtype).double()


def spacing(table: list[FormatInfo], points: int) -> Iterator[SpacingPoint]:
    """(format, magnitude, ulp) over each float format's positive range, log-spaced magnitudes."""
    import torch

    info = {i.format: i for i in table}
    for fmt in formats():
        row = info[fmt.name]
        if fmt.kind != "float" or row.max is None:
            continue
        low = row.smallest_subnormal or row.smallest_normal
        assert low is not None  # a float format with a max has a smallest normal
        xs = torch.logspace(math.log10(low), math.log10(row.max), points, dtype=torch.float64)
        try:
            t = tf32_round(xs) if fmt.name == "tf32" else xs.to(fmt.dtype)
            ups = _next_up(fmt, t)
        except (RuntimeError, TypeError):
            continue  # no cast kernel: the inspector row says so
        vals = t.double()
        keep = torch.isfinite(ups) & (vals > 0) & (ups > vals)
        seen = set()
        for v, u in zip(vals[keep].tolist(), ups[keep].tolist()):
            if v not in seen:
                seen.add(v)
                yield SpacingPoint(fmt.name, v, u - v)


# ---- the experiment ------------------------------------------------------------------------------


@dataclass(frozen=True)
class FormatsConfig:
    value: float = field(default=3.14159265, metadata={"help": "the number to store in every format"})
    spacing_points: int = field(default=240, metadata={"help": "magnitudes per format on the spacing chart"})

    def __post_init__(self) -> None:
        if not 10 <= self.spacing_points <= 5000:
            raise ConfigError(f"spacing_points must be between 10 and 5000, got {self.spacing_points}")


def run(cfg: FormatsConfig, ctx: Context):
    """The casts run on the selected device: conversions of out-of-range values (fp8) are device kernels."""
    table = format_table()
    yield Progress(1, 3, "format table")
    rows = [v.to_row() for v in inspect(cfg.value, table, ctx.device)]
    yield Progress(2, 3, "value inspector", rows=tuple(rows))
    ulps = tuple(spacing(table, cfg.spacing_points))
    summary = FormatsSummary(tuple(table), ulps, str(exact_decimal(cfg.value)), ctx.device)
    return Output(rows=rows, meta=summary.to_meta())


EXPERIMENTS = [
    Experiment(
        name="formats",
        title="Number formats: table, value inspector, spacing",
        config_type=FormatsConfig,
        run=run,
        description=(__doc__ or "").partition("\n")[0],
    )
]

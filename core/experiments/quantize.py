"""``quantize``: int8 and int4 quantize → dequantize round trips, symmetric and asymmetric (per tensor).

Symmetric: ``scale = max|x| / qmax``, codes in ``[-qmax, qmax]`` (qmax = 127 or 7), zero point 0.
Asymmetric: the range ``[min(x, 0), max(x, 0)]`` is mapped onto ``[0, 2^bits − 1]`` with an integer
zero point. Rounding is half to even (``torch.round``). One scale for the whole tensor is exactly
why outliers hurt: a single large value stretches the scale, and the bulk of the values collapses
onto a handful of codes — ``rmse_bulk`` (error over the non-outlier values) and ``levels_used``
show it. ``meta["values_hist"]``/``meta["codes_hist"]`` hold the histograms; for small tensors
(≤ 64 values, e.g. the course note's ``0.1, 0.5, 0.9, 1.2``) ``meta["round_trip"]`` lists every code.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from core.errors import ConfigError
from core.experiment import Context, Experiment, Output, Progress
from core.rows.quantize import Histogram, LevelCounts, QuantizeRow, QuantizeSummary, RoundTripValue

if TYPE_CHECKING:
    import torch

Distribution = Literal["normal", "uniform", "outliers", "custom"]
SCHEMES = ("symmetric", "asymmetric")
BITS = (8, 4)
SMALL_TENSOR = 64
FLOAT32_MAX = 3.4028234663852886e38  # torch.finfo(torch.float32).max


@dataclass(frozen=True)
class QuantizeConfig:
    distribution: Distribution = field(default="normal", metadata={"help": "the tensor to quantize"})
    size: int = field(default=100_000, metadata={"help": "elements (not used for custom)"})
    outlier_fraction: float = field(default=0.001, metadata={"help": "share of outliers (outliers only)"})
    outlier_scale: float = field(default=50.0, metadata={"help": "outlier magnitude in standard deviations"})
    values: tuple[float, ...] = field(default=(0.1, 0.5, 0.9, 1.2), metadata={"help": "the custom tensor"})
    seed: int = field(default=0, metadata={"help": "random seed"})
    bins: int = field(default=80, metadata={"help": "histogram bins"})

    def __post_init__(self) -> None:
        if not 16 <= self.size <= 10_000_000:
            raise ConfigError(f"size must be between 16 and 10000000, got {self.size}")
        if not 0 < self.outlier_fraction <= 0.5:
            raise ConfigError(f"outlier_fraction must be in (0, 0.5], got {self.outlier_fraction}")
        if not 1 <= self.outlier_scale <= 1e6:
            raise ConfigError(f"outlier_scale must be between 1 and 1e6, got {self.outlier_scale}")
        if self.distribution == "custom" and not 1 <= len(self.values) <= 100_000:
            raise ConfigError(f"values must hold 1 to 100000 numbers, got {len(self.values)}")
        if not all(math.isfinite(v) for v in self.values):
            raise ConfigError("values must be finite numbers")
        if any(abs(v) > FLOAT32_MAX for v in self.values):
            raise ConfigError(
                f"values must fit in float32 (|value| ≤ {FLOAT32_MAX:.6g}): the tensor is float32, "
                f"and a larger value becomes inf"
            )
        if not 5 <= self.bins <= 1000:
            raise ConfigError(f"bins must be between 5 and 1000, got {self.bins}")


@dataclass(frozen=True)
class RoundTrip:
    codes: torch.Tensor  # integers, as int64
    dequantized: torch.Tensor
    scale: float
    zero_point: int
    qmin: int
    qmax: int


def quantize(x: torch.Tensor, bits: int, scheme: str) -> RoundTrip:
    """Per-tensor quantize → dequantize of ``x`` (float) with ``bits``-bit integers."""
    import torch

    if scheme == "symmetric":
        qmax = 2 ** (bits - 1) - 1
        qmin = -qmax
        scale = x.abs().max().item() / qmax or 1.0
        zero_point = 0
    elif scheme == "asymmetric":
        qmin, qmax = 0, 2**bits - 1
        lo, hi = min(x.min().item(), 0.0), max(x.max().item(), 0.0)
        scale = (hi - lo) / qmax or 1.0
        zero_point = int(min(max(round(-lo / scale), qmin), qmax))
    else:
        raise ConfigError(f"scheme must be one of {', '.join(SCHEMES)}, got {scheme!r}")
    xd = x.double()
    codes = (torch.round(xd / scale) + zero_point).clamp(qmin, qmax).to(torch.int64)
    return RoundTrip(codes, (codes - zero_point).double() * scale, scale, zero_point, qmin, qmax)


def make_tensor(cfg: QuantizeConfig, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(tensor, mask of its outliers): normal(0, 1), uniform(−1, 1), normal plus ±outlier_scale spikes, or custom."""
    import torch

    gen = torch.Generator(device=device).manual_seed(cfg.seed)
    if cfg.distribution == "custom":
        x = torch.tensor(cfg.values, dtype=torch.float32, device=device)
        return x, torch.zeros_like(x, dtype=torch.bool)
    if cfg.distribution == "uniform":
        x = torch.rand(cfg.size, device=device, generator=gen) * 2 - 1
        return x, torch.zeros_like(x, dtype=torch.bool)
    x = torch.randn(cfg.size, device=device, generator=gen)
    mask = torch.zeros_like(x, dtype=torch.bool)
    if cfg.distribution == "outliers":
        count = max(1, round(cfg.size * cfg.outlier_fraction))
        idx = torch.randperm(cfg.size, device=device, generator=gen)[:count]
        signs = torch.where(torch.rand(count, device=device, generator=gen) < 0.5, -1.0, 1.0)
        x[idx] = signs * cfg.outlier_scale
        mask[idx] = True
    return x, mask


def _metrics(x: torch.Tensor, rt: RoundTrip, outliers: torch.Tensor) -> dict:
    xd = x.double()
    err = rt.dequantized - xd
    rmse = err.pow(2).mean().sqrt().item()
    signal = xd.pow(2).mean().sqrt().item()
    bulk = ~outliers
    return {
        "scale": rt.scale,
        "zero_point": rt.zero_point,
        "qmin": rt.qmin,
        "qmax": rt.qmax,
        "rmse": rmse,
        "max_abs_error": err.abs().max().item(),
        "rel_rmse": rmse / signal if signal else 0.0,
        "sqnr_db": 20 * math.log10(signal / rmse) if rmse and signal else math.inf,
        "rmse_bulk": err[bulk].pow(2).mean().sqrt().item() if bulk.any() else None,
        "levels_used": int(rt.codes.unique().numel()),
        "levels_total": rt.qmax - rt.qmin + 1,
        "at_limits": int(((rt.codes == rt.qmin) | (rt.codes == rt.qmax)).sum().item()),
    }


def _hist(x: torch.Tensor, bins: int) -> Histogram:
    import torch

    lo, hi = x.min().item(), x.max().item()
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5
    counts = torch.histc(x.double().cpu(), bins=bins, min=lo, max=hi)
    edges = torch.linspace(lo, hi, bins + 1, dtype=torch.float64)
    return Histogram(tuple(edges.tolist()), tuple(int(c) for c in counts.tolist()))


def _levels(name: str, rt: RoundTrip) -> LevelCounts:
    """How many values landed on each integer level of the scheme."""
    import torch

    levels = torch.arange(rt.qmin, rt.qmax + 1, device=rt.codes.device)
    counts = torch.bincount(rt.codes - rt.qmin, minlength=rt.qmax - rt.qmin + 1)
    values = ((levels - rt.zero_point).double() * rt.scale).tolist()
    return LevelCounts(name, tuple(levels.tolist()), tuple(counts.tolist()), tuple(values))


def run(cfg: QuantizeConfig, ctx: Context):
    x, outliers = make_tensor(cfg, ctx.device)
    rows: list[dict] = []
    codes_hist: list[LevelCounts] = []
    round_trip: list[RoundTripValue] = []
    combos = [(b, s) for b in BITS for s in SCHEMES]
    for i, (bits, scheme) in enumerate(combos):
        rt = quantize(x, bits, scheme)
        name = f"int{bits} {scheme}"
        row = QuantizeRow(
            name, bits, scheme, cfg.distribution, x.numel(), int(outliers.sum().item()), **_metrics(x, rt, outliers)
        ).to_row()
        rows.append(row)
        codes_hist.append(_levels(name, rt))
        if x.numel() <= SMALL_TENSOR:
            round_trip += [
                RoundTripValue(name, v, c, d)
                for v, c, d in zip(x.double().tolist(), rt.codes.tolist(), rt.dequantized.tolist())
            ]
        yield Progress(i + 1, len(combos), name, rows=(row,))
    meta = QuantizeSummary(_hist(x, cfg.bins), tuple(codes_hist), tuple(round_trip)).to_meta()
    return Output(rows=rows, meta=meta)


EXPERIMENTS = [
    Experiment(
        name="quantize",
        title="Integer quantization round trip (int8, int4)",
        config_type=QuantizeConfig,
        run=run,
        description=(__doc__ or "").partition("\n")[0],
    )
]

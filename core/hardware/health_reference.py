"""What a healthy card of each exact SKU should measure: one table of references, their kind, source and date.

A reference is the *published measured* figure for the SKU where one exists (the MAMF tables of
:mod:`core.hardware.published`), else the datasheet figure times a stated expected fraction (nobody
reaches a sheet's peak; the fraction says how much of it a healthy card delivers and why). A device
without an entry gets "no reference for <name>", never a neighbour's figure: the SKU is the datasheet
entry :func:`core.hardware.specs.match_spec` picked by name *and* memory size, so an H100 PCIe is never
judged by the H100 SXM's numbers, nor an A100 40GB by the 80GB's.

Every verdict uses the same two thresholds (:data:`PASS_FRACTION`, :data:`FAR_FRACTION`) against the
reference; their reasons are stated beside them, and every rule of the verdict with its source is :data:`RULES`.

Like for like: a published maximum is the best of a shape search, so only the best of a search (or the same best
shape) is judged against it. A fixed shape (the soak's 8192³) is judged per clock against the same shape on a
healthy card (:data:`SAME_SHAPE`): TFLOPS per GHz of SM clock, so a card held down by its power cap, which is
normal, is told apart from one that delivers less per clock, which is not.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from core.hardware import dtypes, published
from core.hardware.clocks import LOW_CLOCK_FRACTION, LOW_POWER_FRACTION, NVML_REASONS
from core.hardware.specs import PEAK_CLOCK_MHZ, SPECS, DeviceSpec, spec_for_device, unit_for

# pass: at least 85 % of the reference. Clocks fall under sustained load on healthy cards (B200: 1965 →
# ~1580 MHz, up to 15 % of matmul throughput, reported by mamf-finder's users) and one large square shape
# is not the best shape of a search; less than that is not explained by either.
PASS_FRACTION = 0.85
# far below: under 70 %. Beyond any clock or shape effect: the card DCGM's long diagnostic passed at 6.7 of
# 19 fp32 TFLOPS (35 %) was broken, and gpu-fryer already flags 10 % below the best GPU of the box.
FAR_FRACTION = 0.70
THRESHOLD_REASON = (
    f"pass ≥ {PASS_FRACTION:.0%} of the reference (healthy cards lose up to 15 % to clocks under sustained "
    f"load); far below < {FAR_FRACTION:.0%} (beyond any clock or shape effect)"
)

# Datasheet × expected fraction, where no measured figure is published for the SKU.
# Matmul: the published maxima reach 70.9–92.7 % of their sheets (mamf-finder's tables, core.hardware.published);
# the lab's fixed square shape is held to the low end of that range.
MATMUL_FRACTION = 0.70
# Pinned host copies: PCIe's 128b/130b encoding and packet headers leave about 85 % of the link's raw rate
# for payload; CUDA's bandwidthTest reaches ~26 of 32 GB/s on PCIe Gen4 x16 hosts. 75 % leaves room for the host.
HOST_COPY_FRACTION = 0.75
# NVLink copies and all_reduce bus bandwidth: nccl-tests' busbw and p2pBandwidthLatencyTest reach
# 75–85 % of NVLink's per-direction rate on HGX boards.
NVLINK_FRACTION = 0.75

# One FLOPS dtype per datasheet column: fp8 as the published tables run it, not fp8-fast-accum; no int8 (TOPS).
MATMUL_DTYPES = tuple(d.name for d in dtypes.MATMUL if d.column == d.name and not d.integer)
HOST_FIGURES = ("h2d pinned", "d2h pinned")
PEER_FIGURE = "peer copy"
ALL_REDUCE_FIGURE = "all_reduce busbw"

_H100_SHEET = "NVIDIA H100 Tensor Core GPU datasheet (h100-datasheet-2287922, 2023)"
_H200_SHEET = "NVIDIA H200 Tensor Core GPU datasheet (h200-datasheet-3002446, 2024)"
_A100_SHEET = "NVIDIA A100 Tensor Core GPU datasheet (nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf, 2021)"
_GEN5 = (64.0, "PCIe Gen5 x16: 128 GB/s both directions, 64 GB/s each")
_GEN4 = (32.0, "PCIe Gen4 x16: 64 GB/s both directions, 32 GB/s each")
# Per SKU: (GB/s per direction, what the sheet says, the sheet).
HOST_LINK: dict[str, tuple[float, str, str]] = {
    "h100-sxm": (*_GEN5, _H100_SHEET),
    "h100-pcie": (*_GEN5, _H100_SHEET),
    "h100-nvl": (*_GEN5, _H100_SHEET),
    "h200-sxm": (*_GEN5, _H200_SHEET),
    "h200-nvl": (*_GEN5, _H200_SHEET),
    "a100-sxm-80": (*_GEN4, _A100_SHEET),
    "a100-sxm-40": (*_GEN4, _A100_SHEET),
    "a100-pcie-80": (*_GEN4, _A100_SHEET),
    "a100-pcie-40": (*_GEN4, _A100_SHEET),
    "l40s": (*_GEN4, "NVIDIA L40S GPU datasheet (l40s-datasheet-2848009, 2023)"),
    "l4": (*_GEN4, "NVIDIA L4 Tensor Core GPU datasheet (l4-datasheet-2595652, 2023)"),
    "a10": (*_GEN4, "NVIDIA A10 Tensor Core GPU datasheet (a10-datasheet-1641013, 2021)"),
}
# Per SKU whose GPUs all reach each other over NVLink (HGX boards): GB/s per direction. The PCIe and NVL
# cards join only bridged pairs (H100 PCIe: 12 links, not the SXM's 18), so a copy's path depends on the
# pair: no reference rather than the wrong one.
NVLINK: dict[str, tuple[float, str, str]] = {
    "h100-sxm": (450.0, "NVLink 900 GB/s per GPU (18 links), 450 GB/s each direction", _H100_SHEET),
    "h200-sxm": (450.0, "NVLink 900 GB/s per GPU (18 links), 450 GB/s each direction", _H200_SHEET),
    "a100-sxm-80": (300.0, "NVLink 600 GB/s per GPU (12 links), 300 GB/s each direction", _A100_SHEET),
    "a100-sxm-40": (300.0, "NVLink 600 GB/s per GPU (12 links), 300 GB/s each direction", _A100_SHEET),
}


@dataclass(frozen=True)
class Reference:
    """What one figure of one SKU should be: ``value`` in ``unit``, from ``basis`` × ``fraction``."""

    sku: str  # a core.hardware.specs key, or the published source's accelerator name
    figure: str  # "matmul bf16", "h2d pinned", "peer copy", "all_reduce busbw"
    value: float
    unit: str
    kind: str  # "published" (measured by others) | "datasheet" (× the expected fraction)
    basis: float  # the published or datasheet number
    fraction: float  # 1.0 for a published figure
    source: str
    date: str
    reason: str  # why this fraction
    entry: published.Published | None = None  # the published figure itself (its card, its best shape)

    def label(self) -> str:
        if self.kind == "published":
            return f"{self.value:g} {self.unit} published ({self.date}), {SEARCHED_WORDS}"
        return f"{self.value:.4g} {self.unit} = {self.fraction:.0%} of the datasheet's {self.basis:g}"

    @property
    def card_words(self) -> str:
        return self.entry.card_words() if self.entry else ""

    def to_dict(self) -> dict:
        return asdict(self)


# Sheets whose name in core.hardware.specs carries no year.
SHEET_DATES = {"1758950-r4": "2021", "Ada GPU Architecture whitepaper v2.1": "2023"}


def _sheet_date(source: str) -> str:
    years = re.findall(r"\b(20\d\d)\b", source)
    dated = [d for k, d in SHEET_DATES.items() if k in source]
    return years[-1] if years else dated[0] if dated else "undated (the sheet names no date)"


def _matmul(spec: DeviceSpec) -> list[Reference]:
    measured = published.for_device({"kind": "cuda", "name": spec.name, "spec": spec.to_dict()})
    out = []
    for dtype in MATMUL_DTYPES:
        figure, p = f"matmul {dtype}", published.figure(measured, dtype)
        if p is not None:
            out.append(
                Reference(spec.key, figure, p.tflops, "TFLOPS", "published", p.tflops, 1.0, p.source, p.date, "", p)
            )
            continue
        peak = spec.peak(unit_for(dtype))
        if peak:
            reason = f"no published measurement of this SKU: {MATMUL_FRACTION:.0%} of the dense datasheet peak"
            out.append(
                Reference(
                    spec.key,
                    figure,
                    peak * MATMUL_FRACTION,
                    "TFLOPS",
                    "datasheet",
                    peak,
                    MATMUL_FRACTION,
                    spec.source,
                    _sheet_date(spec.source),
                    reason,
                )
            )
    return out


def _links(key: str) -> list[Reference]:
    out = []
    if key in HOST_LINK:
        rate, says, sheet = HOST_LINK[key]
        reason = f"{says}; pinned copies reach about {HOST_COPY_FRACTION:.0%} of it"
        for figure in HOST_FIGURES:
            out.append(
                Reference(
                    key,
                    figure,
                    rate * HOST_COPY_FRACTION,
                    "GB/s",
                    "datasheet",
                    rate,
                    HOST_COPY_FRACTION,
                    sheet,
                    _sheet_date(sheet),
                    reason,
                )
            )
    if key in NVLINK:
        rate, says, sheet = NVLINK[key]
        reason = f"{says}; copies and nccl-tests' busbw reach about {NVLINK_FRACTION:.0%} of it"
        for figure in (PEER_FIGURE, ALL_REDUCE_FIGURE):
            out.append(
                Reference(
                    key,
                    figure,
                    rate * NVLINK_FRACTION,
                    "GB/s",
                    "datasheet",
                    rate,
                    NVLINK_FRACTION,
                    sheet,
                    _sheet_date(sheet),
                    reason,
                )
            )
    return out


def _published_only() -> list[Reference]:
    """Accelerators the published tables measured that have no datasheet entry here (B200, GH200, …)."""
    known = {s.key for s in SPECS}
    out = []
    for p in published.PUBLISHED:
        if p.spec_keys and set(p.spec_keys) & known:
            continue
        out.append(
            Reference(
                p.accelerator,
                f"matmul {p.dtype}",
                p.tflops,
                "TFLOPS",
                "published",
                p.tflops,
                1.0,
                p.source,
                p.date,
                "",
                p,
            )
        )
    return out


REFERENCES: tuple[Reference, ...] = tuple(
    [r for spec in SPECS for r in _matmul(spec) + _links(spec.key)] + _published_only()
)


def sku_of(device: dict) -> str | None:
    """The exact SKU of a device description: its datasheet entry (name and memory size), else the published
    source's accelerator its name matches; None for a CPU or a GPU the lab has no figure for."""
    spec = spec_for_device(device)
    if spec is not None:
        return spec.key
    measured = published.for_device(device)
    return measured[0].accelerator if measured else None


def device_name(device: dict) -> str:
    name = device.get("name") or "unknown device"
    return f"CPU — {name}" if device.get("kind") == "cpu" else name


def reference(device: dict, figure: str) -> Reference | None:
    """The reference of ``figure`` for the device's SKU, or None (say "no reference for <name>")."""
    sku = sku_of(device)
    return next((r for r in REFERENCES if r.sku == sku and r.figure == figure), None) if sku else None


def no_reference(device: dict) -> str:
    return f"no reference for {device_name(device)}"


VERDICTS = ("pass", "below expected", "far below")


def judge(measured: float, ref: float) -> str:
    """pass / below expected / far below, by the fraction of the reference measured (higher is better)."""
    fraction = measured / ref
    if fraction >= PASS_FRACTION:
        return "pass"
    return "below expected" if fraction >= FAR_FRACTION else "far below"


SEARCHED_WORDS = "the best of a shape search"


# --- per clock: a fixed shape against the same shape on a healthy card -----------------------------------

EXAMPLE_RUNS = "examples/nvidia-h200-2026-11-26.json"
_H200_SOURCE = (
    f"measured by this lab on a healthy NVIDIA H200 (700 W limit, NVML sw_power_cap throughout), {EXAMPLE_RUNS}, "
    "matmul run 59ea65d35798429288fad92376dcab78 (driver 580.159.04, torch 2.11.0+cu130); the mean SM clock NVML "
    "sampled over the point"
)


@dataclass(frozen=True)
class SameShape:
    """One shape measured on a healthy card, with the SM clock it ran at: its TFLOPS per GHz is what a healthy card
    of the same compute does per clock at that shape."""

    card: str  # the card it was measured on
    skus: tuple[str, ...]  # the SKUs it is a reference for (the same SMs and datasheet peaks)
    dtype: str
    m: int
    n: int
    k: int
    tflops: float
    sm_clock_mhz: float
    source: str
    date: str

    @property
    def per_ghz(self) -> float:
        return self.tflops / (self.sm_clock_mhz / 1000.0)

    def card_words(self, sku: str | None) -> str:
        said = f"measured on {published.with_article(published.short(self.card))} by this lab"
        if sku and sku != self.skus[0]:
            return f"{said}; the {sku.upper().replace('-', ' ')} has the same SMs and datasheet peaks"
        return said

    def label(self) -> str:
        return (
            f"{self.per_ghz:.1f} TFLOPS/GHz: {self.m}×{self.n}×{self.k} {self.dtype} on a healthy "
            f"{published.short(self.card)} ({self.tflops:.1f} TFLOPS at {self.sm_clock_mhz:.0f} MHz, {self.date})"
        )

    def to_dict(self) -> dict:
        return asdict(self) | {"per_ghz": self.per_ghz, "label": self.label()}


_HOPPER = ("h200-sxm", "h100-sxm")  # the H200 first: the card these were measured on
SAME_SHAPE: tuple[SameShape, ...] = tuple(
    SameShape("NVIDIA H200 SXM", _HOPPER, dtype, 8192, 8192, 8192, tflops, clock, _H200_SOURCE, "2026-11-26")
    for dtype, tflops, clock in (
        ("bf16", 678.59, 1515.0),
        ("fp16", 635.08, 1437.0),
        ("tf32", 338.24, 1570.0),
        ("fp8", 1185.90, 1347.0),
        ("fp8-fast-accum", 1269.53, 1455.0),
    )
)


def same_shape(device: dict, dtype: str, shape: tuple[int, int, int] | None) -> SameShape | None:
    """The healthy card's figure at the same shape and dtype for the device's SKU, or None."""
    sku = sku_of(device)
    return next(
        (r for r in SAME_SHAPE if sku in r.skus and r.dtype == dtype and (r.m, r.n, r.k) == shape),
        None,
    )


def per_clock_peak(device: dict, dtype: str) -> tuple[float, float, str] | None:
    """The card's datasheet peak per GHz of SM clock for the dtype: (TFLOPS/GHz, the sheet's clock in MHz, the
    sheet), where the clock its peaks assume is known; None otherwise."""
    spec = spec_for_device(device)
    clock = PEAK_CLOCK_MHZ.get(spec.key) if spec else None
    peak = spec.peak(unit_for(dtypes.get(dtype).column)) if spec else None
    if not spec or not clock or not peak:
        return None
    return peak / (clock / 1000.0), clock, spec.source


# --- the rules, each with its source --------------------------------------------------------------

NODE_SPREAD = 0.05  # GPUs of one healthy node differ by about this much (below)

RULES: tuple[dict[str, str], ...] = (
    {
        "rule": "like for like",
        "says": "a published maximum (the best of a shape search) judges only the best of a search or the same "
        "shape; a fixed shape against it is 'not comparable' and not judged by it",
        "source": "the source's own caveat: its figures are 'a brute-force search of a non-exhaustive sub-space of "
        "various shapes', a 'rough estimation' to be re-measured on one's setup (" + published.SOURCE + ")",
    },
    {
        "rule": "thresholds",
        "says": THRESHOLD_REASON,
        "source": "healthy cards lose up to 15 % of matmul throughput to clocks under sustained load (B200 1965 → "
        "~1580 MHz, mamf-finder's users); DCGM's long diagnostic once passed a broken A100 at 35 % of its fp32 "
        "sheet; gpu-fryer flags 10 % below the best GPU of a box",
    },
    {
        "rule": "per clock",
        "says": "a fixed shape is judged by its TFLOPS per GHz of SM clock against the same shape on a healthy card "
        "of the same compute, with the same thresholds; its efficiency against the sheet's per-clock peak is shown",
        "source": "the datasheet peak is SMs × FLOP per clock × the clock it assumes (H100/H200 SXM: 540,672 "
        "FLOP/clk × 1,830 MHz = 989.4 TFLOPS); the healthy card: " + _H200_SOURCE,
    },
    {
        "rule": "power cap is normal",
        "says": "NVML's sw_power_cap while measured reads 'power-limited': the card keeps to its power limit, as it "
        "should under a full matmul; not a fault",
        "source": NVML_REASONS + ": sw_power_cap, 'the clocks have been optimized to ensure not to exceed "
        "currently set power limits'; the healthy H200 ran at 688–701 W of 700 W with it throughout",
    },
    {
        "rule": "faults",
        "says": "hw_slowdown, hw_thermal_slowdown, sw_thermal_slowdown or hw_power_brake_slowdown while measured is "
        "a fault named in words, and the row is at least 'below expected'",
        "source": NVML_REASONS + ": the hardware slowdowns reduce 'the core clocks by a factor of 2 or more' "
        "(temperature too high, an external power brake, power draw too high)",
    },
    {
        "rule": "clock far below boost at low power",
        "says": f"an SM clock under {LOW_CLOCK_FRACTION:.0%} of the card's maximum while drawing under "
        f"{LOW_POWER_FRACTION:.0%} of its power limit, with no NVML reason, is a fault",
        "source": "the healthy H200 held its 1,980 MHz maximum below the cap (2048³ bf16 at 594 W) and fell to "
        f"1,302 MHz (66 %) only at 688–701 W of 700 W ({EXAMPLE_RUNS})",
    },
    {
        "rule": "one node",
        "says": f"a GPU more than {NODE_SPREAD:.0%} below the median of the same figure on its node's GPUs is "
        "flagged as the slow one",
        "source": "ml-engineering, 'Not all accelerators are created equal': 'I have seen 5% and higher differences "
        "on an 8-gpu node' and '5%+ MAMF spread between GPUs' of one node (" + published.SOURCE + ")",
    },
    {
        "rule": "fleet",
        "says": "a GPU more than 10 % below the fleet's median of the same figure and model is an outlier",
        "source": "gpu-fryer flags a GPU 10 % below the best of its box",
    },
    {
        "rule": "history",
        "says": "a figure under the box's lowest earlier value by more than their spread (at least 3 % of their "
        "median) is 'regressed'",
        "source": "a GPU's repeated runs differ by a few percent (clocks, temperature)",
    },
)

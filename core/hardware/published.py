"""Published *measured* matmul maxima from elsewhere, shown beside the lab's own numbers, labelled as such.

A datasheet peak is what the silicon could do; nobody reaches it. The "maximum achievable matmul FLOPS"
(MAMF) tables of Stas Bekman's *Machine Learning Engineering* (ml-engineering) list what a brute-force
search of shapes with ``mamf-finder.py`` reached on real cards: bf16 inputs and fp8 (``float8_e4m3fn``
through ``torch._scaled_mm`` with its default ``use_fast_accum=False`` — the lab's ``fp8`` row, not
``fp8-fast-accum``), the mean of 100 iterations after 50 warm-up per shape, L2 flushed. They are facts
quoted with their source and date, never measurements of this box: the UI labels them *published*.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

SOURCE = (
    "Stas Bekman, Machine Learning Engineering, compute/accelerator/README.md, 'Maximum Achievable Matmul "
    "FLOPS comparison table' (github.com/stas00/ml-engineering, commit 7bc7c3054eb9, 2026-08-10); measured "
    "with mamf-finder.py, mean of 100 iterations after 50 warm-up per shape"
)
DATE = "2026-08-10"


@dataclass(frozen=True)
class Published:
    accelerator: str  # as the source names it
    dtype: str  # the lab's matmul dtype it compares with
    tflops: float  # maximum achievable, measured by the source
    theory_tflops: float  # the dense peak the source divides by
    best_shape: str  # M×N×K of the source's best point
    torch_version: str
    pattern: str  # regex on torch.cuda.get_device_name(); spec keys below take precedence
    spec_keys: tuple[str, ...] = ()  # core.hardware.specs keys this entry describes
    notes: str = ""
    source: str = SOURCE
    date: str = DATE

    @property
    def efficiency(self) -> float:
        return self.tflops / self.theory_tflops

    def label(self) -> str:
        return f"{self.accelerator} {self.dtype}: {self.tflops:g} TFLOPS published ({self.date})"

    def to_dict(self) -> dict:
        return asdict(self) | {"efficiency": self.efficiency}


_H100 = ("h100-sxm",)
_A100_SXM = ("a100-sxm-80", "a100-sxm-40")
_A100_PCIE = ("a100-pcie-80", "a100-pcie-40")
PUBLISHED: tuple[Published, ...] = (
    # GH200's name contains "H200": its entries come before the H200's.
    Published(
        "NVIDIA GH200 SXM",
        "bf16",
        828.6,
        989,
        "1024x15360x4096",
        "2.6.0+cu126",
        r"GH200",
        notes="900W 141GiB HBM3e version",
    ),
    Published(
        "NVIDIA GH200 SXM",
        "fp8",
        1535.0,
        1979,
        "1024x14336x14336",
        "2.6.0+cu126",
        r"GH200",
        notes="900W 141GiB HBM3e version",
    ),
    Published("NVIDIA GB200 SXM", "bf16", 1822.0, 2500, "4096x9728x2048", "2.10.0.dev20250916+cu130", r"GB200"),
    Published("NVIDIA GB200 SXM", "fp8", 3615.6, 5000, "19456x5120x1536", "2.10.0.dev20250916+cu130", r"GB200"),
    Published(
        "NVIDIA B300 SXM",
        "bf16",
        1769.0,
        2250,
        "12288x18432x1024",
        "2.9.1+cu130",
        r"B300",
        notes="same as B200, newer torch/cuda",
    ),
    Published("NVIDIA B300 SXM", "fp8", 3353.3, 4500, "3072x6144x7168", "2.9.1+cu130", r"B300"),
    Published("NVIDIA B200 SXM", "bf16", 1745.0, 2250, "1792x16128x3072", "2.7.1+cu128", r"B200"),
    Published("NVIDIA B200 SXM", "fp8", 3432.5, 4500, "15360x4096x3072", "2.7.1+cu128", r"B200"),
    Published(
        "NVIDIA H200 SXM",
        "fp8",
        1453.4,
        1979,
        "1280x4096x12032",
        "2.7.1+cu128",
        r"H200(?!.*NVL)",
        spec_keys=("h200-sxm",),
    ),
    Published(
        "NVIDIA H200 SXM",
        "bf16",
        794.5,
        989,
        "2048x2048x13312",
        "2.7.0+cu126",
        r"H200(?!.*NVL)",
        spec_keys=("h200-sxm",),
        notes="the source lists it in its H100 SXM row: 'H200 is the same'",
    ),
    Published(
        "NVIDIA H100 SXM", "bf16", 794.5, 989, "2048x2048x13312", "2.7.0+cu126", r"H100(?!.*(PCI|NVL))", spec_keys=_H100
    ),
    Published(
        "NVIDIA H100 SXM",
        "fp8",
        1402.6,
        1979,
        "1024x9216x14336",
        "2.7.0+cu126",
        r"H100(?!.*(PCI|NVL))",
        spec_keys=_H100,
    ),
    Published(
        "NVIDIA A100 SXM", "bf16", 271.2, 312, "1024x10240x5120", "2.6.0+cu126", r"A100(?!.*PCI)", spec_keys=_A100_SXM
    ),
    Published(
        "NVIDIA A100 PCIe", "bf16", 252.9, 312, "2048x5120x6144", "2.5.1+cu124", r"A100.*PCI", spec_keys=_A100_PCIE
    ),
)
ACCELERATORS = tuple(dict.fromkeys(p.accelerator for p in PUBLISHED))


def for_accelerator(name: str) -> list[Published]:
    """Every published figure of one accelerator, as the source names it (e.g. "NVIDIA H100 SXM")."""
    return [p for p in PUBLISHED if p.accelerator == name]


def for_device(device: dict) -> list[Published]:
    """Published figures for a :mod:`core.hardware.device` description: its datasheet entry's key if it has
    one, else its name; nothing for a CPU or a GPU the source did not measure."""
    if device.get("kind") != "cuda":
        return []
    key = (device.get("spec") or {}).get("key")
    name = device.get("name", "")
    by_name = [p for p in PUBLISHED if re.search(p.pattern, name, flags=re.IGNORECASE)]
    by_key = [p for p in PUBLISHED if key and key in p.spec_keys]
    return by_key or (for_accelerator(by_name[0].accelerator) if by_name else [])


def figure(entries: list[Published], dtype: str) -> Published | None:
    return next((p for p in entries if p.dtype == dtype), None)

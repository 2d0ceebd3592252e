"""Published *measured* matmul maxima from elsewhere, shown beside the lab's own numbers, labelled as such.

A datasheet peak is what the silicon could do; nobody reaches it. The "maximum achievable matmul FLOPS"
(MAMF) tables of Stas Bekman's *Machine Learning Engineering* (ml-engineering) list what a brute-force
search of shapes with ``mamf-finder.py`` reached on real cards: bf16 inputs and fp8 (``float8_e4m3fn``
through ``torch._scaled_mm`` with its default ``use_fast_accum=False`` — the lab's ``fp8`` row, not
``fp8-fast-accum``), the mean of 100 iterations after 50 warm-up per shape, L2 flushed. They are facts
quoted with their source and date, never measurements of this box: the UI labels them *published*, with the
card each was measured on (the source files the H200's bf16 figure in its H100 SXM row: "H200 is the same").

Each figure is the best of a shape search, so it is compared like for like (:func:`comparable`): with the best
of a search, or with its own best shape; a fixed shape never meets it in a verdict.
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
    measured_on: str = ""  # the card the source measured, where its table files the figure under another one

    @property
    def efficiency(self) -> float:
        return self.tflops / self.theory_tflops

    @property
    def card(self) -> str:
        """The accelerator the figure was measured on."""
        return self.measured_on or self.accelerator

    @property
    def best_mnk(self) -> tuple[int, int, int]:
        m, n, k = (int(x) for x in self.best_shape.split("x"))
        return m, n, k

    def card_words(self) -> str:
        """Which card the source measured, in words: "measured on an H100 SXM; the source says the H200 SXM is
        the same" where its table files the figure under another card."""
        said = f"measured on {with_article(short(self.card))}"
        if self.card != self.accelerator:
            return f"{said}; the source says the {short(self.accelerator)} is the same"
        return said

    def label(self) -> str:
        return f"{self.accelerator} {self.dtype}: {self.tflops:g} TFLOPS published ({self.date}), {self.card_words()}"

    def to_dict(self) -> dict:
        return asdict(self) | {"efficiency": self.efficiency, "card": self.card, "card_words": self.card_words()}


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
        measured_on="NVIDIA H100 SXM",
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


def short(name: str) -> str:
    """A card's name without its vendor: "NVIDIA H100 SXM" → "H100 SXM"."""
    return name.removeprefix("NVIDIA ").strip()


def with_article(name: str) -> str:
    """The article a card's name takes when read aloud: "an H100", "an A100", "a B200", "a GH200"."""
    return ("an " if name[:1].upper() in "AEFHILMNORSX8" else "a ") + name


def provenance(entry: Published, device: dict) -> str:
    """The card words of ``entry`` for a run on ``device``: also "not this card" where the figure is another
    accelerator's (a page may show any card the source measured)."""
    words = entry.card_words()
    if device.get("kind") == "cuda" and all(p.accelerator != entry.accelerator for p in for_device(device)):
        words += f", not on this card ({device.get('name') or 'unknown'})"
    return words


SEARCHED = "the best of a shape search"


def comparable(entry: Published, shape: tuple[int, int, int] | None, searched: bool) -> str | None:
    """None where a measured figure may be judged against ``entry`` (it is the best of a search too, or it was
    measured at the entry's own best shape); else why not, in words ("not comparable: …")."""
    if searched or (shape is not None and tuple(shape) == entry.best_mnk):
        return None
    what = "a fixed {}×{}×{} shape".format(*shape) if shape else "a fixed shape"
    return f"not comparable: {what} against {SEARCHED} ({entry.best_shape} on the {short(entry.card)})"

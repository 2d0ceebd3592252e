"""Datasheet peaks (dense, i.e. *without* 2:4 sparsity) per dtype and memory bandwidth.

Vendor sheets print tensor-core figures "with sparsity"; every tensor figure here is the dense one
(half of the sparse one). GeForce cards run fp16/bf16 tensor math at half rate when accumulating in
fp32, which is what PyTorch does, so their fp16/bf16 entries are the fp32-accumulate figures.
A device whose name matches no entry gets ``None`` — the UI says "no datasheet entry" instead of
guessing. Keys of ``tflops``: fp64, fp64_tc, fp32, tf32, bf16, fp16, fp8, int8 (TOPS).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from core.result import SPEC_PEAKS
from core.units import GIB

DTYPE_UNITS = ("fp64", "fp64_tc", "fp32", "tf32", "bf16", "fp16", "fp8", "int8")


@dataclass(frozen=True)
class DeviceSpec:
    key: str
    name: str
    pattern: str  # regex matched against torch.cuda.get_device_name()
    tflops: dict[str, float]
    bandwidth_gbs: float
    memory_gib: float
    source: str
    notes: str = ""
    min_memory_gib: float = 0.0  # to tell 40 GB from 80 GB variants sharing a name pattern

    def peak(self, unit: str) -> float | None:
        return self.tflops.get(unit)

    def to_dict(self) -> dict:
        return asdict(self)


_A100_SHEET = "NVIDIA A100 Tensor Core GPU datasheet (nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf)"
_H100_SHEET = "NVIDIA H100 Tensor Core GPU datasheet (h100-datasheet-2287922, 2023)"
_A100 = {"fp64": 9.7, "fp64_tc": 19.5, "fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0, "int8": 624.0}
# The clock the H100/H200 SXM sheets' tensor peaks assume: 132 SMs × 4 tensor cores × 512 dense bf16 FMA per clock
# = 540,672 FLOP/clk, × 1,830 MHz = 989.4 TFLOPS (1.83 GHz for tensor math, 1.98 GHz max: NVIDIA H100 Tensor Core
# GPU Architecture whitepaper, as quoted at glennklockwood.com/garden/processors/h100).
HOPPER_TENSOR_MHZ = 1830.0
# The SM clock (MHz) each entry's tensor peaks assume, where its sheet's arithmetic is known.
PEAK_CLOCK_MHZ: dict[str, float] = {"h100-sxm": HOPPER_TENSOR_MHZ, "h200-sxm": HOPPER_TENSOR_MHZ}
_H100_SXM = {
    "fp64": 34.0,
    "fp64_tc": 67.0,
    "fp32": 67.0,
    "tf32": 494.7,
    "bf16": 989.4,
    "fp16": 989.4,
    "fp8": 1978.9,
    "int8": 1978.9,
}

SPECS: tuple[DeviceSpec, ...] = (
    DeviceSpec(
        "h200-nvl",
        "NVIDIA H200 NVL",
        r"(?<!G)H200.*NVL",
        {
            "fp64": 30.0,
            "fp64_tc": 60.0,
            "fp32": 60.0,
            "tf32": 417.5,
            "bf16": 835.5,
            "fp16": 835.5,
            "fp8": 1670.5,
            "int8": 1670.5,
        },
        4800,
        141,
        "NVIDIA H200 Tensor Core GPU datasheet (h200-datasheet-3002446, 2024)",
    ),
    DeviceSpec(
        "h200-sxm",
        "NVIDIA H200 SXM",
        r"(?<!G)H200",
        dict(_H100_SXM),
        4800,
        141,
        "NVIDIA H200 Tensor Core GPU datasheet (h200-datasheet-3002446, 2024)",
    ),
    DeviceSpec(
        "h100-nvl",
        "NVIDIA H100 NVL",
        r"H100.*NVL",
        {
            "fp64": 30.0,
            "fp64_tc": 60.0,
            "fp32": 60.0,
            "tf32": 417.5,
            "bf16": 835.5,
            "fp16": 835.5,
            "fp8": 1670.5,
            "int8": 1670.5,
        },
        3900,
        94,
        _H100_SHEET,
    ),
    DeviceSpec(
        "h100-pcie",
        "NVIDIA H100 PCIe",
        r"H100.*PCI",
        {
            "fp64": 26.0,
            "fp64_tc": 51.0,
            "fp32": 51.0,
            "tf32": 378.0,
            "bf16": 756.5,
            "fp16": 756.5,
            "fp8": 1513.0,
            "int8": 1513.0,
        },
        2000,
        80,
        _H100_SHEET,
    ),
    DeviceSpec(
        "h100-sxm",
        "NVIDIA H100 SXM",
        r"H100",
        dict(_H100_SXM),
        3350,
        80,
        _H100_SHEET,
        notes="torch names it 'NVIDIA H100 80GB HBM3'",
    ),
    DeviceSpec(
        "a100-pcie-80", "NVIDIA A100 PCIe 80GB", r"A100.*PCI", dict(_A100), 1935, 80, _A100_SHEET, min_memory_gib=60
    ),
    DeviceSpec("a100-pcie-40", "NVIDIA A100 PCIe 40GB", r"A100.*PCI", dict(_A100), 1555, 40, _A100_SHEET),
    DeviceSpec("a100-sxm-80", "NVIDIA A100 SXM 80GB", r"A100", dict(_A100), 2039, 80, _A100_SHEET, min_memory_gib=60),
    DeviceSpec("a100-sxm-40", "NVIDIA A100 SXM 40GB", r"A100", dict(_A100), 1555, 40, _A100_SHEET),
    DeviceSpec(
        "l40s",
        "NVIDIA L40S",
        r"L40S",
        {"fp32": 91.6, "tf32": 183.0, "bf16": 362.05, "fp16": 362.05, "fp8": 733.0, "int8": 733.0},
        864,
        48,
        "NVIDIA L40S GPU datasheet (l40s-datasheet-2848009, 2023)",
        notes="FP64 is not listed in the datasheet",
    ),
    DeviceSpec(
        "l4",
        "NVIDIA L4",
        r"\bL4\b",
        {"fp32": 30.3, "tf32": 60.0, "bf16": 121.0, "fp16": 121.0, "fp8": 242.5, "int8": 242.5},
        300,
        24,
        "NVIDIA L4 Tensor Core GPU datasheet (l4-datasheet-2595652, 2023)",
        notes="FP64 is not listed in the datasheet",
    ),
    DeviceSpec(
        "a10",
        "NVIDIA A10",
        r"\bA10\b",
        {"fp32": 31.2, "tf32": 62.5, "bf16": 125.0, "fp16": 125.0, "int8": 250.0},
        600,
        24,
        "NVIDIA A10 Tensor Core GPU datasheet (a10-datasheet-1641013, 2021)",
        notes="FP64 is not listed in the datasheet",
    ),
    DeviceSpec(
        "mi300x",
        "AMD Instinct MI300X",
        r"MI300X",  # "AMD Instinct MI300X" and its virtual function "… MI300X VF"; not the MI325X
        {
            "fp64": 81.7,
            "fp64_tc": 163.4,
            "fp32": 163.4,
            "tf32": 653.7,
            "bf16": 1307.4,
            "fp16": 1307.4,
            "fp8": 2614.9,
            "int8": 2614.9,
        },
        5300,
        192,
        "AMD ROCm documentation, AMD Instinct MI300 series microarchitecture, 'Peak-performance capabilities of the "
        "MI300X' (ROCm/ROCm docs/conceptual/gpu-arch/mi300.md)",
        notes="matrix (dense) peaks, 304 CUs; the page gives no capacity: 192 GiB is what MI300X traces report "
        "(deviceProperties totalGlobalMem 206,141,652,992 B)",
    ),
    DeviceSpec(
        "rtx-4090",
        "NVIDIA GeForce RTX 4090",
        r"RTX 4090",
        {"fp64": 1.29, "fp32": 82.6, "tf32": 82.6, "bf16": 165.2, "fp16": 165.2, "fp8": 330.3, "int8": 660.6},
        1008,
        24,
        "NVIDIA Ada GPU Architecture whitepaper v2.1, Appendix A (GeForce RTX 4090)",
        notes="fp16/bf16/fp8 with FP32 accumulate (PyTorch's default); FP16-accumulate is 2x",
    ),
    DeviceSpec(
        "rtx-3090",
        "NVIDIA GeForce RTX 3090",
        r"RTX 3090",
        {"fp64": 0.556, "fp32": 35.6, "tf32": 35.6, "bf16": 71.0, "fp16": 71.0, "int8": 284.0},
        936,
        24,
        "NVIDIA Ampere GA102 GPU Architecture whitepaper v2.0, Appendix A (GeForce RTX 3090)",
        notes="fp16/bf16 with FP32 accumulate (PyTorch's default); FP16-accumulate is 2x",
    ),
)


def match_spec(device_name: str, total_memory_bytes: int | None = None) -> DeviceSpec | None:
    """The datasheet entry for a CUDA device name, or None when the lab has no entry for it."""
    mem_gib = (total_memory_bytes or 0) / GIB
    for spec in SPECS:
        if re.search(spec.pattern, device_name, flags=re.IGNORECASE) and mem_gib >= spec.min_memory_gib:
            if spec.min_memory_gib and not total_memory_bytes:
                continue  # cannot tell the memory variant apart: take the smaller one below
            return spec
    return None


def unit_for(dtype: str, *, tensor_fp64: bool = True) -> str:
    """Which datasheet column a matmul dtype is measured against (fp64 uses the tensor-core figure)."""
    if dtype == "fp64":
        return "fp64_tc" if tensor_fp64 else "fp64"
    return dtype


def spec_for_device(device: dict) -> DeviceSpec | None:
    """Datasheet entry for a :mod:`core.hardware.device` description (None for CPUs and unknown GPUs)."""
    if device.get("kind") != "cuda":
        return None
    return match_spec(device.get("name", ""), device.get("total_memory_bytes"))


def datasheet_peaks(device: dict) -> dict[str, float]:
    """The dense peaks per unit (TFLOPS, TOPS for int8) of a device description's datasheet entry; empty
    without one (a CPU, an unknown GPU)."""
    return (device.get("spec") or {}).get(SPEC_PEAKS) or {}


def device_peak(device: dict, unit: str) -> tuple[float | None, str | None]:
    """Dense datasheet peak of ``unit`` for a :mod:`core.hardware.device` description, or (None, why not)."""
    if device.get("kind") != "cuda":
        return None, "CPU: no datasheet peak"
    spec = device.get("spec")
    if not spec:
        return None, f"no datasheet entry for {device.get('name')}"
    peak = datasheet_peaks(device).get(unit)
    return (peak, None) if peak else (None, f"the {spec['name']} datasheet lists no {unit} peak")


ABOVE_PEAK = "measurement error: above the datasheet peak"


def above_peak_error(achieved: float | None, peak: float | None, what: str) -> str | None:
    """A measured throughput above the dense datasheet peak is a measurement error, never a result
    (a missing synchronisation, a cached result, a wrong FLOP count); None when it is not above."""
    if achieved is None or not peak or achieved <= peak:
        return None
    return (
        f"{ABOVE_PEAK}: {what} measured {achieved:.1f} TFLOPS > {peak:g} on the sheet "
        f"({100.0 * achieved / peak:.0f}%); the timing is wrong, not the hardware faster"
    )


def measurement_errors(rows: list[dict]) -> list[str]:
    """The above-peak errors flagged on rows (``measurement_error``), for the run's meta and its warnings."""
    return [r["measurement_error"] for r in rows if r.get("measurement_error")]


def all_specs() -> list[dict]:
    return [s.to_dict() for s in SPECS]


__all__ = [
    "DeviceSpec",
    "SPECS",
    "match_spec",
    "unit_for",
    "spec_for_device",
    "device_peak",
    "datasheet_peaks",
    "all_specs",
    "DTYPE_UNITS",
    "ABOVE_PEAK",
    "above_peak_error",
    "measurement_errors",
]

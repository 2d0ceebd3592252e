"""Published maximum-achievable matmul figures: quoted with source and date, found for the right GPU."""

import pytest

from core.hardware import published
from core.hardware.specs import match_spec


def device(name, memory_gib=80):
    spec = match_spec(name, memory_gib * 2**30)
    return {"kind": "cuda", "name": name, "spec": spec.to_dict() if spec else None}


def test_efficiencies_match_the_source_by_hand():
    h100 = {p.dtype: p for p in published.for_accelerator("NVIDIA H100 SXM")}
    assert h100["bf16"].efficiency == pytest.approx(794.5 / 989) and round(100 * h100["bf16"].efficiency, 1) == 80.3
    assert round(100 * h100["fp8"].efficiency, 1) == 70.9  # 1402.6 / 1979
    assert round(100 * published.for_accelerator("NVIDIA A100 SXM")[0].efficiency, 1) == 86.9  # 271.2 / 312


def test_every_entry_is_below_its_own_peak_and_says_where_it_comes_from():
    for p in published.PUBLISHED:
        assert 0 < p.tflops < p.theory_tflops, p  # above the sheet would itself be a measurement error
        assert "ml-engineering" in p.source and p.date == "2026-08-10" and "x" in p.best_shape


@pytest.mark.parametrize(
    "name, memory, expected",
    [
        ("NVIDIA H100 80GB HBM3", 80, {"bf16": 794.5, "fp8": 1402.6}),
        ("NVIDIA H100 PCIe", 80, {}),  # the source measured the SXM card, not this one
        ("NVIDIA H100 NVL", 94, {}),
        ("NVIDIA A100-SXM4-80GB", 80, {"bf16": 271.2}),
        ("NVIDIA A100 80GB PCIe", 80, {"bf16": 252.9}),
        ("NVIDIA H200", 141, {"bf16": 794.5, "fp8": 1453.4}),
        ("NVIDIA GH200 480GB", 96, {"bf16": 828.6, "fp8": 1535.0}),  # its name contains "H200"
        ("NVIDIA B200", 180, {"bf16": 1745.0, "fp8": 3432.5}),
        ("NVIDIA L4", 24, {}),
    ],
)
def test_the_right_figures_for_a_gpu(name, memory, expected):
    assert {p.dtype: p.tflops for p in published.for_device(device(name, memory))} == expected


def test_a_cpu_has_none():
    assert published.for_device({"kind": "cpu", "name": "AMD EPYC"}) == []

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


def test_each_figure_names_the_card_it_was_measured_on():
    """The source's BF16 table has no H200 row: its H100 SXM row (794.5 at 2048x2048x13312) says 'H200 is the
    same'; its FP8 table has an H200 SXM row of its own (1453.4 at 1280x4096x12032)."""
    h200 = {p.dtype: p for p in published.for_device(device("NVIDIA H200", 141))}
    assert h200["bf16"].card == "NVIDIA H100 SXM" and h200["fp8"].card == "NVIDIA H200 SXM"
    said = "measured on an H100 SXM; the source says the H200 SXM is the same"
    assert h200["bf16"].card_words() == said and said in h200["bf16"].label()
    assert h200["fp8"].card_words() == "measured on an H200 SXM"
    assert published.provenance(h200["bf16"], device("NVIDIA H200", 141)) == said
    b200 = published.for_accelerator("NVIDIA B200 SXM")[0]
    assert published.provenance(b200, device("NVIDIA H200", 141)) == (
        "measured on a B200 SXM, not on this card (NVIDIA H200)"
    )
    assert published.for_accelerator("NVIDIA A100 SXM")[0].card_words() == "measured on an A100 SXM"


def test_a_searched_maximum_meets_only_a_search_or_its_own_best_shape():
    bf16 = published.figure(published.for_accelerator("NVIDIA H100 SXM"), "bf16")
    assert bf16.best_mnk == (2048, 2048, 13312)
    assert published.comparable(bf16, None, searched=True) is None
    assert published.comparable(bf16, (2048, 2048, 13312), searched=False) is None  # the same shape
    why = published.comparable(bf16, (8192, 8192, 8192), searched=False)
    assert (
        why
        == "not comparable: a fixed 8192×8192×8192 shape against the best of a shape search (2048x2048x13312 on the H100 SXM)"
    )

"""The health verdict table: each rule on hand-made figures (thresholds applied by hand), the exact SKU picked
by name and memory, and every reference quoting its source and date."""

import re

import pytest

from core.hardware import health_reference as ref
from core.hardware import published
from core.hardware.specs import match_spec
from core.health.check import answer, cell
from core.health.figures import Figure, soak_figures
from core.health.verdict import figure_row, overall
from core.result import RunResult

GIB = 2**30


def gpu(name, memory_gib=80, host="node-a", uuid="GPU-aaaa"):
    spec = match_spec(name, memory_gib * GIB)
    return {
        "kind": "cuda",
        "name": name,
        "index": 0,
        "torch_device": "cuda:0",
        "host": host,
        "uuid": uuid,
        "total_memory_bytes": memory_gib * GIB,
        "spec": spec.to_dict() if spec else None,
    }


H100_SXM = gpu("NVIDIA H100 80GB HBM3")


def judged(device, figure, value, unit="TFLOPS"):
    return figure_row(Figure(figure, "cuda:0", value, unit, device, figure))


@pytest.mark.parametrize(
    "value, verdict",
    [
        (780.0, "pass"),  # 780 / 794.5 = 98 % of the published H100 SXM bf16 maximum
        (676.0, "pass"),  # 85.1 %: the pass threshold is 85 %
        (600.0, "below expected"),  # 75.5 %
        (400.0, "far below"),  # 50.3 %: under 70 %
    ],
)
def test_h100_sxm_bf16_against_the_published_maximum(value, verdict):
    row = judged(H100_SXM, "matmul bf16", value)
    assert row["reference"] == 794.5 and row["reference_kind"] == "published"
    assert row["verdict"] == verdict
    assert row["fraction"] == pytest.approx(value / 794.5)
    assert "ml-engineering" in row["source"] and row["date"] == "2026-08-10"


def test_a_variant_is_judged_by_its_own_sheet_not_the_sxm_figure():
    """H100 PCIe: no published measurement, so 70 % of its own sheet's 756.5 (= 529.55), never SXM's 794.5."""
    pcie = gpu("NVIDIA H100 PCIe")
    row = judged(pcie, "matmul bf16", 600.0)
    assert row["reference"] == pytest.approx(756.5 * 0.70) and row["reference_kind"] == "datasheet"
    assert row["verdict"] == "pass"  # 600 / 529.55 = 113 %; against the SXM's 794.5 it would be 75.5 %
    assert judged(H100_SXM, "matmul bf16", 600.0)["verdict"] == "below expected"
    assert judged(gpu("NVIDIA H100 NVL", 94), "matmul bf16", 600.0)["reference"] == pytest.approx(835.5 * 0.70)
    # the peer path of a PCIe card depends on its bridges: no reference rather than the SXM's NVLink
    assert judged(pcie, "peer copy", 100.0, "GB/s")["verdict"] == "no reference"
    assert judged(H100_SXM, "peer copy", 400.0, "GB/s")["reference"] == pytest.approx(450 * 0.75)
    # the A100's memory size picks the SKU: 40 GB and 80 GB SXM are different entries
    assert ref.sku_of(gpu("NVIDIA A100-SXM4-40GB", 40)) == "a100-sxm-40"
    assert ref.sku_of(gpu("NVIDIA A100-SXM4-80GB", 80)) == "a100-sxm-80"


def test_the_dcgm_case_is_far_below():
    """An A100 delivering 6.7 fp32 TFLOPS of its sheet's 19.5: 6.7 / (0.70 × 19.5) = 49 % → far below."""
    row = judged(gpu("NVIDIA A100-SXM4-40GB", 40), "matmul fp32", 6.7)
    assert row["reference"] == pytest.approx(13.65) and row["verdict"] == "far below"


def test_an_unknown_sku_and_a_cpu_get_no_reference_never_a_guess():
    row = judged(gpu("NVIDIA Quadro Foo 9000", 48), "matmul bf16", 100.0)
    assert row["verdict"] == "no reference" and row["reference"] is None
    assert "no reference for NVIDIA Quadro Foo 9000" in row["reason"]
    cpu = {"kind": "cpu", "name": "AMD EPYC 7B13", "host": "node-a"}
    row = figure_row(Figure("all_reduce busbw", "node", 1.3, "GB/s", cpu, "all_reduce busbw"))
    assert row["verdict"] == "no reference" and "no reference for CPU — AMD EPYC 7B13" in row["reason"]
    assert overall([row]) == "healthy"  # nothing below expected: measured, not judged


def test_host_copies_use_the_link_generation_of_the_sku():
    assert judged(H100_SXM, "h2d pinned", 50.0, "GB/s")["reference"] == pytest.approx(64 * 0.75)  # Gen5
    a100 = judged(gpu("NVIDIA A100 80GB PCIe"), "d2h pinned", 20.0, "GB/s")  # Gen4: 0.75 × 32 = 24 GB/s
    assert a100["reference"] == pytest.approx(24.0) and a100["verdict"] == "below expected"  # 20 / 24 = 83 %
    assert judged(gpu("NVIDIA A100 80GB PCIe"), "d2h pinned", 21.0, "GB/s")["verdict"] == "pass"  # 87.5 %


def test_every_reference_says_where_it_comes_from_and_when():
    for r in ref.REFERENCES:
        assert r.source and r.date, r
        if r.kind == "published":
            assert r.fraction == 1.0 and "ml-engineering" in r.source and re.fullmatch(r"\d{4}-\d\d-\d\d", r.date)
        else:
            assert r.kind == "datasheet" and 0 < r.fraction < 1 and r.reason
            assert "datasheet" in r.source or "whitepaper" in r.source
            assert re.fullmatch(r"20\d\d", r.date) or r.date.startswith("undated"), r
            assert r.value == pytest.approx(r.basis * r.fraction)


def test_the_matmul_fraction_is_at_the_low_end_of_what_the_published_cards_reach():
    assert ref.MATMUL_FRACTION <= min(p.efficiency for p in published.PUBLISHED)


def stand_in_soak(device, burst, sustained, drop_flagged, threshold=10.0):
    """A hand-made run with the meta the matmul-soak experiment stores (not the experiment itself)."""
    return RunResult(
        "matmul-soak",
        {"dtype": "bf16", "duration_s": 60.0},
        device,
        {},
        "2026-01-01T00:00:00+00:00",
        "2026-01-01T00:01:00+00:00",
        "ok",
        meta={
            "burst_tflops": burst,
            "sustained_tflops": sustained,
            "drop_pct": 100 * (burst - sustained) / burst,
            "drop_flagged": drop_flagged,
            "drop_threshold_pct": threshold,
        },
    )


def test_the_soak_step_judges_burst_sustained_and_the_drop():
    run = stand_in_soak(H100_SXM, 760.0, 640.0, True)
    rows = {r["figure"]: r for r in map(figure_row, soak_figures(run))}
    assert rows["matmul bf16 burst"]["verdict"] == "pass"  # 760 / 794.5 = 95.7 %
    assert rows["matmul bf16 sustained"]["verdict"] == "below expected"  # 640 / 794.5 = 80.6 %
    drop = rows["matmul bf16 burst→sustained drop"]
    assert drop["measured"] == pytest.approx(100 * 120 / 760) and drop["reference"] == 10.0
    assert drop["verdict"] == "below expected"  # the soak flagged it
    assert overall(list(rows.values())) == "below expected"
    steady = {r["figure"]: r for r in map(figure_row, soak_figures(stand_in_soak(H100_SXM, 760.0, 740.0, False)))}
    assert {r["verdict"] for r in steady.values()} == {"pass"}


def test_a_soak_below_its_reference_at_a_power_cap_says_so_in_the_answer():
    """Seen on an H200 at its 700 W limit: burst 665.96, sustained 660.97 TFLOPS against the published 794.5
    (83.8% and 83.2%, under 85%), SM clock 1489.5 → 1485 MHz, NVML: sw_power_cap."""
    run = stand_in_soak(H100_SXM, 665.96, 660.97, False)
    run.meta |= {"burst_sm_clock_mhz": 1489.5, "sustained_sm_clock_mhz": 1485.0}
    run.meta |= {"sustained_slowdown_reasons": ["sw_power_cap"]}
    rows = [figure_row(f) for f in soak_figures(run)]
    below = [r for r in rows if r["verdict"] == "below expected"]
    assert [r["figure"] for r in below] == ["matmul bf16 burst", "matmul bf16 sustained"]
    said = "SM clock 1490 → 1485 MHz; NVML slowdown reasons: sw_power_cap"
    assert all(r["slowdown"] == said and said in r["reason"] for r in below)
    text = answer(rows, H100_SXM)
    assert text.startswith("Not healthy") and text.endswith(f"While measured, the card said it ran slower: {said}.")
    calm = stand_in_soak(H100_SXM, 665.96, 660.97, False)  # NVML named no reason: nothing said
    assert "ran slower" not in answer([figure_row(f) for f in soak_figures(calm)], H100_SXM)


def test_a_cpu_soak_is_measured_not_judged():
    cpu = {"kind": "cpu", "name": "AMD EPYC 7B13", "host": "node-a", "torch_device": "cpu"}
    run = stand_in_soak(cpu, 0.5, 0.3, True)
    rows = {r["figure"]: r for r in map(figure_row, soak_figures(run))}
    assert {r["verdict"] for r in rows.values()} == {"no reference"}
    drop = rows["matmul bf16 burst→sustained drop"]
    assert drop["measured"] == pytest.approx(40.0)  # 100 × (0.5 − 0.3) / 0.5
    assert drop["reason"] == "no reference for CPU — AMD EPYC 7B13; the soak flagged it (over 10%)"
    assert overall(list(rows.values())) == "healthy"
    assert cell(rows["matmul bf16 burst"], "measured") == "500 GFLOPS"  # the lab's unit rule: GFLOPS on a CPU
    assert cell(judged(H100_SXM, "matmul bf16", 780.0), "measured") == "780 TFLOPS"

"""The health verdict table: each rule on hand-made figures (thresholds applied by hand), the exact SKU picked
by name and memory, every reference quoting its source and date, a fixed shape judged per clock and never by a
searched maximum, the card's power cap read as normal and its faults named."""

import re
from dataclasses import replace

import pytest

from core.hardware import health_reference as ref
from core.hardware import published
from core.hardware.specs import match_spec
from core.health.figures import Figure, soak_figures
from core.health.verdict import figure_row, overall, slow_gpus, step_row
from core.health.words import answer, cell
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
    """A figure as the best of a shape search: what a published maximum judges."""
    return figure_row(Figure(figure, "cuda:0", value, unit, device, figure, searched=True))


# The healthy H200's 8192³ bf16 point (examples/nvidia-h200-2026-11-26.json): 678.59 TFLOPS at 1,515 MHz.
HEALTHY_PER_GHZ = 678.59 / 1.515  # 447.9 TFLOPS per GHz of SM clock


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
    assert row.reference == 794.5 and row.reference_kind == "published"
    assert row.reference_card == "measured on an H100 SXM"
    assert row.verdict == verdict
    assert row.fraction == pytest.approx(value / 794.5)
    assert "ml-engineering" in row.source and row.date == "2026-08-10"


def test_a_variant_is_judged_by_its_own_sheet_not_the_sxm_figure():
    """H100 PCIe: no published measurement, so 70 % of its own sheet's 756.5 (= 529.55), never SXM's 794.5."""
    pcie = gpu("NVIDIA H100 PCIe")
    row = judged(pcie, "matmul bf16", 600.0)
    assert row.reference == pytest.approx(756.5 * 0.70) and row.reference_kind == "datasheet"
    assert row.verdict == "pass"  # 600 / 529.55 = 113 %; against the SXM's 794.5 it would be 75.5 %
    assert judged(H100_SXM, "matmul bf16", 600.0).verdict == "below expected"
    assert judged(gpu("NVIDIA H100 NVL", 94), "matmul bf16", 600.0).reference == pytest.approx(835.5 * 0.70)
    # the peer path of a PCIe card depends on its bridges: no reference rather than the SXM's NVLink
    assert judged(pcie, "peer copy", 100.0, "GB/s").verdict == "no reference"
    assert judged(H100_SXM, "peer copy", 400.0, "GB/s").reference == pytest.approx(450 * 0.75)
    # the A100's memory size picks the SKU: 40 GB and 80 GB SXM are different entries
    assert ref.sku_of(gpu("NVIDIA A100-SXM4-40GB", 40)) == "a100-sxm-40"
    assert ref.sku_of(gpu("NVIDIA A100-SXM4-80GB", 80)) == "a100-sxm-80"


def test_the_dcgm_case_is_far_below():
    """An A100 delivering 6.7 fp32 TFLOPS of its sheet's 19.5: 6.7 / (0.70 × 19.5) = 49 % → far below."""
    row = judged(gpu("NVIDIA A100-SXM4-40GB", 40), "matmul fp32", 6.7)
    assert row.reference == pytest.approx(13.65) and row.verdict == "far below"


def test_an_unknown_sku_and_a_cpu_get_no_reference_never_a_guess():
    row = judged(gpu("NVIDIA Quadro Foo 9000", 48), "matmul bf16", 100.0)
    assert row.verdict == "no reference" and row.reference is None
    assert "no reference for NVIDIA Quadro Foo 9000" in row.reason
    cpu = {"kind": "cpu", "name": "AMD EPYC 7B13", "host": "node-a"}
    row = figure_row(Figure("all_reduce busbw", "node", 1.3, "GB/s", cpu, "all_reduce busbw"))
    assert row.verdict == "no reference" and "no reference for CPU — AMD EPYC 7B13" in row.reason
    assert overall([row]) == "healthy"  # nothing below expected: measured, not judged


def test_host_copies_use_the_link_generation_of_the_sku():
    assert judged(H100_SXM, "h2d pinned", 50.0, "GB/s").reference == pytest.approx(64 * 0.75)  # Gen5
    a100 = judged(gpu("NVIDIA A100 80GB PCIe"), "d2h pinned", 20.0, "GB/s")  # Gen4: 0.75 × 32 = 24 GB/s
    assert a100.reference == pytest.approx(24.0) and a100.verdict == "below expected"  # 20 / 24 = 83 %
    assert judged(gpu("NVIDIA A100 80GB PCIe"), "d2h pinned", 21.0, "GB/s").verdict == "pass"  # 87.5 %


def test_every_reference_says_where_it_comes_from_and_when():
    for r in ref.REFERENCES:
        assert r.source and r.date, r
        if r.kind == "published":
            assert r.fraction == 1.0 and "ml-engineering" in r.source and re.fullmatch(r"\d{4}-\d\d-\d\d", r.date)
        else:
            assert r.kind == "datasheet" and 0 < r.fraction < 1 and r.reason
            assert any(w in r.source for w in ("datasheet", "whitepaper", "documentation")), r  # the vendor's
            assert re.fullmatch(r"20\d\d", r.date) or r.date.startswith("undated"), r
            assert r.value == pytest.approx(r.basis * r.fraction)


def test_the_matmul_fraction_is_at_the_low_end_of_what_the_published_cards_reach():
    assert ref.MATMUL_FRACTION <= min(p.efficiency for p in published.PUBLISHED)


def stand_in_soak(device, burst, sustained, drop_flagged, threshold=10.0, clocks=None, reasons=None, power=None):
    """A hand-made run with the meta the matmul-soak experiment stores (not the experiment itself): an 8192³ bf16
    soak of two samples, the burst (second 1) and the sustained figure (second 2 on), each at ``clocks``' MHz."""
    meta = {
        "size": 8192,
        "burst_tflops": burst,
        "sustained_tflops": sustained,
        "drop_pct": 100 * (burst - sustained) / burst,
        "drop_flagged": drop_flagged,
        "drop_threshold_pct": threshold,
        "burst_second": 1,
        "sustained_from_second": 2,
    }
    rows = [{"second": 1, "tflops": burst}, {"second": 2, "tflops": sustained}]
    if clocks:
        meta |= {"burst_sm_clock_mhz": clocks[0], "sustained_sm_clock_mhz": clocks[1]}
        for row, clock in zip(rows, clocks):
            row |= {"sm_clock_mhz": clock, "power_w": power, "throttle_reasons": list(reasons or [])}
    if reasons:
        meta["sustained_slowdown_reasons"] = list(reasons)
    return RunResult(
        "matmul-soak",
        {"dtype": "bf16", "duration_s": 60.0},
        device,
        {},
        "2026-01-01T00:00:00+00:00",
        "2026-01-01T00:01:00+00:00",
        "ok",
        rows=rows,
        meta=meta,
    )


def soak_rows(run):
    return {r.figure: r for r in map(figure_row, soak_figures(run))}


def test_a_fixed_shape_is_never_judged_by_a_searched_maximum():
    """The soak's 8192³ is one shape; the published 794.5 is the best of a shape search: not comparable. Without a
    clock to judge it per clock, it is not judged at all, and says why."""
    rows = soak_rows(stand_in_soak(H100_SXM, 760.0, 640.0, False))
    burst = rows["matmul bf16 burst"]
    assert burst.verdict == "not comparable" and burst.reference is None and burst.fraction is None
    assert burst.not_comparable == (
        "not comparable: a fixed 8192×8192×8192 shape against the best of a shape search (2048x2048x13312 on the "
        "H100 SXM)"
    )
    assert "no SM clock was sampled" in burst.reason and "published 794.5 TFLOPS" in burst.reason
    assert overall(list(rows.values())) == "healthy"  # measured, not judged: named in the answer, not a failure
    assert "not judged: matmul bf16 burst 760 TFLOPS (not comparable: a fixed 8192" in answer(
        list(rows.values()), H100_SXM
    )
    # the same shape as the published best is like for like without a search
    same = figure_row(
        Figure("matmul bf16 x", "cuda:0", 700.0, "TFLOPS", H100_SXM, "matmul bf16", shape=(2048, 2048, 13312))
    )
    assert same.reference_kind == "published" and same.fraction == pytest.approx(700 / 794.5)


def test_the_soak_is_judged_per_clock_against_the_same_shape_on_a_healthy_card():
    """At 1,755 MHz: burst 760 / 1.755 = 433.0 TFLOPS/GHz = 96.7 % of the healthy 447.9 (pass); sustained
    640 / 1.755 = 364.7 = 81.4 % (below expected, under 85 %)."""
    rows = soak_rows(stand_in_soak(H100_SXM, 760.0, 640.0, True, clocks=(1755.0, 1755.0)))
    burst, sustained = rows["matmul bf16 burst"], rows["matmul bf16 sustained"]
    assert burst.reference_kind == "same shape per clock" and burst.reference == pytest.approx(HEALTHY_PER_GHZ)
    assert burst.fraction == pytest.approx(760 / 1.755 / HEALTHY_PER_GHZ) and burst.verdict == "pass"
    assert sustained.fraction == pytest.approx(640 / 1.755 / HEALTHY_PER_GHZ)
    assert sustained.verdict == "below expected"
    assert burst.reference_card == (
        "measured on an H200 SXM by this lab; the H100 SXM has the same SMs and datasheet peaks"
    )
    # beside the TFLOPS: the efficiency against the sheet's per-clock peak, 989.4 TFLOPS at 1,830 MHz
    assert burst.per_clock.efficiency == pytest.approx((760 / 1.755) / (989.4 / 1.830))
    drop = rows["matmul bf16 burst→sustained drop"]
    assert drop.measured == pytest.approx(100 * 120 / 760) and drop.reference == 10.0
    assert drop.verdict == "below expected"  # the soak flagged it
    assert overall(list(rows.values())) == "below expected"


def test_a_card_at_its_power_cap_is_healthy_and_says_so():
    """Seen on an H200 at its 700 W limit: burst 665.96, sustained 660.97 TFLOPS at 1,489.5 → 1,485 MHz, NVML
    sw_power_cap: per clock 447.1 and 445.1 TFLOPS/GHz, 99.8 % and 99.4 % of the healthy card (pass)."""
    h200 = gpu("NVIDIA H200", 141)
    run = stand_in_soak(h200, 665.96, 660.97, False, clocks=(1489.5, 1485.0), reasons=["sw_power_cap"], power=692.0)
    run.meta["power_limit_w"] = 700.0
    rows = list(soak_rows(run).values())
    assert [r.verdict for r in rows] == ["pass", "pass", "pass"]
    assert rows[1].fraction == pytest.approx(660.97 / 1.485 / HEALTHY_PER_GHZ)
    assert rows[0].clocks.state == "power-limited" and rows[0].clocks.faults == ()
    text = answer(rows, h200)
    assert text.startswith("Healthy on node-a: GPU-aaaa: nothing below expected")
    assert "Power-limited while measured, which is normal (NVML sw_power_cap" in text
    assert "SM 1490 MHz, 692 W of 700 W, NVML: sw_power_cap" in text and "of the peak per clock" in text
    assert rows[0].reference_card == "measured on an H200 SXM by this lab"


def test_a_fault_the_card_names_is_below_expected_and_named_in_words():
    """40 % lower at the same clock with a hardware slowdown: 399.6 / 1.4895 = 268.3 TFLOPS/GHz = 59.9 % of the
    healthy card (far below, under 70 %), the reason in words."""
    h200 = gpu("NVIDIA H200", 141)
    slow = stand_in_soak(h200, 0.6 * 665.96, 0.6 * 660.97, False, clocks=(1489.5, 1485.0), reasons=["hw_slowdown"])
    rows = list(soak_rows(slow).values())
    assert [r.verdict for r in rows[:2]] == ["far below", "far below"]
    assert "hardware slowdown (NVML hw_slowdown)" in rows[0].reason
    text = answer(rows, h200)
    assert text.startswith("Not healthy on node-a: GPU-aaaa: 2 below expected")
    assert text.endswith("The card named a fault while measured: hardware slowdown (NVML hw_slowdown).")
    # the clock halved by the slowdown: per clock the card is well (120 %), but the fault alone is below expected
    halved = stand_in_soak(h200, 0.6 * 665.96, 0.6 * 660.97, False, clocks=(744.75, 742.5), reasons=["hw_slowdown"])
    assert [r.verdict for r in list(soak_rows(halved).values())[:2]] == ["below expected", "below expected"]


def test_the_slow_gpu_of_a_node_is_flagged():
    """Three GPUs of one node: 657, 655 and 620 TFLOPS; the median is 655 and 620 / 655 = 94.7 %, more than 5 %
    below it: the slow one. 655 and 657 are not."""
    rows = [
        replace(
            step_row("matmul bf16 sustained", f"cuda:{i}", "pass", "", value),
            unit="TFLOPS",
            device_kind="cuda",
            device="NVIDIA H200",
        )
        for i, value in enumerate((657.0, 655.0, 620.0))
    ]
    flagged = slow_gpus(rows)
    assert [r.slow_gpu for r in flagged] == [False, False, True]
    assert "the slow GPU of this node: 620 TFLOPS against the median of its 3 GPUs, 655 (94.7%" in flagged[2].reason
    assert overall(flagged) == "below expected" and overall(rows) == "healthy"
    assert slow_gpus(rows[:1]) == rows[:1]  # one GPU has no peers


def test_a_cpu_soak_is_measured_not_judged():
    cpu = {"kind": "cpu", "name": "AMD EPYC 7B13", "host": "node-a", "torch_device": "cpu"}
    run = stand_in_soak(cpu, 0.5, 0.3, True)
    rows = {r.figure: r for r in map(figure_row, soak_figures(run))}
    assert {r.verdict for r in rows.values()} == {"no reference"}
    drop = rows["matmul bf16 burst→sustained drop"]
    assert drop.measured == pytest.approx(40.0)  # 100 × (0.5 − 0.3) / 0.5
    assert drop.reason == "no reference for CPU — AMD EPYC 7B13; the soak flagged it (over 10%)"
    assert overall(list(rows.values())) == "healthy"
    assert (
        cell(rows["matmul bf16 burst"], rows["matmul bf16 burst"].measured) == "500 GFLOPS"
    )  # the lab's unit rule: GFLOPS on a CPU
    fast = judged(H100_SXM, "matmul bf16", 780.0)
    assert cell(fast, fast.measured) == "780 TFLOPS"

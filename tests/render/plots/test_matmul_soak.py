"""The soak's figure: throughput per second with burst and sustained lines; NVML panels only where read."""

import pytest

pytest.importorskip("plotly")

from core.result import RunResult
from render.plots.matmul_soak import figures, overlay
from tests.factories import make_run, soak_summary

TFLOPS = (800.0, 810.0, 805.0, 700.0, 660.0, 655.0, 650.0, 652.0)


def _rows(nvml: bool) -> list[dict]:
    rows = []
    for i, t in enumerate(TFLOPS):
        row = {"dtype": "bf16", "size": 8192, "second": i + 1, "t_start_s": float(i), "t_s": i + 1.0}
        row |= {"interval_s": 1.0, "calls": int(t), "tflops": t}
        if nvml:
            late = i >= 4
            row |= {
                "sm_clock_mhz": 1580.0 if late else 1965.0,
                "temp_c": 84.0 if late else 60.0,
                "power_w": 700.0,
                "throttle_reasons": ["sw_power_cap"] if late else [],
                "throttled": late,
            }
        rows.append(row)
    return rows


def _run(nvml: bool = True, kind: str = "cuda") -> RunResult:
    rows = _rows(nvml)
    unit = ("TFLOPS", 1.0) if kind == "cuda" else ("GFLOPS", 1e3)
    meta = {"dtype": "bf16", "size": 8192} | soak_summary(rows, burst_s=2.0, threshold_pct=10.0, unit=unit)
    if not nvml:
        meta["clocks_note"] = "a CPU has no NVML"
    device = {"kind": kind, "name": "Fake GPU", "label": "cuda:0 — Fake GPU", "torch_device": "cuda:0"}
    return make_run("matmul-soak", rows, meta, device, id="abcdef123456")


def test_burst_and_sustained_lines_sit_at_the_hand_computed_levels():
    (chart,) = figures(_run())
    fig = chart.figure
    lines = {t.name.split(" ")[0]: t for t in fig.data if t.name and t.name.split(" ")[0] in ("burst", "sustained")}
    assert list(lines["burst"].y) == [810.0, 810.0]  # the best of the samples begun in the first 2 s
    assert list(lines["sustained"].y) == [653.5, 653.5]  # median of 660, 655, 650, 652: (652 + 655) / 2
    assert list(lines["sustained"].x) == [4.0, 8.0]  # across the last half of the run
    assert lines["sustained"].line.color == "#d62728"  # a 19.3 % drop is over the 10 % threshold
    throttled = [t for t in fig.data if t.name and "slowdown" in t.name][0]
    assert list(throttled.x) == [5.0, 6.0, 7.0, 8.0]
    assert [fig.layout[f"yaxis{i}"].title.text for i in (1, 2, 3, 4)] == [
        "TFLOPS",
        "SM clock (MHz)",
        "temp. (°C)",
        "power (W)",
    ]
    assert fig.layout.xaxis4.title.text == "seconds since sampling began"
    assert fig.layout.shapes[0].x1 == 2.0  # the burst window, shaded


def test_a_cpu_run_has_no_nvml_panels_and_says_why():
    (chart,) = figures(_run(nvml=False, kind="cpu"))
    fig = chart.figure
    assert fig.layout.yaxis.title.text == "GFLOPS" and "yaxis2" not in fig.layout
    assert "NVML not read (a CPU)" in fig.layout.title.text and "CPU —" in fig.layout.title.text
    tput = [t for t in fig.data if t.name == "throughput"][0]
    assert list(tput.y) == pytest.approx([t * 1e3 for t in TFLOPS])


def all_gpu_run() -> RunResult:
    """Two GPUs: cuda:0 holds its speed (no flag), cuda:1 drops as the hand-made samples above do."""
    run = _run()
    run.device = {"kind": "cuda", "torch_device": "all", "name": "2 × Fake GPU", "label": "all 2 GPUs"}
    steady = [dict(r, tflops=810.0, throttled=False, throttle_reasons=[], sm_clock_mhz=1965.0) for r in _rows(True)]
    run.rows = [dict(r, device="cuda:0") for r in steady] + [dict(r, device="cuda:1") for r in _rows(True)]
    per = {"points": 8, "sm_clock_mhz": None, "clocks_note": "x"}
    run.meta = {
        "devices": {
            "cuda:0": soak_summary(steady, 2.0, 10.0, ("TFLOPS", 1.0)),
            "cuda:1": _run().meta,
        },
        "node": {
            "metric": "tflops",
            "label": "TFLOPS",
            "threshold": 0.05,
            "points": 8,
            "per_device": [
                per | {"device": "cuda:0", "relative": 1.1, "flagged": False},
                per | {"device": "cuda:1", "relative": 0.9, "flagged": True},
            ],
        },
    }
    return run


def test_an_all_gpu_run_draws_every_gpu_and_the_node_chart():
    run = all_gpu_run()
    charts = figures(run)
    assert [c.name for c in charts] == ["node-per-gpu", "matmul-soak"]
    names = [t.name for t in charts[1].figure.data]
    assert "cuda:0" in names and "cuda:1" in names and "cuda:1 sustained 653.5 TFLOPS" in names
    assert "cuda:0 sustained 810.0 TFLOPS" in names
    (bars,) = overlay([run, _run()])
    assert list(bars.data["burst_tflops"]) == [810.0, 810.0, 810.0]
    assert list(bars.data["sustained_tflops"]) == [810.0, 653.5, 653.5]


def test_a_sustained_rate_over_the_burst_reads_as_a_rise_not_a_negative_drop():
    """Burst 100, sustained 110 TFLOPS: 10% up, which the page once wrote "drop -10.0%"."""
    from core.rows.matmul_soak import SoakSummary
    from render.plots.matmul_soak import change_figure

    assert change_figure(SoakSummary(burst_tflops=100.0, sustained_tflops=110.0, drop_pct=-10.0)) == ("rise", "10.0%")
    assert change_figure(SoakSummary(burst_tflops=100.0, sustained_tflops=82.0, drop_pct=18.0)) == ("drop", "18.0%")

"""The matmul charts, checked directly on hand-made rows: measured points, the roofline's copy-traffic slope,
clocks, a point above the datasheet, the overlay's unit and the published best beside the datasheet."""

import pytest

from core.result import RunResult
from core.rows import upgrade


def _rows():
    base = {
        "n": 0,
        "k": 0,
        "label": "square",
        "status": "ok",
        "reason": None,
        "peak_tflops": None,
        "pct_of_peak": None,
        "median_ms": 1.0,
        "p20_ms": 0.9,
        "p80_ms": 1.1,
        "t_start_s": 0.0,
        "t_end_s": 1.0,
    }
    rows = []
    for dtype, m, tflops, err in (
        ("fp32", 64, 0.1, 2e-7),
        ("fp32", 128, 0.2, 3e-7),
        ("bf16", 64, 0.4, 3e-3),
        ("bf16", 128, 0.8, 3e-3),
        ("fp64", 64, 0.05, 0.0),
    ):
        rows.append(
            base
            | {
                "dtype": dtype,
                "m": m,
                "n": m,
                "k": m,
                "tflops": tflops,
                "tflops_p20": tflops * 0.9,
                "tflops_p80": tflops * 1.1,
                "rel_error": err,
                "intensity_flop_per_byte": m / 6,
            }
        )
    rows.append(
        base
        | {"dtype": "tf32", "m": 64, "n": 64, "k": 64, "status": "unsupported", "reason": "no TF32", "tflops": None}
    )
    return rows


def _run(rows, device=None, **meta):
    """A hand-made run as the store reads it back: the values the engine derives filled in (core.rows)."""
    return upgrade(
        RunResult(
            id="abcdef123456",
            experiment="matmul",
            config={"sizes": [64, 128]},
            device=device or {"kind": "cpu", "name": "Test CPU"},
            versions={},
            started_at="2026-01-01T00:00:00",
            finished_at=None,
            status="ok",
            error=None,
            rows=rows,
            meta=meta,
        )
    )


def test_figures_plot_the_measured_points():
    from render.plots.matmul import figures

    charts = figures(_run(_rows(), copy_bandwidth_gbs=10.0))
    names = [c.name for c in charts]
    assert names == ["matmul-throughput", "matmul-accuracy", "matmul-roofline"]  # no clocks on CPU
    tput = {t.name: list(t.y) for t in charts[0].figure.data}
    assert tput["bf16"] == pytest.approx([400.0, 800.0])  # CPU shows GFLOPS: 0.4 TFLOPS → 400
    assert "tf32" not in tput  # unsupported rows are not drawn as zeros
    acc = {t.name: list(t.x) for t in charts[1].figure.data}
    assert acc["fp64"] == [1e-17]  # an exact 0 error is drawn at the floor, not dropped
    slope = [t for t in charts[2].figure.data if t.name.startswith("copy")][0]
    assert slope.y[0] == pytest.approx(10.0 * slope.x[0])  # GB/s × FLOP/B = GFLOP/s
    assert "CPU" in charts[0].figure.layout.title.text


def test_roofline_slope_is_the_copy_traffic():
    """A run stores the copy's bandwidth (bytes once) and its memory traffic (read + write): the slope is
    the traffic; a run stored before the traffic key counted copy_bandwidth_gbs as read + write."""
    from render.plots.matmul import figures

    charts = figures(_run(_rows(), copy_bandwidth_gbs=5.0, roofline_bandwidth_gbs=10.0))
    slope = [t for t in charts[2].figure.data if t.name.startswith("copy")][0]
    assert slope.name == "copy traffic 10 GB/s"
    assert slope.y[0] == pytest.approx(10.0 * slope.x[0])


def test_clock_chart_when_samples_exist():
    from render.plots.matmul import figures

    clocks = [
        {
            "t_s": 0.1 * i,
            "sm_clock_mhz": 1980 - i,
            "mem_clock_mhz": 2619,
            "power_w": 600.0,
            "temp_c": 60,
            "reasons": ["sw_power_cap"] if i == 3 else [],
        }
        for i in range(10)
    ]
    run = _run(_rows(), clocks=clocks)
    run.device = {"kind": "cuda", "name": "Fake GPU", "label": "cuda:0 — Fake GPU"}
    charts = figures(run)
    assert charts[-1].name == "matmul-clocks"
    throttled = [t for t in charts[-1].figure.data if t.name == "throttled"][0]
    assert list(throttled.x) == [pytest.approx(0.3)]


def _gpu_run_above_peak():
    """A fabricated H100 run: 1000 TFLOPS against the 989.4 sheet (101 %) is flagged, 700 (71 %) is not."""
    base = {
        "label": "square",
        "status": "ok",
        "reason": None,
        "peak_tflops": 989.4,
        "median_ms": 1.0,
        "p20_ms": 0.9,
        "p80_ms": 1.1,
        "t_start_s": 0.0,
        "t_end_s": 1.0,
        "rel_error": 3e-3,
        "intensity_flop_per_byte": 100.0,
    }
    rows = [
        base
        | {
            "dtype": "bf16",
            "m": m,
            "n": m,
            "k": m,
            "tflops": t,
            "tflops_p20": t,
            "tflops_p80": t,
            "pct_of_peak": t / 9.894,
        }
        for m, t in ((4096, 700.0), (8192, 1000.0))
    ]
    return _run(rows, {"kind": "cuda", "name": "NVIDIA H100 80GB HBM3", "label": "cuda:0 — NVIDIA H100 80GB HBM3"})


def test_a_point_above_the_datasheet_is_marked_as_a_measurement_error():
    from render.plots.matmul import figures

    chart = figures(_gpu_run_above_peak())[0]
    (wrong,) = [t for t in chart.figure.data if t.name.startswith("above the datasheet peak")]
    assert list(wrong.x) == [8192] and list(wrong.y) == [1000.0]  # flagged from the rows, by hand
    assert "measurement error" in wrong.name


def test_overlay_uses_gflops_only_when_every_run_is_a_cpu_run():
    from render.plots.matmul import overlay

    cpu, gpu = _run(_rows()), _gpu_run_above_peak()
    (chart,) = overlay([cpu])
    assert chart.figure.layout.yaxis.title.text.startswith("GFLOPS")
    assert sorted(t.y[0] for t in chart.figure.data) == pytest.approx([50.0, 200.0, 800.0])  # best per dtype × 1000
    (mixed,) = overlay([cpu, gpu])
    assert mixed.figure.layout.yaxis.title.text.startswith("TFLOPS")


def test_published_best_achievable_beside_the_datasheet():
    from render.plots.matmul import figures, measured

    run = _gpu_run_above_peak()  # an H100 SXM: the source measured 794.5 bf16 TFLOPS at best
    df = measured(run)
    assert list(df["published_tflops"]) == [794.5, 794.5]
    # 4096³ and 8192³ are fixed shapes, the published figure the best of a shape search: no % of it, and why
    assert df["pct_of_published"].isna().all()
    assert list(df["published_note"]) == [
        f"not comparable: a fixed {m}×{m}×{m} shape against the best of a shape search (2048x2048x13312 on the "
        "H100 SXM)"
        for m in (4096, 8192)
    ]
    fig = figures(run)[0].figure
    dotted = [s for s in fig.layout.shapes if s.line.dash == "dot"]
    assert [s.y0 for s in dotted] == [794.5]
    assert any(
        "best of a shape search 794.5 (published 2026-08-10, measured on an H100 SXM)" in a.text
        for a in fig.layout.annotations
    )
    chosen = measured(run, "NVIDIA A100 SXM")  # any GPU's published figure can be chosen
    assert list(chosen["published_tflops"]) == [271.2, 271.2]
    same = _run([r | {"m": 2048, "n": 2048, "k": 13312} for r in run.rows], run.device)  # the published best shape
    assert list(measured(same)["pct_of_published"]) == pytest.approx([100 * 700 / 794.5, 100 * 1000 / 794.5])
    assert set(measured(same)["published_note"]) == {"measured on an H100 SXM"}
    search = run
    search.config = {"mamf": True}  # a bounded search: its best (8192³, 1000) meets the published best, no other
    assert list(measured(search)["pct_of_published"]) == pytest.approx([float("nan"), 100 * 1000 / 794.5], nan_ok=True)
    assert measured(_run(_rows()))["published_tflops"].isna().all()  # a CPU run has none


def test_each_dtype_s_best_point_is_the_fastest_in_the_order_the_sweep_met_the_dtypes():
    """The page's "best <dtype>" facts: by hand, fp32's best is 128³ at 0.2 TFLOPS (200 GFLOPS on a CPU), bf16's
    128³ at 0.8, fp64's 64³ at 0.05; tf32 was not measured, so it has none."""
    from render.plots.matmul import best_points, throughput

    run = _run(_rows())
    best = best_points(run)
    assert [(p.dtype, p.m) for p, _ in best] == [("fp32", 128), ("bf16", 128), ("fp64", 64)]
    assert [throughput(run, p) for p, _ in best] == pytest.approx([200.0, 800.0, 50.0])
    assert all(said.pct is None and said.note == "" for _, said in best)  # a CPU has no published figure

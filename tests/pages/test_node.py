"""All GPUs at once on the matmul and step-benchmark pages: the toggle (only with ≥ 2 GPUs), the per-GPU
bars against the node median, and the pages drawing a merged run."""

import time

import pytest

pytest.importorskip("plotly")

from core.result import RunResult
from render.node import node_chart

CPU = {"kind": "cpu", "index": None, "torch_device": "cpu", "name": "Test CPU", "label": "CPU — Test CPU"}


def fake_gpu(i):
    return {
        "kind": "cuda",
        "index": i,
        "torch_device": f"cuda:{i}",
        "name": "Fake GPU",
        "label": f"cuda:{i} — Fake GPU",
        "compute_capability": "9.0",
        "total_memory_bytes": 80 * 2**30,
        "multiprocessors": 132,
        "bf16_supported": True,
        "tf32": {},
        "spec": None,
    }


def fake_box(count):
    return {
        "devices": [CPU] + [fake_gpu(i) for i in range(count)],
        "default": "cuda:0" if count else "cpu",
        "cuda_available": bool(count),
        "cuda_unavailable_reason": None,
        "versions": {},
    }


def all_gpu_run(experiment="matmul", rows=None, config=None):
    per = [
        {
            "device": f"cuda:{i}",
            "gpu_index": i,
            "relative": r,
            "points": 2,
            "flagged": r < 0.95,
            "sm_clock_mhz": 1980.0 - 400 * (r < 0.95),
            "sm_clock_min_mhz": 1500.0,
            "temp_c": 88.0 if r < 0.95 else 60.0,
            "power_w": 500.0,
            "throttle_reasons": ["hw_slowdown"] if r < 0.95 else [],
            "throttled": r < 0.95,
        }
        for i, r in enumerate((1.0, 1.01, 0.9))
    ]
    node = {
        "metric": "tflops",
        "label": "TFLOPS",
        "threshold": 0.05,
        "per_device": per,
        "flagged": ["cuda:2"],
        "points": 2,
    }
    return RunResult(
        experiment=experiment,
        config=config or {"sizes": [1024]},
        device={"kind": "cuda", "torch_device": "all", "name": "3 × Fake GPU", "label": "all 3 GPUs — 3 × Fake GPU"},
        versions={},
        started_at="2026-11-22T00:00:00+00:00",
        finished_at=None,
        status="ok",
        rows=rows or [],
        meta={"node": node, "concurrency": {"all_at_once": True, "note": None}},
    )


def test_node_chart_bars_with_the_median_and_the_flag_line():
    chart = node_chart(all_gpu_run())
    bar = chart.figure.data[0]
    assert list(bar.x) == ["cuda:0", "cuda:1", "cuda:2"] and list(bar.y) == pytest.approx([100.0, 101.0, 90.0])
    assert bar.marker.color[2] != bar.marker.color[0]  # the flagged GPU stands out
    lines = sorted(s.y0 for s in chart.figure.layout.shapes)
    assert lines == [95.0, 100.0]  # the flag threshold and the node median
    assert "hw_slowdown" in bar.hovertext[2] and "88 °C" in bar.hovertext[2]
    assert "all 3 GPUs" in chart.figure.layout.title.text


def test_matmul_figures_of_a_merged_run_show_each_gpu():
    from core.rows import upgrade
    from render.plots.matmul import figures

    rows = [
        {
            "device": f"cuda:{i}",
            "dtype": "bf16",
            "m": m,
            "n": m,
            "k": m,
            "label": "square",
            "status": "ok",
            "tflops": t,
            "tflops_p20": t,
            "tflops_p80": t,
            "median_ms": 1.0,
            "peak_tflops": 989.0,
            "pct_of_peak": None,
            "pct_of_best": None,
            "rel_error": 1e-3,
            "intensity_flop_per_byte": m / 3,
        }
        for i, t0 in enumerate((500.0, 505.0, 450.0))
        for m, t in ((1024, t0), (2048, t0 * 1.2))
    ]
    charts = figures(upgrade(all_gpu_run(rows=rows)))  # as the store reads it back
    assert [c.name for c in charts][:2] == ["node-per-gpu", "matmul-throughput"]
    names = [t.name for t in charts[1].figure.data]
    assert names == ["bf16 · cuda:0", "bf16 · cuda:1", "bf16 · cuda:2"]
    assert len(charts[1].figure.layout.shapes) == 1  # one datasheet line per dtype, not per GPU


def test_step_bench_figures_of_a_merged_run():
    from render.plots.step_bench import figures

    rows = [
        {
            "device": f"cuda:{i}",
            "kind": "sample",
            "series": "warm",
            "precision": "fp32",
            "step": s,
            "phase": "step",
            "ms": 10.0 + i,
        }
        for i in range(3)
        for s in (1, 2)
    ]
    charts = figures(all_gpu_run("step-bench", rows, {"model": "tiny", "sweep": False}))
    assert [c.name for c in charts] == ["node-per-gpu", "step-per-gpu-times"]
    assert [list(b.y) for b in charts[1].figure.data] == [[10.0, 10.0], [11.0, 11.0], [12.0, 12.0]]


@pytest.mark.parametrize("page, key", [("pages/matmul.py", "matmul"), ("pages/step_bench.py", "step_bench")])
def test_the_all_gpus_choice_is_absent_on_a_box_without_two_gpus(app, monkeypatch, page, key):
    monkeypatch.setattr("pages.common.lab.query_devices", lambda: fake_box(1))
    at = app.run().switch_page(page).run()
    assert not at.exception
    assert not [t for t in at.toggle if t.key == f"{key}.all_gpus"]


def test_all_gpus_on_the_matmul_page_fans_out_and_stores_one_run(app, monkeypatch):
    """Two pretend GPUs: the toggle appears, Run fans out to cuda:0 and cuda:1; the real workers find no
    CUDA here, so the one merged run is an error that names both GPUs — stored and shown."""
    monkeypatch.setattr("pages.common.lab.query_devices", lambda: fake_box(2))
    from core.fanout import box_gpus

    monkeypatch.setattr("core.workerprocess.query_devices", lambda: fake_box(2))
    box_gpus.cache_clear()
    try:
        at = app.run().switch_page("pages/matmul.py").run()
        toggle = next(t for t in at.toggle if t.key == "matmul.all_gpus")
        assert toggle.label == "All 2 GPUs at once"
        toggle.set_value(True).run()
        at.multiselect(key="matmul.dtypes").set_value(["fp32"]).run()
        at.button(key="matmul.button").click().run()
        deadline = time.monotonic() + 120
        while not at.error and time.monotonic() < deadline:
            time.sleep(0.5)
            at.run()
        text = " ".join(e.value for e in at.error).replace("\\", "")  # the banner escapes Markdown punctuation
        assert "cuda:0: invalid request" in text and "cuda:1: invalid request" in text
        from pages.common import lab

        runs = lab.store().list()
        assert len(runs) == 1 and runs[0].device["torch_device"] == "all" and runs[0].status == "error"
    finally:
        box_gpus.cache_clear()

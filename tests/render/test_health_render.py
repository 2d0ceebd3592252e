"""The health renderers: the trend of each figure per box (regressions marked by the engine's rule), the
one-page HTML report, and the Compare page drawing the trend of a stored soak run."""

import pytest

pytest.importorskip("plotly")

from core.health.check import HealthConfig, HealthReport
from core.health.figures import figures_of
from core.health.verdict import figure_row, step_row
from render.health import health_html
from render.trend import trend_charts, trend_frame
from tests.core.health.test_verdict import H100_SXM, gpu, stand_in_soak

OTHER_BOX = gpu("NVIDIA H100 80GB HBM3", host="node-b", uuid="GPU-bbbb")


def soak_series():
    runs = []
    for day, (device, sustained) in enumerate(
        [(H100_SXM, 700.0), (H100_SXM, 710.0), (OTHER_BOX, 500.0), (H100_SXM, 705.0), (H100_SXM, 650.0)], start=1
    ):
        run = stand_in_soak(device, 760.0, sustained, False)
        run.started_at, run.id = f"2026-02-0{day}T00:00:00+00:00", f"run{day}"
        runs.append(run)
    return runs


def test_the_trend_marks_the_slower_run_of_its_own_box_only():
    df = trend_frame(soak_series())
    sustained = df[df["figure"] == "matmul bf16 sustained"].set_index("run_id")
    # node-a: 700, 710, 705 then 650, below 700 − max(10, 3 % of 705) = 678.85; node-b's 500 is another box
    assert sustained["regressed"].to_dict() == {
        "run1": False,
        "run2": False,
        "run3": False,
        "run4": False,
        "run5": True,
    }
    assert "650 TFLOPS now" in sustained.loc["run5", "history"] and "median 705" in sustained.loc["run5", "history"]
    charts = {c.name: c for c in trend_charts(soak_series())}
    assert set(charts) == {
        "trend-matmul-bf16-burst",
        "trend-matmul-bf16-sustained",
        "trend-matmul-bf16-burst→sustained-drop",
    }
    traces = charts["trend-matmul-bf16-sustained"].figure.data
    assert [len(t.y) for t in traces if t.mode == "lines+markers"] == [4, 1]  # node-a, node-b
    (marked,) = [t for t in traces if t.mode == "markers"]
    assert list(marked.y) == [650.0]
    assert "TFLOPS" in charts["trend-matmul-bf16-sustained"].figure.layout.yaxis.title.text
    # the legend names each box by its host and GPU, the UUID in the hover; times to the minute
    names = [t.name for t in traces if t.mode == "lines+markers"]
    assert names[1].startswith("node-b: NVIDIA H100 80GB HBM3") and not any("GPU-" in n for n in names)
    assert charts["trend-matmul-bf16-sustained"].figure.layout.xaxis.tickformat == "%Y-%m-%d<br>%H:%M"


def test_a_trend_of_one_run_spans_a_day_not_milliseconds():
    (one,) = soak_series()[:1]
    chart = next(c for c in trend_charts([one]) if c.name == "trend-matmul-bf16-sustained")
    start, end = chart.figure.layout.xaxis.range
    import pandas as pd

    assert pd.Timestamp(end) - pd.Timestamp(start) == pd.Timedelta(hours=24)


def test_the_one_page_report_names_the_verdict_the_references_and_escapes_text():
    report = HealthReport(config=HealthConfig(device="cuda:0"), device=H100_SXM)
    soak = stand_in_soak(H100_SXM, 760.0, 640.0, True, clocks=(1755.0, 1755.0), reasons=["sw_power_cap"], power=690.0)
    report.rows = [figure_row(f) for f in figures_of(soak)]
    report.rows.append(step_row("doctor: <script>alert(1)</script>", "cuda:0", "fail", "a & b"))
    page = health_html(report.to_run())
    assert "<b>failed</b>" in page and "node-a" in page and "GPU-aaaa" in page
    # the fixed shape per clock against the healthy card, the published maximum named with its card, not judged
    assert "8192×8192×8192 bf16 on a healthy H200 SXM" in page and "measured on an H200 SXM by this lab" in page
    assert "published 794.5 TFLOPS, measured on an H100 SXM: not comparable: a fixed 8192×8192×8192 shape" in page
    assert "SM 1755 MHz, 690 W (power limit not recorded), NVML: sw_power_cap — power-limited" in page
    assert "of the peak per clock" in page and "ml-engineering" in page
    assert "Rules and their sources" in page and "nvmlClocksEventReasons" in page
    assert "&lt;script&gt;" in page and "<script>" not in page and "a &amp; b" in page
    assert "pass ≥ 85%" in page
    assert len(page) < 30_000  # one page, no scripts


@pytest.mark.parametrize("selected", [["run5"]])
def test_the_compare_page_draws_the_trend_of_a_soak_run(app, store, selected):
    for run in soak_series():
        store.save(run)
    at = app.run()
    at.switch_page("pages/compare.py").run()
    at.multiselect(key="compare.selected").set_value(selected).run()
    assert not at.exception, [e.value for e in at.exception]
    specs = [c.proto.spec for c in at.get("plotly_chart")]
    assert any("Trend: matmul bf16 sustained" in s for s in specs)
    assert any("5 runs of matmul" in m.value and "one line per box" in m.value for m in at.markdown), [
        m.value for m in at.markdown
    ]


def test_the_compare_page_opens_a_stored_health_run(app, store):
    report = HealthReport(config=HealthConfig(device="cuda:0"), device=H100_SXM)
    soak = stand_in_soak(H100_SXM, 760.0, 640.0, True, clocks=(1755.0, 1755.0))
    report.rows = [figure_row(f) for f in figures_of(soak)]
    report.rows.append(step_row("doctor: every experiment runs", "cuda:0", "pass", "", "14 of 14 ok", "ok"))
    run = report.to_run()
    run.id = "h1h1"
    store.save(run)
    at = app.run()
    at.switch_page("pages/compare.py").run()
    at.multiselect(key="compare.selected").set_value(["h1h1"]).run()
    assert not at.exception, [e.value for e in at.exception]
    specs = [c.proto.spec for c in at.get("plotly_chart")]
    assert any("Health: below expected" in s for s in specs)


def test_a_cpu_soak_s_unjudged_drop_is_named_in_the_verdict_not_passed_over():
    """On a CPU the soak's burst→sustained drop has no reference: the verdict stays healthy, and its words
    (the report's line, the page's banner, which is a warning, not a success) name the drop it did not judge."""
    from core.health.words import banner

    cpu = {"kind": "cpu", "name": "Test CPU", "host": "box-1", "torch_device": "cpu"}
    soak = stand_in_soak(cpu, 0.1, 0.072, True)
    report = HealthReport(config=HealthConfig(device="cpu"), device=cpu)
    report.rows = [figure_row(f) for f in figures_of(soak)]
    drop = next(r for r in report.rows if "drop" in r.figure)
    assert drop.verdict == "no reference" and report.verdict == "healthy"
    run = report.to_run()
    kind, words = banner(run)
    assert kind == "warning"
    assert words.startswith("Healthy on box-1: Test CPU — 3 figures not judged: matmul bf16 burst 100 GFLOPS (")
    assert f"burst→sustained drop {drop.measured:.0f}% (no reference for " in words
    assert "nothing below expected" not in words
    run.meta["answer"] = "Healthy on box-1: nothing below expected — 3 measured without a reference."  # stored before
    assert "3 figures not judged" in health_html(run) and banner(run)[1] == words

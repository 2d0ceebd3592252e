"""The Step benchmark page runs `tiny` on CPU and draws the timing and kernel charts (the charts themselves:
tests/render/plots/test_step_bench.py)."""

import pytest

from tests.pages.waiting import chart, error, until

pytest.importorskip("plotly")


PAGE = "pages/step_bench.py"


def _wait_for_charts(at, deadline_s=240):
    until(at, lambda at: chart(at) or error(at), deadline_s, what="chart")


def _run_with(at, **inputs) -> None:
    """Set the page's number inputs (``step_bench.<name>``), press Run and wait for the charts."""
    for name, value in inputs.items():
        at.number_input(key=f"step_bench.{name}").set_value(value)
    at.run()
    next(b for b in at.button if b.label == "Run step benchmark").click().run()
    _wait_for_charts(at)


def test_page_runs_tiny_on_cpu(cpu_app):
    at = cpu_app.run()
    at = at.switch_page(PAGE).run()
    assert not at.exception
    _run_with(at, context=16, batch=2, timed=3, warmup=1, cold=2, profile=1)
    assert not at.exception and not at.error, [e.value for e in at.error]
    titles = [c.proto.spec for c in at.get("plotly_chart")]
    for expected in ("Time per phase", "First steps without warm-up", "kernel groups", "Top kernels"):
        assert any(expected in t for t in titles), expected
    assert any("CPU" in t for t in titles)  # CPU runs say so on every chart
    assert at.dataframe  # the kernel table
    assert any(m.label == "MFU" and m.value == "n/a" for m in at.metric)
    assert not any(m.delta for m in at.metric)  # the facts under the figures are captions, not change arrows
    # one unit rule: GFLOPS on a CPU, the unit in the label so the value is never cut off
    achieved = next(m for m in at.metric if m.label.startswith("Achieved"))
    assert achieved.label == "Achieved (GFLOPS)" and float(achieved.value.replace(",", "")) > 0


@pytest.mark.gpu
def test_page_on_a_gpu_times_with_cuda_events_and_reports_mfu(gpu_app):
    at = gpu_app.run()
    at = at.switch_page(PAGE).run()
    _run_with(at, context=64, timed=3, profile=1)
    assert not at.exception and not at.error, [e.value for e in at.error]
    titles = [c.proto.spec for c in at.get("plotly_chart")]
    assert any("cuda:0" in t for t in titles) and not any("CPU —" in t for t in titles)
    assert any("CUDA events" in c.value for c in at.caption)
    mfu = next(m for m in at.metric if m.label == "MFU")
    assert mfu.value.endswith("%") or any(
        "no datasheet entry" in c.value for c in at.caption
    )  # a number where the GPU has a sheet
    assert at.dataframe and "Top kernels" in [s.value for s in at.subheader]

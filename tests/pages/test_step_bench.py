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


def test_page_runs_course_vs_modern_on_cpu(cpu_app):
    at = cpu_app.run()
    at = at.switch_page(PAGE).run()
    assert not at.exception
    assert at.radio(key="step_bench.which").value == "course vs modern"  # the default: both stacks, one shape
    _run_with(at, context=16, batch=2, timed=3, warmup=1, most=2, cold=2, profile=1)
    assert not at.exception and not at.error, [e.value for e in at.error]
    titles = [c.proto.spec for c in at.get("plotly_chart")]
    for expected in ("Stacks side by side", "Time per phase", "First steps without warm-up", "kernel groups"):
        assert any(expected in t for t in titles), expected
    assert any("Top kernels" in t and "stack modern" in t for t in titles)
    assert any("CPU" in t for t in titles)  # CPU runs say so on every chart
    # the answer in words before the table: each stack's line, its MFU or why there is none, its busy share
    lines = [m.value.replace("\\", "") for m in at.markdown if m.value.startswith("- fp32 · ")]  # unescaped
    assert [line.split(":")[0] for line in lines] == ["- fp32 · course", "- fp32 · modern"]
    assert all("no MFU (CPU: no datasheet peak, so no MFU)" in line and "device busy" in line for line in lines)
    stacks = at.dataframe[0].value
    assert list(stacks["stack"]) == ["course", "modern"]
    for column in ("MFU (bf16 dense peak) (%)", "MFU (measured bf16 ceiling) (%)", "device busy (%)", "compile (s)"):
        assert column in stacks.columns, column
    assert stacks["compile (s)"].iloc[0] == "—" and float(stacks["compile (s)"].iloc[1]) > 0
    bound = [w.value for w in at.warning if w.value.startswith("host-bound")]
    busy = [float(b) for b in stacks["device busy (%)"]]
    assert bool(bound) == any(b < 80 for b in busy)  # the warning exactly where a stack's device idled


@pytest.mark.gpu
def test_page_on_a_gpu_times_with_cuda_events_and_reports_mfu(gpu_app):
    at = gpu_app.run()
    at = at.switch_page(PAGE).run()
    at.radio(key="step_bench.which").set_value("one stack").run()
    _run_with(at, context=64, timed=3, profile=1)
    assert not at.exception and not at.error, [e.value for e in at.error]
    titles = [c.proto.spec for c in at.get("plotly_chart")]
    assert any("cuda:0" in t for t in titles) and not any("CPU —" in t for t in titles)
    assert any("CUDA events" in c.value for c in at.caption)
    line = next(m.value.replace("\\", "") for m in at.markdown if m.value.startswith("- fp32 · course"))
    assert "of the bf16 dense peak" in line or "no datasheet entry" in line  # a number where the GPU has a sheet
    assert at.dataframe and "Top kernels" in [s.value for s in at.subheader]

"""The Matmul throughput page: widgets → a tiny CPU sweep → charts (the charts themselves:
tests/render/plots/test_matmul.py)."""

import pytest

from tests.pages.waiting import chart, until


def test_page_runs_a_tiny_cpu_sweep_and_draws_charts(cpu_app):
    at = cpu_app.run()
    at.switch_page("pages/matmul.py").run()
    assert not at.exception
    assert any("How measured" in e.label for e in at.expander)
    at.multiselect(key="matmul.dtypes").set_value(["fp32", "bf16", "tf32"]).run()
    at.multiselect(key="matmul.sizes").set_value([64, 128]).run()
    at.number_input(key="matmul.warm").set_value(5.0)
    at.number_input(key="matmul.rep").set_value(10.0)
    at.number_input(key="matmul.minr").set_value(3)
    at.checkbox(key="matmul.roof").uncheck()
    at.run()
    at.button(key="matmul.button").click().run()
    until(at, chart, 120)
    assert not at.exception
    charts = at.get("plotly_chart")
    assert len(charts) >= 3
    table = at.dataframe[-1].value
    assert sorted(table["dtype"].unique()) == ["bf16", "fp32"] and sorted(table["m"].unique()) == [64, 128]
    # one unit rule: a CPU run is GFLOPS in the table as on every chart and metric
    assert "GFLOPS (int8: OPS)" in table.columns and not any("TFLOPS" in c or c == "tflops" for c in table.columns)
    assert all(m.label.endswith("(GFLOPS)") for m in at.metric)
    assert not any(m.delta for m in at.metric)  # where a best was measured is a fact under it, not an arrow
    warning = " ".join(w.value for w in at.warning)
    assert "tf32" in warning and "unsupported on" in warning
    assert warning.count("- tf32 ") == 1  # its two sizes share one reason: said once, at the first (64×64×64)
    assert "- tf32 64×64×64: unsupported on" in warning
    # no "None" in the table: what a CPU run lacks (the datasheet's %, clocks, power) is "—", said once
    assert not table.isna().any().any() and (table["% of datasheet"] == "—").all()
    assert any("the datasheet column shows —" in c.value for c in at.caption)
    # a CPU run has no GPU whose published figures to show: the picker does not offer "the run's GPU"
    picker = at.selectbox(key="matmul.published")
    assert picker.value == "none (a CPU run: no published figures)" and "the run's GPU" not in picker.options


@pytest.mark.parametrize("sidebar, soak", [("fp16", "fp16"), ("tf32", "fp32")])
def test_the_soak_starts_from_the_sidebar_dtype(data_dir, sidebar, soak):
    """The sidebar's Dtype is where the page starts; on a CPU one that only a GPU runs falls back to fp32. The
    page alone (AppTest drops the sidebar's widget state on a page switch), the sidebar's selections as keys."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    from tests.conftest import ROOT

    st.cache_resource.clear()
    at = AppTest.from_file(str(ROOT / "pages" / "matmul.py"), default_timeout=120)
    at.session_state["lab.device"] = "cpu"
    at.session_state["lab.dtype"] = sidebar
    at.session_state["matmul.measure"] = "soak"
    at.run()
    assert not at.exception
    assert at.selectbox(key="matmul-soak.dtype").value == soak


@pytest.mark.gpu
def test_page_on_a_gpu_shows_tflops(gpu_app):
    at = gpu_app.run()
    at.switch_page("pages/matmul.py").run()
    assert not any("Running on the **CPU**" in i.value for i in at.info)
    at.multiselect(key="matmul.dtypes").set_value(["bf16"]).run()
    at.multiselect(key="matmul.sizes").set_value([1024, 2048]).run()
    at.button(key="matmul.button").click().run()
    until(at, chart, 300)
    assert not at.exception
    table = at.dataframe[-1].value
    assert "TFLOPS (int8: OPS)" in table.columns and all(m.label.endswith("(TFLOPS)") for m in at.metric)
    assert not any("CPU —" in c.proto.spec for c in at.get("plotly_chart"))

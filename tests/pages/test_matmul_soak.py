"""The Matmul page's soak: a 2-s CPU soak from the widgets, and a flagged GPU run drawn with its verdict first."""

import pytest

pytest.importorskip("plotly")

from tests.pages.waiting import chart, until
from tests.render.plots.test_matmul_soak import _run, all_gpu_run


def _soak_page(app):
    at = app.run()
    at.switch_page("pages/matmul.py").run()
    at.radio(key="matmul.measure").set_value("soak").run()
    assert not at.exception
    return at


def test_a_short_cpu_soak_from_the_page_answers_in_words_first(cpu_app):
    at = _soak_page(cpu_app)
    assert at.selectbox(key="matmul-soak.dtype").value == "fp32"  # the CPU's default
    assert any("No soak yet" in i.value for i in at.info)
    at.number_input(key="matmul-soak.duration").set_value(2.0)
    at.number_input(key="matmul-soak.size").set_value(64).run()
    at.button(key="matmul-soak.button").click().run()
    until(at, chart, 120)
    assert not at.exception
    verdict = [*at.success, *at.warning]
    assert len(verdict) == 1 and verdict[0].value.startswith("Sustained ")
    burst, sustained, change = at.metric  # a CPU's sustained rate may fall or rise after the burst: said either way
    assert [burst.label, sustained.label] == ["burst (GFLOPS)", "sustained (GFLOPS)"]
    shown = float(sustained.value.replace(",", "")), float(burst.value.replace(",", ""))
    if shown[0] != shown[1]:  # equal as shown: a change smaller than the rounding, either word is right
        assert change.label == ("drop" if shown[0] < shown[1] else "rise")
    assert change.label in ("drop", "rise") and not change.value.startswith("-")
    table = at.dataframe[-1].value
    assert "GFLOPS" in table.columns and "sm_clock_mhz" not in table.columns and len(table) >= 1
    assert any("NVML" in c.value for c in at.caption)  # why there is no clock column, said


def test_a_flagged_gpu_run_shows_the_drop_and_its_cause(cpu_app):
    cpu_app.session_state["matmul-soak.run"] = _run()
    at = _soak_page(cpu_app)
    (warning,) = at.warning
    assert "a 19.3% drop, over the 10% threshold" in warning.value.replace("\\", "")
    assert "SM clock 1965 → 1580 MHz" in warning.value.replace("\\", "")
    assert [m.value for m in at.metric] == ["810.0", "653.5", "19.3%"]
    assert len(at.get("plotly_chart")) == 1


def test_an_all_gpu_soak_answers_per_gpu(cpu_app):
    cpu_app.session_state["matmul-soak.run"] = all_gpu_run()
    at = _soak_page(cpu_app)
    said = [(e.value.replace("\\", ""), e in at.warning) for e in [*at.success, *at.warning]]
    assert (
        "**cuda:0**: sustained 100.0% of burst (810.0 → 810.0 TFLOPS): within the 10% threshold; "
        "SM clock 1965 → 1965 MHz; no throttling seen",
        False,
    ) in said
    assert any(text.startswith("**cuda:1**: sustained 80.7% of burst") and flagged for text, flagged in said)
    assert len(at.get("plotly_chart")) == 2  # the node chart, then the soak
    assert "device" in at.dataframe[-1].value.columns

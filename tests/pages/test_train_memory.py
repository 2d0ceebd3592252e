"""AppTest: pick a preset and precision from the dropdowns, plan without running, run tiny on CPU, charts render."""

import time

PAGE = "pages/train_memory.py"


def test_planner_answers_for_the_sidebar_model_without_running(data_dir):
    """The page alone (AppTest re-runs only the page after a first app run, dropping the sidebar's widget
    state), with the sidebar's selections as plain session keys."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    from tests.conftest import ROOT

    st.cache_resource.clear()
    at = AppTest.from_file(str(ROOT / PAGE), default_timeout=120)
    at.session_state["lab.model"] = "xl"
    at.session_state["lab.dtype"] = "bf16"
    at.session_state["lab.device"] = "cpu"
    at.run()
    assert not at.exception
    assert at.selectbox(key="training_memory.precision").value == "bf16-autocast"  # from the sidebar's dtype
    assert any(c.value.startswith("xl: 1,998,235,200 parameters") for c in at.caption)
    assert any("Estimated peak" in m.label for m in at.metric)
    assert len(at.get("plotly_chart")) >= 1
    assert not any(m.label == "Measured peak" for m in at.metric)  # nothing ran


def test_planner_and_cpu_run_render(cpu_app):
    at = cpu_app.run()
    at.switch_page(PAGE).run()
    assert not at.exception
    at.selectbox(key="training_memory.precision").set_value("fp32").run()
    at.number_input(key="training_memory.context").set_value(32).run()
    at.button(key="training_memory.button").click().run()
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        at.run()
        if any(m.label == "Measured peak" for m in at.metric):
            break
        time.sleep(0.5)
    assert not at.exception
    assert any(m.label == "Measured peak" for m in at.metric), [e.value for e in at.error]
    assert len(at.get("plotly_chart")) >= 3  # planner + timeline + estimate-vs-measured


def test_figures_and_overlay_from_a_run():
    from core.experiment import Context, drive
    from core.experiments.train_memory import TrainMemoryConfig, run
    from core.result import RunResult
    from render.plots.train_memory import figures, overlay

    def record(precision):
        out, _ = drive(
            run(TrainMemoryConfig(model="tiny", precision=precision, batch=1, context=32), Context("cpu", "CPU"))
        )
        return RunResult(
            experiment="train-memory",
            config={"model": "tiny", "precision": precision, "optimizer": "adamw", "batch": 1, "context": 32},
            device={"kind": "cpu", "name": "test CPU"},
            versions={},
            started_at="2026-01-01T00:00:00",
            finished_at=None,
            status="ok",
            rows=out.rows,
            meta=out.meta,
        )

    a, b = record("fp32"), record("bf16")
    charts = figures(a)
    assert [c.name for c in charts] == ["train-memory-timeline", "train-memory-peak"]
    timeline = charts[0].figure
    stacked = [t for t in timeline.data if t.stackgroup == "memory"]
    assert len(stacked) == 6
    assert "CPU" in timeline.layout.title.text
    peak_bar = charts[1].data
    assert peak_bar[peak_bar.source == "measured"].bytes.sum() == a.meta["trace_peak_bytes"]
    lines, bars = overlay([a, b])
    assert len(lines.figure.data) == 2
    assert list(bars.data.measured_bytes) == [a.meta["peak_measured_bytes"], b.meta["peak_measured_bytes"]]


def _lab(hex_colour: str) -> tuple[float, float, float]:
    """sRGB hex → CIE L*a*b* (D65), from the standard formulas."""
    rgb = [int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
    x = (0.4124 * lin[0] + 0.3576 * lin[1] + 0.1805 * lin[2]) / 0.95047
    y = 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]
    z = (0.0193 * lin[0] + 0.1192 * lin[1] + 0.9505 * lin[2]) / 1.08883
    f = [t ** (1 / 3) if t > (6 / 29) ** 3 else t / (3 * (6 / 29) ** 2) + 4 / 29 for t in (x, y, z)]
    return 116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])


def test_every_memory_category_has_its_own_clearly_different_colour():
    import itertools
    import math

    from core.result import RunResult
    from render.plots.train_memory import timeline_figure

    rows = [
        {
            "t_ms": 0.0,
            "total_bytes": 6,
            "parameters": 1,
            "gradients": 1,
            "optimizer_state": 1,
            "activations": 1,
            "temporaries": 1,
            "other": 1,
        }
    ]
    run = RunResult(
        "train-memory",
        {},
        {"kind": "cpu", "name": "x"},
        {},
        "2026-01-01T00:00:00",
        None,
        "ok",
        rows=rows,
        meta={"bands": [], "peak_t_ms": 0.0, "trace_peak_bytes": 6, "peak_phase": "forward"},
    )
    colours = {t.name: t.line.color for t in timeline_figure(run).data if t.stackgroup == "memory"}
    assert len(colours) == 6
    for (a, ca), (b, cb) in itertools.combinations(colours.items(), 2):
        delta_e = math.dist(_lab(ca), _lab(cb))  # CIE76: ≥ 20 is a difference nobody misses
        assert delta_e >= 20, (a, b, ca, cb, delta_e)


def test_a_run_that_cannot_fit_is_refused_with_a_clear_message(app):
    """Issue 15 finding 1, from the dashboard: the same 2.7B run grew without bound."""
    at = app.run()
    at.sidebar.selectbox[1].set_value("2.7B").run()
    at.switch_page(PAGE).run()
    at.selectbox(key="training_memory.precision").set_value("fp32").run()
    at.number_input(key="training_memory.batch").set_value(64).run()
    at.number_input(key="training_memory.context").set_value(4096).run()
    at.button(key="training_memory.button").click().run()
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and not any("Not run" in e.value for e in at.error):
        time.sleep(0.5)
        at.run()
    assert not at.exception
    message = next(e.value for e in at.error if "Not run" in e.value)
    assert "needs an estimated" in message and "refused before allocating" in message
    assert not any(m.label == "Measured peak" for m in at.metric)

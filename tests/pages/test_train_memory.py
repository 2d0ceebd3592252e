"""AppTest: pick a preset and precision from the dropdowns, plan without running, run tiny on CPU, charts render (the charts
themselves: tests/render/plots/test_train_memory.py)."""

from tests.pages.waiting import metric, until

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
    # the plan is a run like any other, stored once: seeing the same settings again reads it back
    from core.store import RunStore

    (stored,) = RunStore().list(experiment="estimate")
    assert stored.config["model"] == "xl" and stored.config["precision"] == "bf16-autocast"
    assert any(stored.id[:8] in c.value for c in at.caption)
    at.run()
    assert len(RunStore().list(experiment="estimate")) == 1
    # xl on an imagined GPU of the default 16 GiB: the answer in words, and the attention it models named
    at.number_input(key="training_memory.memory").set_value(1.0).run()
    (refusal,) = [e.value for e in at.error]
    assert refusal.replace("\\", "").startswith("Does not fit in 1.0 GiB, not even batch 1: it needs ")
    assert any("Attention modelled: written out" in c.value.replace("\\", "") for c in at.caption)


def test_planner_and_cpu_run_render(cpu_app):
    at = cpu_app.run()
    at.switch_page(PAGE).run()
    assert not at.exception
    at.selectbox(key="training_memory.precision").set_value("fp32").run()
    at.number_input(key="training_memory.context").set_value(32).run()
    at.button(key="training_memory.button").click().run()
    until(at, metric("Measured peak"), 180)
    assert not at.exception
    assert any(m.label == "Measured peak" for m in at.metric), [e.value for e in at.error]
    assert not any(m.delta for m in at.metric)  # the peak's phase is a fact under it, not a change arrow
    assert len(at.get("plotly_chart")) >= 3  # planner + timeline + estimate-vs-measured


def test_a_run_that_cannot_fit_is_refused_with_a_clear_message(app):
    """Issue 15 finding 1, from the dashboard: the same 2.7B run grew without bound."""
    at = app.run()
    at.sidebar.selectbox[1].set_value("2.7B").run()
    at.switch_page(PAGE).run()
    at.selectbox(key="training_memory.precision").set_value("fp32").run()
    at.number_input(key="training_memory.batch").set_value(64).run()
    at.number_input(key="training_memory.context").set_value(4096).run()
    at.button(key="training_memory.button").click().run()
    until(at, lambda at: any("Not run" in e.value for e in at.error), 180)
    assert not at.exception
    message = next(e.value for e in at.error if "Not run" in e.value)
    assert "needs an estimated" in message and "refused before allocating" in message
    assert not any(m.label == "Measured peak" for m in at.metric)

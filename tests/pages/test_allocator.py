"""Allocator page on the CPU (pinned in the sidebar): loads, says what needs a GPU, runs the lifecycle, composes custom steps."""

import pytest

from tests.pages.waiting import until

PAGE = "pages/allocator.py"


def _open(app):
    at = app.run()
    return at.switch_page(PAGE).run()


def _wait_for_result(at, deadline_s=180):
    # the status banner of a finished run
    return until(at, lambda at: any("Run `" in c.value for c in at.caption), deadline_s, what="finished run")


def test_page_loads_on_cpu_and_explains_the_gpu_only_parts(cpu_app):
    at = _open(cpu_app)
    assert not at.exception
    text = " ".join(i.value for i in at.info)
    assert "no caching allocator" in text and "segment map" in text and "backward-peak" in text
    assert at.selectbox(key="allocator.scenario").options == ["lifecycle", "custom"]


def test_page_runs_the_cpu_lifecycle(cpu_app):
    at = _open(cpu_app)
    at.number_input(key="allocator.size").set_value(48).run()
    at.button(key="allocator.button").click().run()
    _wait_for_result(at)
    assert not at.exception and not at.error
    assert at.get("plotly_chart"), "the timeline chart is drawn"
    claims = at.dataframe[0].value
    assert list(claims["step"])[-4] == "7. del d"
    # del d hands 48 MiB straight back: RSS drops by about the tensor size (by hand: 48 MiB)
    assert -52 < float(claims.loc[claims["step"] == "7. del d", "Δ RSS (MiB)"].iloc[0]) < -44
    assert any("Not measured on a CPU" in c.value for c in at.caption)
    # the lab's own words, with a link to the note that says where the expectations come from
    assert "What each step was expected to do" in [s.value for s in at.subheader]
    assert "expected" in claims.columns and not any("seed" in c.lower() for c in claims.columns)
    caption = next(c.value for c in at.caption if "Expected:" in c.value)
    assert "(#where-the-expectations-come-from)" in caption
    notes = " ".join(m.value for m in at.markdown)
    assert "### Where the expectations come from" in notes and "Seed 001" not in notes + caption


@pytest.mark.parametrize("page", ["pages/allocator.py", "pages/step_bench.py", "pages/train_memory.py"])
def test_the_pages_name_the_model_and_the_expectations_in_the_lab_s_own_words(cpu_app, page):
    """No "the course's Transformer" or "seed 001" a reader cannot look up: the lab's words, and the note they
    link to is on the page (its heading is the link's anchor)."""
    at = cpu_app.run()
    at.switch_page(page).run()
    text = " ".join(e.value for e in (*at.markdown, *at.caption, *at.info))
    assert "course's" not in text and "seed 001" not in text.lower() and "the seed" not in text.lower()
    if page != "pages/allocator.py":
        assert "(#the-transformer-these-pages-train)" in text and "### The Transformer these pages train" in text


def test_custom_composer_validates_each_step(cpu_app):
    at = _open(cpu_app)
    at.selectbox(key="allocator.scenario").set_value("custom").run()
    at.selectbox(key="allocator.op").set_value("free").run()
    at.button(key="allocator.add").click().run()
    assert any("no tensor named 'a'" in e.value for e in at.error)
    at.selectbox(key="allocator.op").set_value("alloc").run()
    at.number_input(key="allocator.mib").set_value(8).run()
    at.button(key="allocator.add").click().run()
    assert at.session_state["allocator.custom_steps"] == ["alloc a 8"]
    at.selectbox(key="allocator.op").set_value("free").run()
    at.button(key="allocator.add").click().run()
    assert at.session_state["allocator.custom_steps"] == ["alloc a 8", "free a"]


def test_size_beyond_free_memory_is_refused_with_the_limit(cpu_app):
    at = _open(cpu_app)
    at.number_input(key="allocator.size").set_value(10**6).run()
    at.button(key="allocator.button").click().run()
    assert any("free on this device" in e.value and "limit" in e.value for e in at.error)


# --- on a GPU (the sidebar on cuda:0) ------------------------------------------------------------


@pytest.mark.gpu
def test_page_on_a_gpu_offers_every_scenario_and_measures_the_backward_peak(gpu_app):
    at = _open(gpu_app)
    assert not any("no caching allocator" in i.value for i in at.info)
    assert at.selectbox(key="allocator.scenario").options == ["lifecycle", "backward-peak", "fragmentation", "custom"]
    at.selectbox(key="allocator.scenario").set_value("backward-peak").run()
    at.number_input(key="allocator.size").set_value(64).run()
    at.button(key="allocator.button").click().run()
    _wait_for_result(at)
    assert not at.exception and not at.error, [e.value for e in at.error]
    backward = next(d.value for d in at.dataframe if "measured peak / size(x)" in d.value.columns)
    # y = 5*x keeps x, y, grad of y and x.grad alive (4 sizes); (5*x) keeps 3: the expected arithmetic
    assert list(backward["measured peak / size(x)"].round(1)) == [4.0, 3.0]
    assert not any("Not measured on a CPU" in c.value for c in at.caption)

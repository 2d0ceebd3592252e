"""Allocator page on a CPU: loads, says what needs a GPU, runs the lifecycle, composes custom steps."""
import time

PAGE = "pages/allocator.py"


def _open(app):
    at = app.run()
    return at.switch_page(PAGE).run()


def _wait_for_result(at, deadline_s=180):
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        at.run()
        if any("Run `" in c.value for c in at.caption):  # the status banner of a finished run
            return at
        time.sleep(0.5)
    raise AssertionError("the run did not finish in time")


def test_page_loads_on_cpu_and_explains_the_gpu_only_parts(app):
    at = _open(app)
    assert not at.exception
    text = " ".join(i.value for i in at.info)
    assert "no caching allocator" in text and "segment map" in text and "backward-peak" in text
    assert at.selectbox(key="allocator.scenario").options == ["lifecycle", "custom"]


def test_page_runs_the_cpu_lifecycle(app):
    at = _open(app)
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


def test_custom_composer_validates_each_step(app):
    at = _open(app)
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


def test_size_beyond_free_memory_is_refused_with_the_limit(app):
    at = _open(app)
    at.number_input(key="allocator.size").set_value(10**6).run()
    at.button(key="allocator.button").click().run()
    assert any("free on this device" in e.value and "limit" in e.value for e in at.error)

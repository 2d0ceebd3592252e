"""AppTest of the Number formats page on CPU: loads, the inspector follows the typed value, charts render."""

import pytest

from tests.pages.waiting import until

PAGE = "pages/number_formats.py"


def _inspector(at):
    frames = [d.value for d in at.dataframe]
    return next((f for f in frames if "format" in f.columns and "stored" in f.columns), None)


def _charts(at):
    return at.get("plotly_chart")


def test_page_loads_and_typing_updates_the_table(cpu_app):
    at = cpu_app.run()
    at.switch_page(PAGE).run()
    assert not at.exception
    at = until(at, lambda a: _inspector(a) is not None)
    df = _inspector(at).set_index("format")
    assert df.loc["bf16", "stored"] == "3.140625"  # the default value, π to 9 digits, in bf16 (hand-rounded)
    assert len(_charts(at)) >= 2  # inspector bars and the spacing chart

    at.text_input(key="nf.value").input("65536").run()
    at = until(
        at,
        lambda a: _inspector(a) is not None and _inspector(a).set_index("format").loc["fp32", "stored"] == "65,536",
    )
    df = _inspector(at).set_index("format")
    assert df.loc["fp16", "status"] == "overflow" and df.loc["fp16", "stored"] == "inf"
    assert not df.isna().any().any()  # what a format cannot give reads "—", never None

    at.text_input(key="nf.value").input("not a number").run()
    assert any("not a number" in e.value for e in at.error)


def test_each_experiment_tab_renders_its_charts(cpu_app):
    at = cpu_app.run()
    at.switch_page(PAGE).run()
    at = until(at, lambda a: _inspector(a) is not None)
    base = len(_charts(at))
    at.number_input(key="nf.acc.steps").set_value(200).run()
    at.number_input(key="nf.round.size").set_value(64).run()
    at.number_input(key="nf.q.size").set_value(2000).run()
    expected = base
    for key, count in (("nf.accumulate", 2), ("nf.rounding", 1), ("nf.quantize", 3), ("nf.autocast", 2)):
        at.button(key=f"{key}.button").click().run()
        expected += count
        at = until(at, lambda a, n=expected: len(_charts(a)) >= n)
    assert not at.exception
    titles = " ".join(c.proto.spec for c in _charts(at))
    for text in (
        "s += 0.01 repeated 200 times",
        "error against fp64",
        "Values per integer level",
        "Autocast dtype map: toy",
        "Autocast dtype map: block",
    ):
        assert text in titles
    # CPU: the TF32 row is named unsupported, never a second fp32 number.
    frames = [d.value for d in at.dataframe if "mode" in d.value.columns]
    tf32 = frames[0].set_index("mode").loc["tf32"]
    assert tf32["status"] == "unsupported" and tf32["reason"] == "TF32 applies to CUDA tensor cores only"
    # no literal None in any table: a row without a reason (or a sum that never stalled) reads "—"
    for frame in (d.value for d in at.dataframe):
        assert not frame.isna().any().any(), frame
        assert not (frame.astype(str) == "None").any().any(), frame
    assert (frames[0].set_index("mode").loc["fp32", "reason"]) == "—"


@pytest.mark.gpu
def test_rounding_tab_on_a_gpu_measures_tf32(gpu_app):
    import torch

    at = gpu_app.run()
    at.switch_page(PAGE).run()
    at = until(at, lambda a: _inspector(a) is not None)
    at.number_input(key="nf.round.size").set_value(64).run()
    at.button(key="nf.rounding.button").click().run()
    at = until(at, lambda a: any("mode" in d.value.columns for d in a.dataframe))
    tf32 = next(d.value for d in at.dataframe if "mode" in d.value.columns).set_index("mode").loc["tf32"]
    expected = "ok" if torch.cuda.get_device_capability(0) >= (8, 0) else "unsupported"
    assert tf32["status"] == expected


def test_a_second_visit_reuses_the_stored_run_instead_of_storing_another(cpu_app, app):
    """The inspector computes on load: the first visit stores one run and says so; a new session with the same
    value on the same device shows that run at once (no "Queued", no new run) and says it was reused."""
    from pages.common import lab

    at = cpu_app.run()
    at.switch_page(PAGE).run()
    at = until(at, lambda a: _inspector(a) is not None)
    assert any("Computed for this value on this device and stored" in c.value for c in at.caption)
    store = lab.store()
    (first,) = store.list(experiment="formats")
    fresh = type(app).from_file(app._script_path, default_timeout=120)  # a new visit: a new session
    fresh.session_state[lab.DEVICE_KEY] = "cpu"
    fresh.run()
    fresh.switch_page(PAGE).run()
    assert _inspector(fresh) is not None, [i.value for i in fresh.info]  # drawn on the first pass
    assert not any("Queued" in i.value for i in fresh.info)
    assert any("Stored run reused" in c.value for c in fresh.caption)
    assert [r.id for r in store.list(experiment="formats")] == [first.id]

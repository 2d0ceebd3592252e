"""The home page on a machine without CUDA."""


def test_home_loads_and_says_plainly_there_is_no_gpu(app):
    import torch

    at = app.run()
    assert not at.exception
    text = " ".join(w.value for w in at.warning) + " ".join(m.value for m in at.markdown)
    if not torch.cuda.is_available():
        assert "No CUDA GPU here" in text and "CPU" in text
    assert any("CPU" in s for s in at.sidebar.selectbox[0].options)
    assert "No runs yet" in " ".join(i.value for i in at.info)
    # a device's facts are not changes: no metric carries a delta (an arrow, "↑ 17.0 GiB free")
    assert at.metric and not any(m.delta for m in at.metric), [(m.label, m.delta) for m in at.metric]


def test_latest_runs_are_listed(app, store):
    from core.jobs import JobManager

    m = JobManager(store=store)
    try:
        m.submit("probe", {"steps": 1}, "cpu").wait(120)
    finally:
        m.shutdown()
    at = app.run()
    assert not at.exception
    assert at.dataframe[-1].value["experiment"].tolist() == ["probe"]


def test_sidebar_offers_the_shared_selections(app):
    """Persistence across page switches is checked in a real browser (tests/e2e): AppTest re-runs only
    the page script after the first run, so it cannot see the entrypoint's sidebar again."""
    at = app.run()
    labels = [s.label for s in at.sidebar.selectbox]
    assert labels == ["Device", "Model size", "Dtype"]
    assert at.sidebar.selectbox[1].options[:2] == ["tiny", "mini"] and "2.7B" in at.sidebar.selectbox[1].options
    assert at.sidebar.selectbox[2].value == "fp32"


def test_the_doctor_button_runs_in_the_background_and_shows_its_table(cpu_app, monkeypatch):
    import time

    from core import doctor
    from core.doctor import Check, Report

    asked = []

    def fake_doctor(device, manager, on_progress=None, **kwargs):
        asked.append((device, manager))
        on_progress(1, 2, "worker round trip: ok")
        time.sleep(1.0)
        return Report(
            device=device,
            checks=[
                Check("seed: 65536 stored in fp16", "inf", "inf", "pass"),
                Check("allocator: peak", "not measured", "equal", "unsupported", "the CPU has no caching allocator"),
            ],
            wall_s=1.0,
        )

    monkeypatch.setattr(doctor, "run_doctor", fake_doctor)
    at = cpu_app.run()
    assert any("has not run on this box yet" in i.value for i in at.info)
    at.button(key="home.doctor").click().run()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not any("2 checks" in s.value for s in at.success):
        time.sleep(0.3)
        at.run()
    assert not at.exception
    from pages.common import lab

    assert asked == [("cpu", lab.manager())]  # the pinned device, the server's one job manager
    table = next(d.value for d in at.dataframe if "verdict" in d.value.columns)
    assert list(table["verdict"]) == ["✅ pass", "➖ unsupported"]
    assert list(table["reason"]) == ["", "the CPU has no caching allocator"]
    assert "1 pass, 0 fail, 1 unsupported" in at.success[0].value
    assert any(b.label.startswith("Doctor's bundle") for b in at.get("download_button"))

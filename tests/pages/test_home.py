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

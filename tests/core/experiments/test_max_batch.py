"""The max-batch search, against a known limit (the GPU probes themselves need a GPU)."""
from core.experiments.max_batch import binary_search_max


def test_binary_search_finds_limit_with_few_probes():
    limit = 37
    found, probes = binary_search_max(lambda b: b <= limit, guess=20, max_probes=20)
    assert found == limit and len(probes) <= 8
    assert binary_search_max(lambda b: False, guess=4, max_probes=10)[0] == 0
    assert binary_search_max(lambda b: b <= 3, guess=100, max_probes=20)[0] == 3


def test_chart_shows_each_probe_where_it_belongs():
    from core.result import RunResult
    from pages.plots.max_batch import figures

    gib = 2**30
    rows = [{"batch": 8, "fits": True, "peak_measured_bytes": 10 * gib, "peak_estimated_bytes": 11 * gib, "error": None},
            {"batch": 16, "fits": False, "peak_measured_bytes": None, "peak_estimated_bytes": 21 * gib,
             "error": "CUDA out of memory"},
            {"batch": 12, "fits": True, "peak_measured_bytes": 15 * gib, "peak_estimated_bytes": 16 * gib, "error": None}]
    run = RunResult(experiment="max-batch", config={"model": "small", "context": 256}, device={"kind": "cuda", "name": "G"},
                    versions={}, started_at="2026-01-01T00:00:00", finished_at=None, status="ok", rows=rows,
                    meta={"max_batch_measured": 12, "max_batch_estimated": 8, "memory_bytes": 80 * gib})
    (chart,) = figures(run)
    traces = {t.name: t for t in chart.figure.data}
    assert list(traces["fits (measured)"].x) == [8, 12] and list(traces["fits (measured)"].y) == [10.0, 15.0]
    assert list(traces["does not fit"].x) == [16] and list(traces["does not fit"].y) == [21.0]
    assert list(traces["estimate"].x) == [8, 12, 16]
    assert "Max batch that fits: 12" in chart.figure.layout.title.text
    assert chart.figure.layout.yaxis.title.text == "peak allocated (GiB)"

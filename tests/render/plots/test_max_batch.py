"""The max-batch chart: each probe where it belongs (fits, does not fit, the estimate) in GiB."""

import pytest

pytest.importorskip("plotly")

from render.plots.max_batch import figures
from tests.factories import make_run


def test_chart_shows_each_probe_where_it_belongs():
    gib = 2**30
    rows = [
        {"batch": 8, "fits": True, "peak_measured_bytes": 10 * gib, "peak_estimated_bytes": 11 * gib, "error": None},
        {
            "batch": 16,
            "fits": False,
            "peak_measured_bytes": None,
            "peak_estimated_bytes": 21 * gib,
            "error": "CUDA out of memory",
        },
        {"batch": 12, "fits": True, "peak_measured_bytes": 15 * gib, "peak_estimated_bytes": 16 * gib, "error": None},
    ]
    meta = {"max_batch_measured": 12, "max_batch_estimated": 8, "memory_bytes": 80 * gib}
    run = make_run("max-batch", rows, meta, {"kind": "cuda", "name": "G"}, config={"model": "small", "context": 256})
    (chart,) = figures(run)
    traces = {t.name: t for t in chart.figure.data}
    assert list(traces["fits (measured)"].x) == [8, 12] and list(traces["fits (measured)"].y) == [10.0, 15.0]
    assert list(traces["does not fit"].x) == [16] and list(traces["does not fit"].y) == [21.0]
    assert list(traces["estimate"].x) == [8, 12, 16]
    assert "Max batch that fits: 12" in chart.figure.layout.title.text
    assert chart.figure.layout.yaxis.title.text == "peak allocated (GiB)"

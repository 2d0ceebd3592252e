"""The quantization charts: the tensor's histogram, the values per integer level (levels used of all), and the
round-trip error with and without the outliers."""

import pytest

pytest.importorskip("plotly")

from render.plots.quantize import figures
from tests.factories import make_run


def test_histogram_levels_used_and_error_bars():
    meta = {
        "values_hist": {"edges": [-1.0, 0.0, 1.0, 3.0], "counts": [40, 50, 10]},
        "codes_hist": [
            {"quantization": "int8 per-tensor", "codes": [-1, 0, 1, 2], "values": [-0.5, 0.0, 0.5, 1.0],
             "counts": [40, 0, 50, 10]},
        ],
    }  # fmt: skip
    rows = [{"quantization": "int8 per-tensor", "rmse": 0.02, "rmse_bulk": 0.01}]
    values, levels, error = figures(make_run("quantize", rows, meta, config={"distribution": "outliers"}))
    (hist,) = values.figure.data
    assert list(hist.x) == [-0.5, 0.5, 2.0] and list(hist.width) == [1.0, 1.0, 2.0]  # bin centres and widths
    (used,) = levels.figure.data
    assert used.name == "int8 per-tensor (3/4 levels)" and list(used.x) == [-0.5, 0.5, 1.0]
    assert [list(t.y) for t in error.figure.data] == [[0.02], [0.01]]
    assert "The tensor: outliers" in values.figure.layout.title.text and error.figure.layout.yaxis.title.text == "RMSE"

"""Values derived over a sweep's rows, against hand arithmetic."""

import pytest

from core.hardware import published
from core.measure.derived import add_published, flag_above_peak


def test_above_the_datasheet_peak_is_flagged_as_a_measurement_error():
    row = flag_above_peak({"dtype": "bf16", "m": 8, "n": 8, "k": 8, "tflops": 1200.0, "peak_tflops": 989.4})
    assert row["above_peak"] and "8×8×8" in row["measurement_error"]
    row = flag_above_peak({"dtype": "bf16", "m": 8, "n": 8, "k": 8, "tflops": 700.0, "peak_tflops": 989.4})
    assert row["above_peak"] is False and row["measurement_error"] is None


def test_percentage_of_the_published_figure():
    h100 = published.for_accelerator("NVIDIA H100 SXM")
    bf16 = published.figure(h100, "bf16")
    assert bf16 is not None and bf16.tflops == 794.5  # mamf-finder's published H100 SXM bf16 maximum
    row = add_published({"dtype": "bf16", "tflops": 397.25}, h100)
    assert row["published_tflops"] == 794.5 and row["pct_of_published"] == pytest.approx(50.0)
    row = add_published({"dtype": "int4", "tflops": 1.0}, h100)
    assert row["published_tflops"] is None and row["pct_of_published"] is None

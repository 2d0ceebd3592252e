"""A rounding run's rows (:mod:`core.rows.rounding`): stored rows round-trip with their keys in their order, rows of
an earlier version read with defaults, and the chart reads the fields."""

from __future__ import annotations

import dataclasses
import math

import pytest

from core.rows.rounding import RoundingMode
from tests.factories import make_run

# `python -m core rounding --device cpu --size 16` before the rows had a type: the fp32 and tf32 rows as stored
FP32 = {
    "mode": "fp32",
    "size": 16,
    "input_dtype": "fp32",
    "compute_dtype": "fp32",
    "status": "ok",
    "rel_error": 7.79237422994861e-08,
    "max_rel_error": 1.2013111264123913e-07,
    "rel_error_vs_rounded_inputs": 7.79237422994861e-08,
    "unit_roundoff": 5.960464477539063e-08,
}
TF32 = {
    "mode": "tf32",
    "size": 16,
    "input_dtype": "fp32",
    "compute_dtype": "fp32 (TF32 tensor cores)",
    "status": "unsupported",
    "reason": "TF32 applies to CUDA tensor cores only",
}


def test_stored_rows_round_trip_with_their_keys_in_order():
    for row in (FP32, TF32):
        back = RoundingMode.from_row(row).to_row()
        assert back == row and list(back) == list(row)
    assert not RoundingMode.from_row(TF32).ok and RoundingMode.from_row(FP32).ok


def test_a_row_of_an_earlier_version_reads_with_defaults_and_keeps_what_it_did_not_store():
    earlier = {k: v for k, v in FP32.items() if k not in ("rel_error_vs_rounded_inputs", "unit_roundoff")}
    mode = RoundingMode.from_row(earlier | {"gpu": 1})
    assert mode.rel_error_vs_rounded_inputs is None and mode.unit_roundoff is None and mode.extra == {"gpu": 1}
    assert mode.to_row() == earlier | {"gpu": 1} and list(mode.to_row())[-1] == "gpu"


def test_a_stored_infinity_reads_as_a_float():
    mode = RoundingMode.from_row(FP32 | {"rel_error": "inf", "max_rel_error": "nan"})
    assert mode.rel_error == math.inf and math.isnan(mode.max_rel_error or 0.0)


def test_the_chart_reads_the_fields():
    pytest.importorskip("plotly")
    from render.plots.rounding import figures

    def chart(tf32: RoundingMode, size: int = 16):
        fp32 = dataclasses.replace(RoundingMode.from_row(FP32), size=size)
        return figures(make_run("rounding", [fp32.to_row(), tf32.to_row()]))[0].figure

    said = dataclasses.replace(RoundingMode.from_row(TF32), reason="not here")
    assert [a.text for a in chart(said).layout.annotations] == ["unsupported:<br>not here"]
    assert "Matmul 32×32" in chart(said, size=32).layout.title.text
    measured = dataclasses.replace(said, status="ok", reason=None, rel_error=1e-4, unit_roundoff=2.0**-11)
    fig = chart(measured)
    assert not fig.layout.annotations and list(fig.data[0].x) == ["fp32", "tf32"]
    assert list(fig.data[0].y) == [FP32["rel_error"], 1e-4]
    earlier = [{k: v for k, v in FP32.items() if k != "rel_error_vs_rounded_inputs"}]
    assert len(figures(make_run("rounding", earlier))[0].figure.data) == 1  # no accumulation-only bars to draw


def test_the_engine_stores_the_keys_the_previous_version_stored_in_its_order():
    from core.experiment import Context, drive
    from core.experiments.rounding import RoundingConfig, run

    out, progress = drive(run(RoundingConfig(size=16), Context("cpu", "CPU")))
    fp32, tf32 = out.rows[:2]
    assert list(fp32) == list(FP32) and tf32 == TF32
    assert {k: fp32[k] for k in ("mode", "size", "compute_dtype", "status", "unit_roundoff")} == {
        k: FP32[k] for k in ("mode", "size", "compute_dtype", "status", "unit_roundoff")
    }
    assert [r["mode"] for r in out.rows] == ["fp32", "tf32", "bf16", "fp16"]
    assert [row for p in progress for row in p.rows] == out.rows  # one row a mode, as it is measured

"""A formats run's rows and meta (:mod:`core.rows.formats`): stored rows round-trip with their keys in their order,
records the engine builds take the stored layout, runs of an earlier version read with defaults, and the charts
read the fields."""

from __future__ import annotations

import dataclasses
import math

import pytest

from core.jsonable import json_ready
from core.rows.formats import FormatInfo, FormatsSummary, FormatValue, SpacingPoint
from tests.factories import make_run

# `python -m core formats --device cpu --value 65536 --spacing-points 12` before the rows had a type, as stored
FP64 = {
    "format": "fp64",
    "value": 65536.0,
    "stored": 65536.0,
    "abs_error": 0.0,
    "rel_error": 0.0,
    "sign": "0",
    "exponent": "10000001111",
    "mantissa": "0000000000000000000000000000000000000000000000000000",
    "bits": "0|10000001111|0000000000000000000000000000000000000000000000000000",
    "hex": "0x40f0000000000000",
    "status": "exact",
    "overflow": False,
    "underflow": False,
    "is_nan": False,
    "subnormal": False,
    "method": "torch.tensor(x, dtype=float64).to(torch.float64)",
}
FP16 = {
    "format": "fp16",
    "value": 65536.0,
    "stored": "inf",
    "abs_error": "inf",
    "rel_error": "inf",
    "sign": "0",
    "exponent": "11111",
    "mantissa": "0000000000",
    "bits": "0|11111|0000000000",
    "hex": "0x7c00",
    "status": "overflow",
    "overflow": True,
    "underflow": False,
    "is_nan": False,
    "subnormal": False,
    "method": "torch.tensor(x, dtype=float64).to(torch.float16)",
}
FP4 = {
    "format": "fp4_e2m1fn_x2",
    "value": 65536.0,
    "stored": None,
    "abs_error": None,
    "rel_error": None,
    "bits": None,
    "status": "unsupported",
    "reason": "cannot store 65536.0 as fp4_e2m1fn_x2: \"copy_\" not implemented for 'Float4_e2m1fn_x2'",
}
# the format table of the same run: a row from torch.finfo, one from a definition (min after eps), an integer
TABLE_FP16 = {
    "format": "fp16",
    "kind": "float",
    "torch_dtype": "torch.float16",
    "note": "",
    "bits": 16,
    "sign_bits": 1,
    "exponent_bits": 5,
    "mantissa_bits": 10,
    "bytes": 2,
    "max": 65504.0,
    "min": -65504.0,
    "smallest_normal": 6.103515625e-05,
    "smallest_subnormal": 5.960464477539063e-08,
    "eps": 0.0009765625,
    "source": "torch.finfo(torch.float16); eps and bit fields measured from bit patterns",
    "decimal_digits": 3.3113299523037933,
}
TABLE_TF32 = {
    "format": "tf32",
    "kind": "float",
    "torch_dtype": None,
    "note": "",
    "bits": 19,
    "sign_bits": 1,
    "exponent_bits": 8,
    "mantissa_bits": 10,
    "bytes": 4,
    "max": 3.4011621342146535e38,
    "smallest_normal": 1.1754943508222875e-38,
    "smallest_subnormal": 1.1479437019748901e-41,
    "eps": 0.0009765625,
    "min": -3.4011621342146535e38,
    "source": "definition: fp32's sign and 8-bit exponent, 10-bit mantissa (no torch dtype; stored in memory as "
    "fp32, 4 bytes)",
    "decimal_digits": 3.3113299523037933,
}
TABLE_INT4 = {
    "format": "int4",
    "kind": "int",
    "torch_dtype": None,
    "note": "",
    "bits": 4,
    "sign_bits": 1,
    "exponent_bits": 0,
    "mantissa_bits": 3,
    "bytes": 0.5,
    "max": 7.0,
    "min": -8.0,
    "smallest_normal": None,
    "smallest_subnormal": None,
    "eps": 1.0,
    "source": "definition: 4-bit two's complement (torch.iinfo refuses torch.int4; no cast kernel)",
    "decimal_digits": 0.8450980400142568,
}
POINTS = [{"format": "fp16", "magnitude": 5.960464477539063e-08, "ulp": 5.960464477539063e-08}]
POINTS += [{"format": "fp16", "magnitude": 0.0001220703125, "ulp": 1.1920928955078125e-07}]
META = {"table": [TABLE_FP16, TABLE_TF32, TABLE_INT4], "spacing": POINTS, "exact_value": "65536.0"}
META |= {"cast_device": "cpu"}


def _same(back: dict, row: dict) -> None:
    assert json_ready(back) == row and list(back) == list(row)


def test_stored_rows_and_meta_round_trip_with_their_keys_in_order():
    for row in (FP64, FP16, FP4):
        _same(FormatValue.from_row(row).to_row(), row)
    for row in (TABLE_FP16, TABLE_TF32, TABLE_INT4):
        _same(FormatInfo.from_row(row).to_row(), row)
    _same(SpacingPoint.from_row(POINTS[0]).to_row(), POINTS[0])
    _same(FormatsSummary.from_meta(META).to_meta(), META)
    assert FormatValue.from_row(FP16).stored == math.inf and FormatValue.from_row(FP4).unsupported


def test_what_the_engine_builds_takes_the_stored_layout():
    """A record built field by field (no stored order to keep) gives the keys in the order runs store them."""
    for row in (FP64, FP4):
        built = FormatValue(**FormatValue.from_row(row).__dict__ | {"stored_keys": ()})
        _same(built.to_row(), row)
    built = FormatInfo(**FormatInfo.from_row(TABLE_FP16).__dict__ | {"stored_keys": ()})
    _same(built.to_row(), TABLE_FP16)


def test_an_earlier_run_reads_with_defaults_and_keeps_what_it_did_not_store():
    summary = FormatsSummary.from_meta({"table": [TABLE_FP16]})
    assert summary.spacing == () and summary.exact_value is None and summary.info("fp16") is not None
    assert summary.info("fp32") is None
    earlier = {k: v for k, v in FP64.items() if k not in ("hex", "method")} | {"gpu": 1}
    value = FormatValue.from_row(earlier)
    assert value.hex is None and value.method is None and value.extra == {"gpu": 1}
    _same(value.to_row(), earlier)


def _run(values: list[FormatValue], table: list[FormatInfo] | None = None):
    meta = FormatsSummary(tuple(table or ()), tuple(map(SpacingPoint.from_row, POINTS))).to_meta()
    return make_run("formats", [json_ready(v.to_row()) for v in values], meta, config={"value": 65536.0})


def test_the_charts_read_the_fields():
    pytest.importorskip("plotly")
    from render.plots.formats import figures, inspector_chart, spacing_chart

    fp64, fp16, fp4 = (FormatValue.from_row(r) for r in (FP64, FP16, FP4))
    bars = inspector_chart(_run([fp64, fp16, fp4])).figure.data[0]
    assert list(bars.x) == ["fp64", "fp16"] and list(bars.text) == ["exact", "overflow"]
    assert list(bars.y) == [1e-18, 10.0]  # exact at the axis floor, the overflow above the top of 1
    rounded = dataclasses.replace(fp64, status="rounded", rel_error=1e-9)
    bars = inspector_chart(_run([rounded, fp16])).figure.data[0]
    assert list(bars.text) == ["rounded", "overflow"] and list(bars.y) == [1e-9, 10.0]

    info = FormatInfo.from_row(TABLE_FP16)
    marks = [t.x[0] for t in spacing_chart(_run([fp64], [info])).figure.data if t.mode == "markers"]
    assert marks == [info.smallest_normal, info.max]
    moved = dataclasses.replace(info, smallest_normal=1e-4)
    assert [t.x[0] for t in spacing_chart(_run([fp64], [moved])).figure.data if t.mode == "markers"][0] == 1e-4
    no_spacing = make_run("formats", [FP64], {"table": [TABLE_FP16], "spacing": []})
    assert [c.name for c in figures(no_spacing)] == ["formats-inspector"]


def test_the_engine_stores_what_the_previous_version_stored():
    from core.experiment import Context, drive
    from core.experiments.formats import FormatsConfig, run

    out, progress = drive(run(FormatsConfig(value=65536.0, spacing_points=12), Context("cpu", "CPU")))
    rows = {r["format"]: r for r in out.rows}
    _same(rows["fp64"], FP64)
    _same(rows["fp16"], FP16)
    assert list(rows["fp4_e2m1fn_x2"]) == list(FP4) and rows["fp4_e2m1fn_x2"]["status"] == "unsupported"
    assert list(out.meta) == list(META) and out.meta["exact_value"] == "65536.0"
    table = {r["format"]: r for r in out.meta["table"]}
    for row in (TABLE_FP16, TABLE_TF32, TABLE_INT4):
        _same(table[row["format"]], row)
    assert next(p for p in out.meta["spacing"] if p["format"] == "fp16") == POINTS[0]  # fp16's smallest subnormal
    assert [list(p.rows) for p in progress if p.rows] == [out.rows]

"""A ``quantize`` run's rows and meta (:mod:`core.rows.quantize`): the engine's stored forms round-trip with their
keys in order, and a small tensor's codes read back as fields are the ones worked out by hand."""

from __future__ import annotations

import pytest

from core.rows.quantize import QuantizeRow, QuantizeSummary

# int8 symmetric of the course note's 0.1, 0.5, 0.9, 1.2 as the engine stored it before the row had a type
STORED = {"quantization": "int8 symmetric", "bits": 8, "scheme": "symmetric", "distribution": "custom",
          "elements": 16, "outliers": 0, "scale": 0.009448818897637795, "zero_point": 0, "qmin": -127, "qmax": 127,
          "rmse": 0.0026, "max_abs_error": 0.0047, "rel_rmse": 0.004, "sqnr_db": 47.8, "rmse_bulk": 0.0026,
          "levels_used": 4, "levels_total": 255, "at_limits": 4}  # fmt: skip


def test_a_stored_row_and_meta_round_trip_with_their_keys_in_order():
    back = QuantizeRow.from_row(STORED | {"gpu": 1}).to_row()
    assert back == STORED | {"gpu": 1} and list(back) == [*STORED, "gpu"]
    meta = {"values_hist": {"edges": [0.0, 0.5, 1.0], "counts": [3, 1]},
            "codes_hist": [{"quantization": "int4 symmetric", "codes": [-7, 0, 7], "counts": [0, 1, 3],
                            "values": [-1.2, 0.0, 1.2]}],
            "round_trip": [{"quantization": "int4 symmetric", "x": 0.1, "code": 1, "dequantized": 0.17}]}  # fmt: skip
    again = QuantizeSummary.from_meta(meta).to_meta()
    assert again == meta and list(again["codes_hist"][0]) == ["quantization", "codes", "counts", "values"]
    assert "round_trip" not in QuantizeSummary.from_meta({k: v for k, v in meta.items() if k != "round_trip"}).to_meta()


def test_the_course_note_s_values_land_on_the_codes_worked_out_by_hand():
    pytest.importorskip("torch")
    from core.experiment import Context
    from core.experiments.quantize import QuantizeConfig, run

    steps = run(QuantizeConfig(distribution="custom", values=(0.1, 0.5, 0.9, 1.2), size=16), Context("cpu", "cpu"))
    while True:
        try:
            next(steps)
        except StopIteration as done:
            out = done.value
            break
    trip = [v for v in QuantizeSummary.from_meta(out.meta).round_trip if v.quantization == "int8 symmetric"]
    # one scale for the tensor: 1.2 / 127; 0.1 × 127 / 1.2 = 10.58 → 11, 0.5 → 52.9 → 53, 0.9 → 95.25 → 95, 1.2 → 127
    assert [v.code for v in trip[:4]] == [11, 53, 95, 127]
    assert trip[0].dequantized == pytest.approx(11 * 1.2 / 127)


def test_a_row_missing_newer_keys_reads_with_defaults():
    older = {k: v for k, v in STORED.items() if k not in ("rmse_bulk", "levels_used", "levels_total", "at_limits")}
    row = QuantizeRow.from_row(older)
    assert (row.rmse_bulk, row.levels_used, row.levels_total, row.at_limits) == (None, 0, 0, 0)
    assert (row.quantization, row.scale, row.rmse) == ("int8 symmetric", 0.009448818897637795, 0.0026)


def test_the_levels_chart_reads_the_summary_s_fields():
    from core.result import RunResult
    from render.plots.quantize import codes_histogram

    def drawn(counts: list[int]) -> tuple:
        meta = {"values_hist": {"edges": [0.0, 1.0], "counts": [4]},
                "codes_hist": [{"quantization": "int4 symmetric", "codes": [-7, 0, 7], "counts": counts,
                                "values": [-1.2, 0.0, 1.2]}]}  # fmt: skip
        run = RunResult("quantize", {}, {"kind": "cpu", "name": "cpu"}, {}, "t", None, "ok", rows=[STORED], meta=meta)
        trace = codes_histogram(run).figure.data[0]
        return trace.name, list(trace.x), list(trace.y)

    # an empty level is not drawn, and the legend counts the levels used of those stored
    assert drawn([0, 1, 3]) == ("int4 symmetric (2/3 levels)", [0.0, 1.2], [1, 3])
    assert drawn([2, 1, 3]) == ("int4 symmetric (3/3 levels)", [-1.2, 0.0, 1.2], [2, 1, 3])

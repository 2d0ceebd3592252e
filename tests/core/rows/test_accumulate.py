"""An accumulate run's rows and meta (:mod:`core.rows.accumulate`): rows stored before they had a type round-trip
with their keys in their order, older rows read with defaults, and the engine stores the typed rows."""

from __future__ import annotations

import math

from core.rows.accumulate import AccumulateSummary, CurveSeries, SumRow

# two rows of a CPU run (`accumulate --device cpu --steps 1000 --curve-points 50`), as stored before the rows had a
# type. bf16 stalls at 4.0: its spacing there is 2**-5, and 0.01 is below half of it; 4 - 1000 * 0.01000213623046875
# (fp16's 0.01) = -6.00213623046875.
STALLED = {
    "method": "loop",
    "accumulator": "bf16",
    "addend": "fp16",
    "pair": "bf16 += fp16",
    "steps": 1000,
    "result": 4.0,
    "exact": 10.0,
    "addend_stored": 0.01000213623046875,
    "error": -6.0,
    "abs_error": 6.0,
    "rel_error": 0.6,
    "error_vs_stored_addend": -6.00213623046875,
    "stalled_at_step": 351,
    "result_dtype": "bf16",
}
REDUCED = {
    "method": "torch.sum",
    "accumulator": "torch.sum",
    "addend": "bf16",
    "pair": "torch.sum(bf16)",
    "steps": 1000,
    "result": 10.0,
    "exact": 10.0,
    "addend_stored": 0.010009765625,
    "error": 0.0,
    "abs_error": 0.0,
    "rel_error": 0.0,
    "error_vs_stored_addend": -0.009765625,
    "stalled_at_step": None,
    "result_dtype": "bf16",
}
META = {
    "curve": {"steps": [1, 500, 1000], "series": [{"accumulator": "bf16", "addend": "fp16", "sum": [0.01, 4.0, 4.0]}]},
    "exact": "10.00",
    "curve_note": "running sum of each loop pair at meta.curve.steps",
    "requested_device": "cpu",
}


def test_stored_rows_round_trip_with_their_keys_in_order():
    for row in (STALLED, REDUCED, STALLED | {"gpu": 1}):
        back = SumRow.from_row(row).to_row()
        assert back == row and list(back) == list(row)
    assert SumRow.from_row(STALLED | {"gpu": 1}).extra == {"gpu": 1}


def test_fields_read_the_stored_values():
    row = SumRow.from_row(STALLED)
    assert (row.accumulator, row.addend, row.stalled_at_step, row.error) == ("bf16", "fp16", 351, -6.0)


def test_a_row_missing_keys_reads_with_defaults():
    older = {k: v for k, v in STALLED.items() if k not in ("error_vs_stored_addend", "stalled_at_step")}
    row = SumRow.from_row(older)
    assert row.stalled_at_step is None and math.isnan(row.error_vs_stored_addend) and row.result == 4.0


def test_the_meta_round_trips_with_its_keys_in_order():
    summary = AccumulateSummary.from_meta(META)
    assert summary.steps == (1, 500, 1000) and summary.series == (CurveSeries("bf16", "fp16", (0.01, 4.0, 4.0)),)
    back = summary.to_meta()
    assert back == META and list(back) == list(META)
    assert AccumulateSummary.from_meta({}).to_meta()["curve"] == {"steps": [], "series": []}


def test_the_engine_stores_the_rows_keys_in_their_order():
    from core.experiment import Context
    from core.experiments.accumulate import AccumulateConfig, run

    gen = run(AccumulateConfig(value=0.01, steps=1000, dtypes=("fp16", "bf16"), curve_points=3), Context("cpu", "CPU"))
    try:
        while True:
            next(gen)
    except StopIteration as stop:
        out = stop.value
    stalled = next(r for r in out.rows if r["pair"] == "bf16 += fp16")
    assert list(stalled) == list(STALLED) and stalled == STALLED  # the same additions as the stored run
    assert list(out.rows[-1]) == list(REDUCED) and out.rows[-1] == REDUCED
    assert list(out.meta) == ["curve", "exact", "curve_note"] and out.meta["curve"]["steps"] == [1, 500, 1000]


def test_the_error_curve_reads_the_summary_s_running_sums():
    from core.result import RunResult
    from render.plots.accumulate import error_curve

    def errors(meta: dict) -> list[float]:
        run = RunResult("accumulate", {"value": 0.01}, {"kind": "cpu", "name": "cpu"}, {}, "t", None, "ok",
                        rows=[STALLED], meta=meta)  # fmt: skip
        return [round(e, 12) for e in error_curve(run).figure.data[0].y]

    # running sum − step × 0.01: 0.01 − 0.01, 4.0 − 5.0, 4.0 − 10.0
    assert errors(META) == [0.0, -1.0, -6.0]
    later = {
        "curve": {
            "steps": [1, 500, 1000],
            "series": [{"accumulator": "bf16", "addend": "fp16", "sum": [0.01, 4.0, 8.0]}],
        }
    }
    assert errors(later) == [0.0, -1.0, -2.0]

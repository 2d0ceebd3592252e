"""The probe's and the reference's rows (:mod:`core.rows.probe`, :mod:`core.rows.reference`): stored rows round-trip
with their keys in their order, and the probe's chart reads the fields."""

from __future__ import annotations

import pytest

from core.rows.probe import ProbeStep
from core.rows.reference import ReferenceRound
from tests.factories import make_run

# round 1 of a CPU reference run (`reference --device cpu --size 64 --rounds 2`), as stored before the rows had a type
ROUND = {
    "round": 1,
    "dtype": "fp32",
    "m": 64,
    "n": 64,
    "k": 64,
    "tool": "torch.utils.benchmark",
    "lab_median_ms": 0.0123,
    "lab_reps": 812,
    "reference_median_ms": 0.0119,
}


def test_stored_rows_round_trip_with_their_keys_in_order():
    back = ReferenceRound.from_row(ROUND).to_row()
    assert back == ROUND and list(back) == list(ROUND)
    for row in ({"step": 1, "t": 1767000000.5}, {"step": 3}):
        assert ProbeStep.from_row(row).to_row() == row and list(ProbeStep.from_row(row).to_row()) == list(row)


def test_the_probe_chart_reads_whether_steps_carry_a_time():
    pytest.importorskip("plotly")
    from render.plots.probe import figures

    timed = figures(make_run("probe", [ProbeStep(1, 10.0).to_row(), ProbeStep(2, 12.5).to_row()]))[0].figure
    assert list(timed.data[0].y) == [0.0, 2.5] and timed.layout.yaxis.title.text.startswith("time since")
    (finished,) = figures(make_run("probe", [ProbeStep(1).to_row(), ProbeStep(2).to_row()]))
    assert finished.figure.data[0].type == "bar"
    assert figures(make_run("probe", [])) == []

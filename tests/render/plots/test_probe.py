"""The probe's chart: the time since the first step from progress rows, or the steps that finished."""

import pytest

pytest.importorskip("plotly")

from render.plots.probe import figures
from tests.factories import make_run


def test_elapsed_time_is_counted_from_the_first_step():
    rows = [{"step": 1, "t": 100.0}, {"step": 2, "t": 100.25}, {"step": 3, "t": 101.0}]
    (chart,) = figures(make_run("probe", rows, status="cancelled", config={"mode": "ok"}))
    assert list(chart.figure.data[0].y) == [0.0, 0.25, 1.0]
    assert chart.figure.layout.yaxis.title.text == "time since the first step (s)"
    assert "3 steps, status cancelled" in chart.figure.layout.title.text


def test_steps_without_a_time_are_drawn_as_finished_and_rows_without_steps_draw_nothing():
    (chart,) = figures(make_run("probe", [{"step": 1}, {"step": 2}]))
    assert list(chart.figure.data[0].y) == [1, 1] and chart.figure.layout.yaxis.title.text == "finished (1 = yes)"
    assert figures(make_run("probe", [{"x": 1}])) == []

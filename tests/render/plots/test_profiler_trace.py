"""The profiler-trace charts: the waterfall from one trace to another climbs by each group's change."""

import pytest

pytest.importorskip("plotly")

from core.rows.trace import TraceTables
from core.workload.trace.diff import diff, totals
from render.plots.profiler_trace import diff_chart
from tests.factories import make_run


def test_the_waterfall_climbs_from_one_side_to_the_other():
    base = make_run("profiler-trace", [{"kind": "group", "group": "matmul", "count": 2, "total_us": 2000.0}],
                    device={}, name="before")  # fmt: skip
    new = make_run("profiler-trace", [{"kind": "group", "group": "matmul", "count": 2, "total_us": 3000.0},
                                      {"kind": "group", "group": "memory", "count": 1, "total_us": 500.0}],
                   device={}, name="after")  # fmt: skip
    chart = diff_chart(base, new)
    bars = chart.figure.data[0]
    assert list(bars.x) == ["before", "matmul", "memory", "after"] and list(bars.y) == [2.0, 1.0, 0.5, 3.5]
    assert totals(diff(TraceTables.from_run(base), TraceTables.from_run(new))[0]).delta_us == 1500


def test_the_waterfall_says_when_the_two_traces_are_not_alike():
    rows = [{"kind": "group", "group": "matmul", "count": 1, "total_us": 1000.0}]
    h100 = make_run(
        "profiler-trace", rows, device={}, name="h100", meta={"device_name": "NVIDIA H100", "world_size": 8}
    )
    mi300 = make_run(
        "profiler-trace", rows, device={}, name="mi300", meta={"device_name": "AMD MI300X", "world_size": 8}
    )
    sub = diff_chart(h100, mi300).figure.layout.title.text.split("<sup>")[1]
    assert sub == "h100 → mi300 · not alike: different GPUs (NVIDIA H100 → AMD MI300X)</sup>"
    assert "not alike" not in diff_chart(h100, h100).figure.layout.title.text


def test_the_idle_chart_names_streams_as_numbers_not_floats():
    """Rows of several kinds make the stream column a float: the idle chart still says stream 7, not 7.0."""
    from render.plots.profiler_trace import idle_causes_chart, stream_text

    causes = {"host_wait_us": 1000.0, "kernel_wait_us": 500.0, "other_wait_us": 0.0}
    rows = [{"kind": "idle", "stream": 7, **causes}, {"kind": "idle", "stream": 20, **causes}, {"kind": "group"}]
    chart = idle_causes_chart(make_run("profiler-trace", rows, {"device": 0}))
    assert chart is not None
    assert [list(bar.x) for bar in chart.figure.data][0] == ["7", "20"]
    assert stream_text(7.0) == "7" and stream_text(float("nan")) == "—" and stream_text(3) == "3"


def test_the_operator_chart_shows_the_largest_changes_either_way():
    """Bars of new − base per operator, by hand: the slow-down red, the speed-up green, an operator one side
    lacks counted from zero; no chart when a side has no operator figures."""
    from render.plots.profiler_trace import op_diff_chart

    def side(name: str, **us: float):
        totals = [{"op": f"aten::{op}", "gpu_time_us": t, "calls": 1} for op, t in us.items()]
        return make_run("profiler-trace", [], device={}, name=name, meta={"op_totals": totals})

    chart = op_diff_chart(side("h100", mm=2000.0, mul=1500.0), side("mi300", mm=3000.0, mul=500.0, fill_=250.0))
    assert chart is not None
    (bars,) = chart.figure.data
    assert list(bars.y) == ["aten::mul", "aten::fill_", "aten::mm"] and list(bars.x) == [-1.0, 0.25, 1.0]
    assert list(bars.marker.color) == ["#2ca02c", "#d62728", "#d62728"]
    assert op_diff_chart(side("a", mm=1.0), make_run("profiler-trace", [], device={}, name="old")) is None

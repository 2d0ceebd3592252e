"""The snapshot view's numbers on the hand snapshot (tests/core/workload/snapshots.py), every figure worked out
from its docstring: point 0 is before the first event, point k after event k-1, events 10 µs apart.

    point        0     1     2     3     4     5     6     7     8     9
    t (ms)       0     0     0.01  0.02  0.03  0.04  0.05  0.06  0.07  0.08
    allocated    1256  1768  1512  2536  2536  6632  6632  6120  6632  6120
    reserved     8192  8192  8192  8192  12288 12288 12288 12288 12288 12288
"""

import pickle

import numpy as np
import pandas as pd
import pytest

from core.rows.snapshot import SnapshotSummary
from core.units import GIB
from core.workload.snapshot import detail
from core.workload.snapshot.analysis import analyse
from core.workload.snapshot.reader import read_snapshot
from render import snapshot_view as view
from tests.core.workload import snapshots

ALLOCATED = [1256, 1768, 1512, 2536, 2536, 6632, 6632, 6120, 6632, 6120]
RESERVED = [8192] * 4 + [12288] * 6


@pytest.fixture
def hand(tmp_path):
    path = tmp_path / "hand.pickle"
    path.write_bytes(pickle.dumps(snapshots.hand_snapshot()))
    return read_snapshot(path)


def test_the_whole_trace_is_replayed_from_its_folder_beside_the_store(hand, data_dir):
    a = view.load(detail.save(hand, 0))
    assert a.allocated.tolist() == ALLOCATED and a.reserved.tolist() == RESERVED
    assert view.duration_ms(a) == pytest.approx(0.08)  # the last event, 80 µs after the first


def test_a_trace_of_one_instant_still_has_a_range(tmp_path):
    path = tmp_path / "one.pickle"
    path.write_bytes(pickle.dumps({"segments": [], "device_traces": [[snapshots.event("alloc", 0x1000, 512, 0)]]}))
    one = analyse(read_snapshot(path))
    assert view.duration_ms(one) == 1e-3  # both points at 0 ms: a slider needs an end past its start


def test_a_window_draws_its_points_and_says_how_many(hand):
    line = view.timeline(analyse(hand), (0.02, 0.05), budget=1000)
    assert line.t_ms.tolist() == pytest.approx([0.02, 0.03, 0.04, 0.05])
    assert line.allocated.tolist() == ALLOCATED[3:7] and line.reserved.tolist() == RESERVED[3:7]
    assert line.drawn == "4 of 10 points drawn"
    assert line.frame().columns.tolist() == ["t_ms", "allocated_bytes", "reserved_bytes"]
    assert line.fragmentation_frame()["fragmentation_bytes"].tolist() == [
        8192 - 2536,
        12288 - 2536,
        12288 - 6632,
        12288 - 6632,
    ]


def test_allocated_and_reserved_share_the_chart_s_budget(hand):
    a = analyse(hand)
    assert len(view.timeline(a, (0.0, 0.08), budget=20).t_ms) == 10  # two series of 10 points: all drawn
    assert len(view.timeline(a, (0.0, 0.08), budget=18).t_ms) <= 9  # 9 per series: the window is thinned


def test_who_holds_memory_at_the_peak(hand):
    at = view.moment(analyse(hand), 0.04, budget=1000)
    assert at.when == "at 40.00 µs (6.5 KiB allocated)"  # 6632 B / 1024 = 6.48 KiB; a time has its unit
    # C (optimizer _init_group), B (backward), the block from before recording (.to), A (forward)
    assert [(s.bytes, s.category) for s in at.sites] == [
        (4096, "optimizer_state"),
        (1024, "gradients"),
        (1000, "parameters"),
        (512, "activations"),
    ]
    assert at.categories == {
        "parameters": 1000,
        "gradients": 1024,
        "optimizer_state": 4096,
        "activations": 512,
        "temporaries": 0,
        "workspace": 0,
        "unknown": 0,
    }
    assert at.held == "parameters 1,000 B, gradients 1.0 KiB, optimizer state 4.0 KiB, activations 512 B"
    # the segment map of both segments, largest first; free in them: 12288 reserved − the live blocks' 1024 (the
    # baseline block), 512 (A), 1024 (B) and 4096 (C) = 5632 B, none of it in S2, which C fills
    assert [s.total_size for s in at.segments] == [8192, 4096]
    assert at.numbers.free_in_reserved_bytes == 5632
    assert [b.state for b in at.segments[1].blocks] == ["active_allocated"]


def test_a_moment_between_events_is_the_last_point_before_it(hand):
    a = analyse(hand)
    assert view.moment(a, 0.045, budget=1000).when == "at 40.00 µs (6.5 KiB allocated)"
    # at 0 ms: after the first event (A allocated, the orphan 256 B block not yet freed): 1768 B
    first = view.moment(a, 0.0, budget=1000)
    assert first.when == "at 0 s (1.7 KiB allocated)"  # nothing: not "0.00 s" beside µs
    assert sum(s.bytes for s in first.sites) == 1768


def test_categories_over_time_add_up_to_allocated_and_share_the_budget(hand):
    a = analyse(hand)
    cats = view.categories(a, (0.0, 0.08), budget=600)
    total = np.sum([cats.series[c] for c in cats.series], axis=0)
    assert total.tolist() == ALLOCATED  # every byte in exactly one category, at every point
    assert cats.series["optimizer_state"].tolist() == [0] * 5 + [4096] * 5  # C from event 4 on
    assert cats.frame().columns.tolist() == ["t_ms"] + [f"{c}_bytes" for c in cats.series]
    assert len(view.categories(a, (0.0, 0.08), budget=70).t_ms) == 10  # seven series of 10 points: all drawn
    assert len(view.categories(a, (0.0, 0.08), budget=63).t_ms) <= 9  # 9 per series: thinned


def test_site_differences_are_listed_in_gib_without_stacks():
    diff = pd.DataFrame(
        {"site": ["a", "b"], "delta_bytes": [GIB, -3 * GIB // 8], "stack": [["f:1 g"], []]},
    )
    table = view.differences_table(diff)
    assert table.columns.tolist() == ["site", "delta_bytes", "Δ GiB"]
    assert table["Δ GiB"].tolist() == [1.0, -0.375]


def test_times_and_devices_are_written_in_words_with_units():
    """A moment has its unit ("25.38 ms", or an event number where the file has no times), and the device is
    named, not a Python list ("device 0 of [0]")."""
    assert view.time_text(25.38) == "25.38 ms" and view.time_text(1204.0, has_times=False) == "event 1,204"
    assert view.devices_text(0, [0]) == "device 0" and view.devices_text(1, [0, 1]) == "device 1 of 2 (0, 1)"
    assert "[" not in view.devices_text(0, [0]) + view.devices_text(1, [0, 1])


def test_every_chart_over_time_drops_where_memory_drops_on_a_real_snapshot():
    """The train-step example (examples/README.md) allocates its last blocks by 37.70 ms and frees nothing more until
    its last events at 50.6 ms: in between, 13 ms without an event, allocated is what the events before left. The
    categories chart drew a 0.7 GiB slope across that stretch (its thinning kept 37.68 ms at 3.6 GiB and then only
    50.6 ms), where Memory over time dropped at once; now both are steps through the same kind of points."""
    from core.workload import examples
    from render.plots import memory_snapshot as plots

    path = examples.import_path(examples.find("train-step-snapshot"))
    raw = snapshots.load_any(str(path))["device_traces"][0]
    times = np.array([e["time_us"] for e in raw], dtype=np.int64)
    quiet = int(np.argmax(np.diff(times)))  # the longest stretch without an event
    assert (times[quiet + 1] - times[quiet]) / 1000 > 12  # 37.70 → 50.6 ms
    # the change each event made, by hand: +size at an alloc, −size when its free completes
    change = [
        e["size"] if e["action"] == "alloc" else -e["size"] if e["action"] == "free_completed" else 0 for e in raw
    ]
    a = analyse(read_snapshot(path))
    end = int(a.allocated[-1])
    during = end - sum(change[quiet + 1 :])  # allocated between the two events, counted back from the end
    middle = (times[quiet] + times[quiet + 1]) / 2 / 1000 - times[0] / 1000
    line = view.timeline(a, (None, None), view.DEFAULT_CHART_POINTS)
    cats = view.categories(a, (None, None), view.DEFAULT_CHART_POINTS)
    for t_ms, total in ((line.t_ms, line.allocated), (cats.t_ms, np.sum(list(cats.series.values()), axis=0))):
        held = total[np.searchsorted(t_ms, middle, side="right") - 1]  # a step's value: the last point before
        assert held == during, (held / GIB, during / GIB)
    fig = plots.categories_figure(cats.t_ms, cats.series, SnapshotSummary())
    assert {trace.line.shape for trace in fig.data} == {"hv"}  # drawn as steps, never a line between points

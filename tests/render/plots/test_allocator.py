"""The allocator's charts on hand-made GPU-shaped rows: each block at its offset, the allocator's history
accumulated by hand, the settings overlaid, a colour for every block state."""

import pytest

pytest.importorskip("plotly")

from render.plots import allocator as plots
from tests.factories import make_run


def _gpu_run(setting="default", with_trace=False):
    mib = 2**20
    seg = [
        {
            "total_size": 64 * mib,
            "segment_type": "large",
            "expandable": False,
            "blocks_dropped": 0,
            "blocks": [
                {"offset": 0, "size": 16 * mib, "state": "active_allocated"},
                {"offset": 16 * mib, "size": 48 * mib, "state": "inactive"},
            ],
        }
    ]
    rows = []
    for i, (alloc, reserved) in enumerate([(0, 0), (16, 64), (0, 64)]):
        rows.append(
            {
                "index": i,
                "step": f"{i}. s{i}",
                "op": "",
                "status": "ok",
                "note": "",
                "alloc_conf_seen": setting,
                "rss_bytes": 100 * mib,
                "allocated_bytes": alloc * mib,
                "reserved_bytes": reserved * mib,
                "peak_allocated_bytes": 16 * mib,
                "driver_used_bytes": 600 * mib,
                "segment_map": seg if i else [],
                "trace": [[1000, "segment_alloc", 64 * mib], [1500, "alloc", 16 * mib]]
                if with_trace and i == 1
                else [[4000, "free_requested", 16 * mib], [4000, "free_completed", 16 * mib]]
                if with_trace and i == 2
                else [],
            }
        )
    device = {"kind": "cuda", "label": "GPU"}
    return make_run("allocator", rows, {"alloc_conf_seen": setting}, device, config={"scenario": "custom"})


def test_segment_map_draws_each_block_at_its_offset():
    chart = plots.segment_map(_gpu_run(), 1)
    bars = [(t.name, t.base[0], t.x[0]) for t in chart.figure.data]
    assert bars == [("active_allocated", 0, 16), ("inactive", 16, 48)]  # MiB


def test_segment_map_colours_every_block_state_a_snapshot_writes():
    run = _gpu_run()
    run.rows[1]["segment_map"][0]["blocks"][1]["state"] = "active_pending_free"  # as real snapshots write it
    chart = plots.segment_map(run, 1)
    colours = {t.name: t.marker.color for t in chart.figure.data}
    assert colours == {"active_allocated": "#d62728", "active_pending_free": "#ff7f0e"}  # not the grey fallback


def test_history_accumulates_active_and_reserved_by_hand():
    chart = plots.history(_gpu_run(with_trace=True))
    df = chart.data
    assert list(df["active_bytes"] // 2**20) == [0, 16, 16, 0]  # segment, alloc 16, free requested, free completed
    assert list(df["reserved_bytes"] // 2**20) == [64, 64, 64, 64]
    assert list(df["time_ms"]) == [0, 0.5, 3, 3]
    assert plots.history(_gpu_run()) is None


def test_overlay_draws_reserved_and_allocated_per_setting():
    (chart,) = plots.overlay([_gpu_run("default"), _gpu_run("expandable_segments:True")])
    assert [t.name for t in chart.figure.data] == [
        "default · reserved",
        "default · allocated",
        "expandable_segments:True · reserved",
        "expandable_segments:True · allocated",
    ]
    assert list(chart.figure.data[2].y) == [0, 64, 64]
    assert "segment_map" not in chart.data.columns  # nested JSON never goes into the CSV export


def test_overlay_stands_the_steps_names_upright():
    """Runs of several scenarios put all their steps on one axis: the five shipped H200 allocator runs side by side at
    1280 px drew each step's name turned -35° over the next one's (the overprint check of tests/e2e/test_screenshots.py
    found 19 pairs in Chromium); upright, none."""
    (chart,) = plots.overlay([_gpu_run("default"), _gpu_run("expandable_segments:True")])
    assert chart.figure.layout.xaxis.tickangle == -90

"""An allocator run's step rows (:mod:`core.rows.allocator`): a stored row round-trips with its keys in their order
(its segment map and history too), a row missing keys reads with defaults, the engine's backward peaks are the stored
meta's, and the charts and tables read the fields."""

from __future__ import annotations

import pytest

from core.rows.allocator import AllocatorMeta, AllocatorStep, BackwardPeak
from tests.factories import make_run

# step 1 of the H200 example's fragmentation run (examples/nvidia-h200-2026-11-26.json)
STORED = {
    "index": 1,
    "step": "1. big = zeros(1024 MiB)",
    "op": "alloc big 1024",
    "status": "ok",
    "note": "",
    "alloc_conf_seen": "default",
    "rss_bytes": 651362304,
    "max_rss_bytes": 651010048,
    "live_device_bytes": 1073741824,
    "live_host_bytes": 0,
    "allocated_bytes": 1073741824,
    "reserved_bytes": 1073741824,
    "peak_allocated_bytes": 1073741824,
    "driver_used_bytes": 1722613760,
    "driver_total_bytes": 150109880320,
    "segments": 1,
    "alloc_count": 1,
    "free_count": 0,
    "inactive_split_bytes": 0,
    "alloc_retries": 0,
    "ooms": 0,
    "device_alloc_count": 1,
    "device_free_count": 0,
    "largest_free_block_bytes": 0,
    "free_in_reserved_bytes": 0,
    "fragmentation_ratio": 0.0,
    "segment_map": [
        {
            "total_size": 1073741824,
            "segment_type": "large",
            "expandable": False,
            "blocks": [{"offset": 0, "size": 1073741824, "state": "active_allocated"}],
            "blocks_dropped": 0,
        }
    ],
    "trace": None,
}
# the H200 example's backward-peak run, its first form
PEAK = {
    "form": "y = 5*x; y.mean().backward()",
    "x_bytes": 1073741824,
    "peak_bytes": 4294968320,
    "peak_over_x": 4.000000953674316,
    "seed_claim_over_x": 4.0,
    "autograd_count_over_x": 4,
    "autograd_tensors": "x, y, grad of y, x.grad",
}
MIB = 2**20


def test_a_stored_row_round_trips_with_its_keys_in_order():
    back = AllocatorStep.from_row(STORED).to_row()
    assert back == STORED and list(back) == list(STORED)
    lifecycle = STORED | {"seed_claim": "host unchanged, device +1 GB", "trace": [[5.0, "alloc", 512]]}
    assert list(AllocatorStep.from_row(lifecycle).to_row()) == list(lifecycle)  # the claim comes last
    assert AllocatorStep.from_row(lifecycle).to_row() == lifecycle
    assert BackwardPeak(**PEAK).to_dict() == PEAK


def test_a_row_missing_keys_reads_with_defaults():
    cpu = AllocatorStep.from_row({"index": 0, "step": "0. start", "rss_bytes": 10})
    assert (cpu.on_cuda, cpu.segment_map, cpu.trace, cpu.seed_claim) == (False, None, None, None)
    assert "seed_claim" not in cpu.to_row()
    assert AllocatorMeta.from_meta({}) == AllocatorMeta()


def _run(rows: list[dict], meta: dict | None = None):
    return make_run("allocator", rows, {"alloc_conf_seen": "default"} | (meta or {}), config={"scenario": "custom"})


def test_the_segment_map_and_the_history_read_the_fields():
    pytest.importorskip("plotly")
    from render.plots import allocator as plots

    second = STORED | {
        "index": 2,
        "step": "2. del big",
        "reserved_bytes": 2 * 1073741824,
        "segment_map": [
            {"total_size": 2 * MIB, "expandable": True, "blocks": [{"offset": MIB, "size": MIB, "state": "inactive"}]}
        ],
        "trace": [[1000.0, "segment_alloc", 4 * MIB], [3000.0, "alloc", MIB]],
    }
    run = _run([STORED, second])
    assert plots.segment_steps(run) == [0, 1]
    names = [c.name for c in plots.figures(run)]
    assert names == ["allocator-timeline", "allocator-segments", "allocator-history"]
    busiest = plots.figures(run)[1].figure  # the step that reserves most: the second
    assert busiest.layout.title.text.startswith("Segment map after 2. del big")
    (bar,) = busiest.data
    assert (bar.y[0], bar.x[0], bar.base[0]) == ("seg 0 · 2 MiB · expandable", 1.0, 1.0)
    history = plots.history(run)
    assert history is not None
    # reserved rises by the segment's 4 MiB at 0 ms, active by the block's 1 MiB 2 ms later
    assert list(history.data["time_ms"]) == [0.0, 2.0] and list(history.data["active_bytes"]) == [0, MIB]
    assert list(history.data["reserved_bytes"]) == [4 * MIB, 4 * MIB]


def test_the_backward_table_and_the_setting_read_the_meta_fields():
    pytest.importorskip("plotly")
    from render.plots import allocator as plots

    run = _run([STORED], {"backward_peak": [PEAK], "alloc_conf_seen": "expandable_segments:True"})
    table = plots.backward_frame(run)
    assert list(table["measured peak / size(x)"]) == [4.0] and list(table["peak (MiB)"]) == [4096.0]
    assert plots.setting_seen(run) == "expandable_segments:True"
    assert plots.setting_seen(_run([STORED], {"alloc_conf_seen": ""})) == "default"  # the first step's

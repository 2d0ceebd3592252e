"""The overlay of two imported snapshots draws who grew, by site and by category, from their stored summaries
(hand-made snapshots whose per-site peaks are worked out in ``tests/core/workload/test_snapshot.py``)."""

import pickle

import pytest

pytest.importorskip("plotly")

from core.result import RunResult
from core.workload.snapshot.analysis import analyse
from core.workload.snapshot.reader import read_snapshot
from render.plots import memory_snapshot
from tests.core.workload import snapshots
from tests.factories import make_run


def _run(tmp_path, name: str, snap: dict) -> RunResult:
    path = tmp_path / name
    path.write_bytes(pickle.dumps(snap))
    a = analyse(read_snapshot(path))
    rows = [
        {"t_ms": float(t), "allocated_bytes": int(x), "reserved_bytes": int(r)}
        for t, x, r in zip(a.point_time_ms(range(len(a.allocated))), a.allocated, a.reserved)
    ]
    return make_run("memory-snapshot", rows, a.summary(), {}, name=name)


def test_the_overlay_of_two_snapshots_draws_who_grew(tmp_path):
    snap_b = snapshots.hand_snapshot()
    for e in snap_b["device_traces"][0][:7]:  # the forward block A: 512 → 2048 bytes
        if e["addr"] == 0x10400:
            e["size"] = 2048
    a, b = _run(tmp_path, "a.pickle", snapshots.hand_snapshot()), _run(tmp_path, "b.pickle", snap_b)
    charts = {c.name: c for c in memory_snapshot.overlay([a, b])}
    sites = charts["snapshot-site-differences"].data
    assert list(sites["site"])[0] == "model.py:12 forward"
    assert list(sites.iloc[0][["A_bytes", "B_bytes", "delta_bytes"]]) == [512, 2048, 1536]
    assert sites["A_bytes"].sum() == 6632 and sites["B_bytes"].sum() == 6632 + 1536
    cats = charts["snapshot-category-differences"].data
    assert list(cats.iloc[0]) == ["activations", 512, 2048, 1536]
    bars = charts["snapshot-category-differences"].figure.data[0]
    assert list(bars.x * 2**30) == [0, 0, 0, 1536]  # drawn bottom-up: the largest growth on top

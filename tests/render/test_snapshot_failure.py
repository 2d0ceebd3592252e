"""The out-of-memory figures the snapshot page shows first, on the hand-built failure of
tests/core/workload/test_snapshot_oom.py (every figure worked out in its docstring)."""

import pickle

from core.rows.snapshot import SnapshotSummary
from core.workload.snapshot.analysis import analyse
from core.workload.snapshot.reader import read_snapshot
from render import snapshot_view as view
from tests.core.workload import snapshots
from tests.core.workload.test_snapshot_oom import oom_snapshot


def summary(tmp_path, snap: dict) -> SnapshotSummary:
    path = tmp_path / "s.pickle"
    path.write_bytes(pickle.dumps(snap))
    return SnapshotSummary.from_meta(analyse(read_snapshot(path)).summary())


def test_a_failure_is_shown_with_its_figures(tmp_path):
    assert view.failure_figures(summary(tmp_path, oom_snapshot())) == [
        ("Request that failed", "6.0 MiB (large pool)"),  # 6,291,456 B
        ("Free on the device", "5.0 MiB"),
        ("Reserved but unallocated", "10.0 MiB"),  # 10,485,248 B / 2²⁰ = 9.9995…
        ("Largest free block", "small 2.0 MiB · large 4.0 MiB"),  # 2,096,640 B and 4,194,304 B
        ("Cause", "fragmentation: enough reserved, no block large enough"),
    ]
    assert view.failure_figures(summary(tmp_path, oom_snapshot(request=16 * 2**20)))[-1] == (
        "Cause",
        "too little free on the device",
    )


def test_a_snapshot_without_a_failure_shows_none(tmp_path):
    assert view.failure_figures(summary(tmp_path, snapshots.hand_snapshot())) == []

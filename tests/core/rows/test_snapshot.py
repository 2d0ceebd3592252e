"""An imported snapshot's summary (:mod:`core.rows.snapshot`): a stored one reads into its fields, one stored by an
earlier version reads with defaults, and the text and the failure's figures read the fields."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from core.rows.snapshot import Site, SnapshotSummary
from core.workload.snapshot.analysis import analyse
from core.workload.snapshot.reader import read_snapshot
from core.workload.snapshot.text import snapshot_lines
from render.snapshot_view import failure_figures

OOM_FILE = Path(__file__).parents[2] / "data" / "workload" / "snapshots" / "oom_h200_cap.pickle.gz"


def test_a_real_snapshot_s_stored_summary_reads_into_its_fields():
    s = SnapshotSummary.from_meta(analyse(read_snapshot(OOM_FILE)).summary())
    # as `python -m core snapshot` printed this file's summary before it had a type
    assert (s.trace_events, s.peak_allocated_bytes, s.peak_time_ms, s.source_format) == (
        249, 2_618_392_580, 4253.413, "pickle (protocol 4)"
    )  # fmt: skip
    assert s.peak_event is not None and (s.peak_event.action, s.peak_event.size_bytes) == ("alloc", 2**30)
    assert s.oom is not None and (s.oom.requested_bytes, s.oom.pool, s.oom.time_ms) == (2**30, "large", 4254.404)
    assert s.oom.reserved_unallocated_bytes == 3_047_420 and s.oom.largest_free_block_bytes["small"] == 2**20
    assert all(isinstance(t, Site) for t in s.top_sites_at_peak) and s.top_sites_at_peak


def test_a_summary_stored_by_an_earlier_version_reads_with_defaults():
    s = SnapshotSummary.from_meta({"file": "old.pickle", "peak_allocated_bytes": 10})
    assert (s.has_times, s.peak_event, s.oom, s.top_sites_at_peak, s.notes, s.source_format) == (
        True, None, None, (), (), ""
    )  # fmt: skip
    # an out-of-memory stored before the analysis named its cause: fragmentation where the reserve had room
    oom = {"time_ms": 1.0, "requested_bytes": 4, "pool": "small", "device_free_bytes": 0,
           "reserved_unallocated_bytes": 8, "largest_free_block_bytes": {"small": 2, "large": 0}}  # fmt: skip
    for fragmentation, cause in ((True, "fragmentation"), (False, "device full")):
        read = SnapshotSummary.from_meta({"oom": oom | {"fragmentation": fragmentation}}).oom
        assert read is not None and read.cause == cause


def test_the_text_and_the_failure_figures_read_the_fields():
    meta = analyse(read_snapshot(OOM_FILE)).summary() | {"file": "oom_h200_cap.pickle.gz", "file_bytes": 2048}
    lines = snapshot_lines(meta, "not stored")
    assert lines[0] == "oom_h200_cap.pickle.gz: pickle (protocol 4), 2.0 KiB — not stored"
    assert snapshot_lines(meta | {"peak_site": "train.py:12 step"}, "")[2:].count("  site: train.py:12 step") == 1
    s = SnapshotSummary.from_meta(meta)
    assert failure_figures(s)[0] == ("Request that failed", "1.0 GiB (large pool)")
    assert s.oom is not None
    moved = replace(s, oom=replace(s.oom, requested_bytes=3 * 2**20, pool="small"))
    assert failure_figures(moved)[0] == ("Request that failed", "3.0 MiB (small pool)")

"""Gzip traces held to the inflate ratio (issue 48, item 9, trace part): a 10 MB trace ``.gz`` wrote 8 GiB to the
temporary directory, under the trace's own 8 GiB cap, and a 190 KB ``.gz`` of zeros cost a minute of CPU decoding
the 95 M elements it made. Each is written here and imported by the CLI in a process tree bounded in CPU seconds
and RSS (:func:`bounded_cli`) and, for the first, in the bytes one file may take (``RLIMIT_FSIZE``, inherited by the
worker): refused with exit 2, the inflate_ratio limit named, nothing stored."""

from __future__ import annotations

import resource
from pathlib import Path

import pytest

from core.intake import inflated_limit
from core.limits import LIMITS
from tests.core.workload.test_hostile_files import bounded_cli, files_under
from tests.core.workload.test_hostile_trees import gz

pytest.importorskip("msgspec")

CPU_S = 10.0
RATIO = "held to the inflate_ratio limit"
ZEROS = b"0," * (1 << 20)  # 2 MiB of the smallest elements a list can hold


def refused_by_ratio(path: Path, data_dir: Path):
    before = files_under(data_dir)
    out = bounded_cli("trace", str(path), wall_s=CPU_S)
    assert out.code == 2, (out.code, out.stderr[-2000:])
    assert "Traceback" not in out.stderr, out.stderr[-2000:]
    assert RATIO in out.stderr and path.name in out.stderr, out.stderr[-2000:]
    assert f"{inflated_limit(path.stat().st_size)} B limit" in out.stderr, out.stderr[-2000:]
    assert files_under(data_dir) - before <= {"runs.sqlite", "runs.sqlite-wal", "runs.sqlite-shm"}
    if (data_dir / "runs.sqlite").exists():
        from core.store import RunStore

        assert RunStore().count() == 0
    return out


def test_a_gzip_trace_writes_no_more_than_the_ratio_allows_before_it_is_refused(tmp_path, data_dir):
    """About 200 KB of gzip inflating to 200 MiB: the reader may write 100× its size (19 MiB here) to the
    temporary file it maps and no more. Files larger than twice that are refused to the whole process tree, so a
    reader that inflated past the ratio would fail with 'File too large', not with the ratio named."""
    path = gz(tmp_path / "bomb.json.gz", (b'{"traceEvents": [', 1), (ZEROS, 100), (b"0]}", 1))
    limit = inflated_limit(path.stat().st_size)
    assert 150 << 10 < path.stat().st_size < 300 << 10 and limit > LIMITS.inflate_floor_bytes
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (2 * limit, hard))
    try:
        refused_by_ratio(path, data_dir)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


def test_a_190_kb_gzip_of_zeros_is_refused_in_seconds_of_cpu(tmp_path, data_dir):
    """190 MB of ``0,`` in 190 KB of gzip: 95 M elements that are no event, each decoded and counted before the
    file could be called no trace (60 s of CPU on this 2-core box); the ratio stops it at 19 MB."""
    path = gz(tmp_path / "zeros.json.gz", (b'{"traceEvents": [', 1), (ZEROS, 95), (b"0]}", 1))
    assert 150 << 10 < path.stat().st_size < 250 << 10
    refused_by_ratio(path, data_dir)


def test_a_gzip_trace_within_the_ratio_is_read(tmp_path):
    """The floor lets a small file inflate to 8 MiB: 7 MiB of one event repeated (ratio over 1000) still reads."""
    event = b'{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 1, "args": {}},'
    path = gz(tmp_path / "dense.json.gz", (b'{"traceEvents": [', 1), (event * 1000, 75), (event[:-1] + b"]}", 1))
    assert path.stat().st_size * LIMITS.inflate_ratio < 7 << 20 < LIMITS.inflate_floor_bytes
    out = bounded_cli("trace", str(path), "--no-save", wall_s=30.0)
    assert out.code == 0, out.stderr[-2000:]
    assert "75,001 events" in out.stdout + out.stderr, (out.stdout + out.stderr)[-2000:]

"""Hostile flight-recorder dumps of issue 48 (budgets that do not follow the bytes read): each is written here,
small, and read by ``hang`` through the real CLI in a process tree bounded in CPU seconds and RSS
(``bounded_cli``)."""

from __future__ import annotations

import gzip
import pickle
from pathlib import Path

from core.hardware.memory import MEMORY_LIMIT_ENV
from tests.core.workload.test_flight_recorder import _entry
from tests.core.workload.test_hostile_files import bounded_cli

CPU_S = 20.0


def memoised(folder: Path, ranks: int, entries: int) -> Path:
    """``ranks`` gzip dumps whose entries are one dict referred to ``entries`` times (a memo fetch each: 2 bytes,
    a few KiB once compressed)."""
    folder.mkdir()
    entry = _entry(1, "gloo:all_reduce")
    config = {"0": {"name": "0", "desc": "default_pg", "ranks": str(list(range(ranks)))}}
    raw = pickle.dumps({"version": "2.10", "pg_config": config, "entries": [entry] * entries}, protocol=4)
    for rank in range(ranks):
        (folder / f"rank{rank}.gz").write_bytes(gzip.compress(raw))
    return folder


def test_an_import_that_runs_out_of_memory_in_its_torch_free_worker_says_so(tmp_path, monkeypatch):
    """Its error path imports no torch: under the worker's memory cap that import failed too, and the worker ended
    in an ImportError traceback."""
    folder = memoised(tmp_path / "dumps", 1, 1_000_000)
    monkeypatch.setenv(MEMORY_LIMIT_ENV, str(200 << 20))
    out = bounded_cli("hang", str(folder), "--no-save", wall_s=CPU_S)
    assert out.code == 1, (out.code, out.stderr[-2000:])
    assert "error: out of memory" in out.stderr and "200.0 MiB memory cap" in out.stderr, out.stderr[-2000:]
    assert "Traceback" not in out.stderr and "ImportError" not in out.stderr, out.stderr[-2000:]

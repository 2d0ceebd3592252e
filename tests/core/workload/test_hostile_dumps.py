"""Hostile flight-recorder dumps of issue 48 (budgets that do not follow the bytes read): each is written here,
small, and read by ``hang`` through the real CLI in a process tree bounded in CPU seconds and RSS
(``bounded_cli``)."""

from __future__ import annotations

import gzip
import os
import pickle
import shutil
import time
from pathlib import Path

import psutil

from core.hardware.memory import MEMORY_LIMIT_ENV
from tests.core.workload.test_flight_recorder import DATA, _entry
from tests.core.workload.test_hostile_files import Outcome, bounded_cli

CPU_S = 20.0
LEFT_S = 30.0  # a backstop: a worker watches its parent twice a second


def left_behind(out: Outcome) -> list[str]:
    """The processes of the CLI's session still running once they have had time to see it end."""
    deadline = time.monotonic() + LEFT_S
    while True:
        alive = []
        for p in psutil.process_iter(["pid", "cmdline"]):
            try:
                if os.getsid(p.pid) == out.pid:
                    alive.append(" ".join(p.info["cmdline"] or []))
            except (ProcessLookupError, PermissionError):
                continue
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.1)


def hang_refused(folder: Path, data_dir: Path, *said: str) -> Outcome:
    """``hang FOLDER`` through the CLI, bounded: exit 2, each of ``said`` in its words, no traceback, nothing
    stored, no process left behind."""
    out = bounded_cli("hang", str(folder), wall_s=CPU_S)
    assert out.code == 2, (out.code, out.stderr[-2000:])
    assert "Traceback" not in out.stderr, out.stderr[-2000:]
    for words in said:
        assert words in out.stderr, out.stderr[-2000:]
    if (data_dir / "runs.sqlite").exists():
        from core.store import RunStore

        assert RunStore().count() == 0
    assert not left_behind(out)
    return out


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


def test_a_30_digit_rank_in_a_dumps_name_is_refused_in_words(tmp_path, data_dir):
    """It ended in 'OverflowError: Python int too large to convert to C ssize_t' (the job's ranks up to it)."""
    folder = tmp_path / "job"
    folder.mkdir()
    shutil.copy(DATA / "no_hang" / "rank0", folder / "rank123456789012345678901234567890")
    hang_refused(
        folder,
        data_dir,
        "rank123456789012345678901234567890: rank 12345678901234567890…(30 chars) in the name is past 2,147,483,647",
    )

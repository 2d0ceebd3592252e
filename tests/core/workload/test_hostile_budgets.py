"""Budgets that follow the bytes read (issue 48, items 5, 8 and 9): each hostile file is written here, small, and
read through the real CLI in a process tree bounded in CPU seconds and RSS (``bounded_cli``): refused in words
(exit 2), no traceback, nothing stored, no process left behind."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from core.intake import LIMITS
from tests.core.workload.test_flight_recorder import _entry
from tests.core.workload.test_hostile_dumps import CPU_S, hang_refused, left_behind
from tests.core.workload.test_hostile_files import bounded_cli

RSS = 512 << 20
WHITESPACE_MIB = 200  # what each gzip below inflates to: far past 100× its own size


def padded_gzip(path: Path, head: bytes, tail: bytes) -> Path:
    """A gzip of ``head``, :data:`WHITESPACE_MIB` MiB of spaces (legal JSON between two values) and ``tail``."""
    with gzip.open(path, "wb", compresslevel=9) as fh:
        fh.write(head)
        for _ in range(WHITESPACE_MIB):
            fh.write(b" " * (1 << 20))
        fh.write(tail)
    return path


def ratio_said(path: Path) -> str:
    """The refusal's words, its figure by hand: 100 times the file's size, or the 8 MiB floor."""
    limit = max(8 << 20, 100 * path.stat().st_size)
    return f"{path.name}: the {{}} ({path.stat().st_size:,} bytes of gzip) inflates past {limit:,} bytes, the inflate_ratio limit"


def test_a_json_gzip_dump_is_held_to_the_inflate_ratio(tmp_path, data_dir):
    """It was held only to the 512 MiB cap on one dump (1 MB of gzip: 550 MB of RSS, then refused)."""
    folder = tmp_path / "job"
    folder.mkdir()
    dump = {"version": "2.10", "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0]"}}}
    head = json.dumps(dump).encode()[:-1] + b', "entries": [' + json.dumps(_entry(1, "gloo:all_reduce")).encode()
    path = padded_gzip(folder / "rank0.json.gz", head, b"]}")
    assert LIMITS.inflate_ratio * path.stat().st_size < WHITESPACE_MIB << 20
    hang_refused(folder, data_dir, ratio_said(path).format("flight-recorder dump"))


def test_a_runs_file_gzip_is_held_to_the_inflate_ratio(tmp_path, data_dir):
    """204 KB of gzip made 210 MB of JSON under the 256 MiB cap on a runs file, all of it decoded."""
    path = padded_gzip(tmp_path / "runs.json.gz", b'{"format": "gpulab-runs", "version": 1, "runs": []', b"}")
    out = bounded_cli("runs", "import", str(path), wall_s=CPU_S, rss_bytes=RSS)
    assert out.code == 2, (out.code, out.stderr[-2000:])
    assert "Traceback" not in out.stderr, out.stderr[-2000:]
    assert ratio_said(path).format("runs file") in out.stderr, out.stderr[-2000:]
    assert not left_behind(out)

"""Budgets that follow the bytes read (issue 48, items 5, 8 and 9): each hostile file is written here, small, and
read through the real CLI in a process tree bounded in CPU seconds and RSS (``bounded_cli``): refused in words
(exit 2), no traceback, nothing stored, no process left behind."""

from __future__ import annotations

import gzip
import json
import pickle
from pathlib import Path

import pytest

from core.limits import LIMITS
from tests.core.workload.test_flight_recorder import _entry
from tests.core.workload.test_hostile_dumps import CPU_S, hang_refused, left_behind, memoised
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


# -- item 5: no text made from a field that is not a string, and no comparison walks what was not checked ------------


def looped() -> list:
    """A list that holds itself twice: printing it never ends."""
    x: list = []
    x += [x, x]
    return x


def shared(levels: int = 40) -> list:
    """l_k = [l_k-1, l_k-1]: 2^40 items to print, or to compare with another built alike (the pickler writes each
    level once and fetches it from the memo: 6 bytes a level)."""
    x: list = []
    for _ in range(levels):
        x = [x, x]
    return x


def dump_with(where: str, value) -> dict:
    """A two-entry dump whose field ``where`` holds ``value`` in both entries (two lists built alike, not one)."""

    def entry(seq: int) -> dict:
        e = _entry(seq, "gloo:all_reduce")
        made = value()
        if where == "version":
            return e
        if where in ("group name", "group description"):
            e["process_group"] = [made, "default_pg"] if where == "group name" else ["0", made]
        elif where == "frame's name":
            e["frames"] = [{"filename": "train.py", "line": 7, "name": made}]
        elif where == "dtype":
            e["input_dtypes"] = [made]
        else:
            e[where] = made
        return e

    config = {"0": {"name": "0", "desc": "default_pg", "ranks": "[0]"}}
    return {"version": value() if where == "version" else "2.10", "pg_config": config, "entries": [entry(1), entry(2)]}


REFUSED = {
    "version": "its version is a list, not a string",
    "profiling_name": "an entry's profiling_name is a list, not a string",
    "group name": "an entry's group name is a list, not a string",
    "group description": "an entry's group description is a list, not a string",
    "state": "an entry's state is a list, not a string",
    "dtype": "an entry's input_dtypes is not a list of strings",
    "frame's name": "a frame is not a dict of strings and numbers",
}


@pytest.mark.parametrize("value", [looped, shared])
@pytest.mark.parametrize("where", list(REFUSED))
def test_a_field_that_is_a_looped_or_shared_list_is_refused_never_printed(tmp_path, data_dir, where, value):
    """The 40-level lists took 68-94 s and 1.6-3.1 GiB (compared entry with entry, or printed); a looped one was
    read as '<list>' and shown."""
    folder = tmp_path / "job"
    folder.mkdir()
    path = folder / "rank0"
    path.write_bytes(pickle.dumps(dump_with(where, value), protocol=4))
    assert path.stat().st_size < 2048
    hang_refused(folder, data_dir, f"rank0: not a flight-recorder dump: {REFUSED[where]}")


def test_a_shapes_list_shared_by_a_million_entries_is_walked_within_the_bytes_read(tmp_path, data_dir):
    """One shapes list of 1,000 × 1,000 dimensions that 1 M entries share (two alternating, so none repeats the one
    before it): 4 KB of gzip, 10^12 dimensions to read. Refused by the bytes the import read: the gzip counted at
    the 8 MiB it may inflate to, 1,048,576 + 16 × 8,388,608 = 135,266,304 items."""
    folder = tmp_path / "job"
    folder.mkdir()
    shape = [[1] * 1000] * 1000
    entries = [_entry(1, "gloo:all_reduce", input_sizes=shape), _entry(2, "gloo:broadcast", input_sizes=shape)]
    config = {"0": {"name": "0", "desc": "default_pg", "ranks": "[0]"}}
    raw = pickle.dumps({"version": "2.10", "pg_config": config, "entries": entries * 500_000}, protocol=4)
    path = folder / "rank0.gz"
    path.write_bytes(gzip.compress(raw, 9))
    assert path.stat().st_size * LIMITS.inflate_ratio < 8 << 20
    hang_refused(folder, data_dir, "rank0.gz: reading its entries walks more than 135,266,304 items")


# -- item 8: caps per import, not per file ---------------------------------------------------------------------


def test_eight_dumps_of_a_million_memoised_entries_are_refused_over_the_import(tmp_path, data_dir):
    """Each dump was held to 1 M entries alone: eight took 73 s and 1.4 GiB, read whole. The second passes the cap
    on the import's entries, before any of its entries is read."""
    folder = memoised(tmp_path / "dumps", 8, 1_000_000)
    assert max(p.stat().st_size for p in folder.iterdir()) < 9 << 10
    out = hang_refused(
        folder,
        data_dir,
        "rank1.gz: the dumps of this import hold 2,000,000 entries so far, more than the 1,000,000 limit on one "
        "import (fr_entries, over all its files)",
    )
    assert out.peak_rss < RSS, out.peak_rss


# -- item 9: every declared count bounded by the bytes that can hold it ----------------------------------------


def ranks_dump(folder: Path, ranks: str, form: str = "pickle") -> Path:
    """One rank's dump whose default group lists ``ranks``, gzip of a pickle or of JSON."""
    folder.mkdir()
    dump = {"version": "2.10", "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": ranks}}}
    dump["entries"] = [_entry(1, "gloo:all_reduce")]
    raw = pickle.dumps(dump, protocol=4) if form == "pickle" else json.dumps(dump).encode()
    path = folder / ("rank0.gz" if form == "pickle" else "rank0.json.gz")
    path.write_bytes(gzip.compress(raw, 9))
    return folder


@pytest.mark.parametrize("form", ["pickle", "json"])
def test_a_group_that_declares_more_ranks_than_its_text_can_hold_is_refused(tmp_path, data_dir, form):
    """'[0, 0, …]': 2,000,001 ranks in 6,000,001 characters, within the 8 MiB a 6 KB gzip may inflate to (it took
    33 s, 740 MB and stored a 17 MB run). Written all different, 0 to 2,000,000 take 10 + 90×2 + 900×3 + 9,000×4
    + 90,000×5 + 900,000×6 + 1,000,001×7 digits and 2,000,000 commas: 14,888,897 characters."""
    folder = ranks_dump(tmp_path / "job", "[" + "0, " * 2_000_000 + "0]", form)
    assert (folder / ("rank0.gz" if form == "pickle" else "rank0.json.gz")).stat().st_size < 20 << 10
    hang_refused(
        folder,
        data_dir,
        "pg_config lists 2,000,001 ranks in group '0' in 6,000,001 characters, fewer than it takes to write that many "
        "different ranks",
    )


def test_a_group_that_lists_a_rank_twice_is_refused(tmp_path, data_dir):
    folder = ranks_dump(tmp_path / "job", "[0, 1, 1]")
    hang_refused(folder, data_dir, "pg_config lists a rank twice in group '0' (a group holds each rank once)")

"""A flight-recorder import's rank row (:mod:`core.rows.flight_recorder`): a stored row round-trips with its keys in
their order, a row missing keys reads with defaults, and the hang's text reads its fields."""

from __future__ import annotations

from core.rows.flight_recorder import HangRank
from core.workload.hang.text import hang_lines

# rank 0 of tests/data/flight_recorder/skipped_rank, as `hang DIR --json` printed it before the row had a type
# (its creation time as recorded)
STORED = {
    "kind": "rank",
    "rank": 0,
    "file": "rank0",
    "state": "waiting",
    "last_completed_seq": 3,
    "last_entered_seq": 4,
    "first_seq_in_buffer": 1,
    "wrapped": False,
    "last_op": "all_reduce",
    "last_frames": [
        "/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py:3245 all_reduce",
        "/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/torch/distributed/c10d_logger.py:83 wrapper",
        "/work/main/tests/data/flight_recorder/generate.py:67 main",
        "/work/main/tests/data/flight_recorder/generate.py:104 <module>",
    ],
    "last_created_ns": 1_767_000_000_123_456_789,
    "entries": 5,
}
META = {
    "file": "skipped_rank",
    "ranks": [0],
    "version": "2.10",
    "backend": "gloo",
    "groups": [{"group": "0", "desc": "default_pg"}],
    "group": "0",
    "disagreements": [],
    "findings": [],
}


def test_a_stored_row_round_trips_with_its_keys_in_order():
    back = HangRank.from_row(STORED).to_row()
    assert back == STORED and list(back) == list(STORED)
    assert HangRank.from_row(STORED | {"gpu": 3}).to_row()["gpu"] == 3  # a key added by others is kept


def test_a_row_missing_keys_reads_with_defaults():
    r = HangRank.from_row({"kind": "rank", "rank": 2})
    assert (r.state, r.last_op, r.last_frames, r.wrapped, r.last_entered_seq) == ("idle", None, (), False, None)


def test_the_text_reads_the_fields():
    (line,) = [x for x in hang_lines(META, [HangRank.from_row(STORED)], "stored") if x.startswith("    0 ")]
    assert (
        line
        == "    0 waiting              #3       #4  all_reduce  /work/main/tests/data/flight_recorder/generate.py:67 main"
    )
    moved = HangRank.from_row(STORED | {"state": "missing", "last_op": "broadcast", "last_frames": []})
    (line,) = [x for x in hang_lines(META, [moved], "stored") if x.startswith("    0 ")]
    assert line.split() == ["0", "missing", "#3", "#4", "broadcast"]

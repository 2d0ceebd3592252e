"""A flight-recorder import's rank row and summary (:mod:`core.rows.flight_recorder`): stored ones round-trip with
their keys in their order, ones missing keys read with defaults, and the text, the chart and the findings read
their fields."""

from __future__ import annotations

from dataclasses import replace

from core.result import RunResult
from core.rows.flight_recorder import Disagreement, HangRank, HangSummary
from core.workload.hang.findings import hang_findings
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


# the stuck collective of tests/data/flight_recorder/desync_op_json as `hang DIR --json` printed it before the
# summary had a type (its creation times as recorded)
STUCK = {
    "kind": "collective",
    "group": "0",
    "group_desc": "default_pg",
    "seq_id": 4,
    "op": "all_reduce",
    "backend": "gloo",
    "sizes": [[4, 8]],
    "dtypes": ["Float"],
    "bytes": 128,
    "ranks_missing": [],
    "ranks_waiting": [0, 2],
    "ranks_mismatched": [
        {"rank": 1, "differs_in": "op", "op": "broadcast", "sizes": [[4, 8]], "dtypes": ["Float"], "frames": []}
    ],
    "ranks_entered": [],
    "ranks_completed": [],
    "ranks_unknown": [],
    "ranks_without_dump": [],
    "waiting_since_ns": 1_767_000_000_990_000_000,
    "waiting_until_ns": 1_767_000_001_000_000_000,
    "first_created_ns": 1_767_000_000_990_000_000,
    "frames": [],
    "no_majority": False,
    "reference_rank": 0,
    "last_arrival": None,
    "behind": [],
}
# a send with no recv, as the analysis stored it: the pair of ranks before the times, no vote, nothing behind
P2P = {
    "kind": "p2p",
    "group": "0",
    "group_desc": "default_pg",
    "seq_id": 3,
    "op": "send",
    "backend": "nccl",
    "sizes": [[1024]],
    "dtypes": ["BFloat16"],
    "bytes": 2048,
    "ranks_missing": [5],
    "ranks_waiting": [0],
    "ranks_mismatched": [],
    "ranks_entered": [],
    "ranks_completed": [],
    "ranks_unknown": [],
    "ranks_without_dump": [],
    "peer": [0, 5],
    "waiting_since_ns": 17,
    "waiting_until_ns": 17,
    "first_created_ns": 17,
    "frames": ["train.py:10 step"],
}
SUMMARY = {
    "stuck": STUCK,
    "disagreements": [STUCK],
    "group": "0",
    "groups": [{"group": "0", "desc": "default_pg", "ranks": [0, 1, 2], "collectives": 4}],
    "ranks": [0, 1, 2],
    "world_size": 3,
    "ranks_without_dump": [],
    "version": "2.10",
    "backend": "gloo",
    "wrapped_ranks": [],
    "grid": {
        "ranks": [0, 1],
        "seqs": [3, 4],
        "ops": ["all_reduce", "all_reduce"],
        "cells": [["completed", "waiting"], ["completed", "mismatched"]],
    },
    "late": None,
    "quirks": {},
}


def test_a_stored_summary_round_trips_with_its_keys_in_order():
    back = HangSummary.from_meta(SUMMARY | {"file": "desync_op_json", "findings": []}).to_meta()
    assert back == SUMMARY and list(back) == list(SUMMARY)
    assert list(back["stuck"]) == list(STUCK)
    for d in (P2P, {k: v for k, v in STUCK.items() if k != "behind"}):
        again = Disagreement.from_dict(d).to_dict()
        assert again == d and list(again) == list(d)


def test_a_summary_missing_keys_reads_with_defaults():
    s = HangSummary.from_meta({"stuck": None})
    assert (s.stuck, s.disagreements, s.grid.cells, s.late, s.example, s.group_desc) == (None, (), (), None, None, "")
    d = Disagreement.from_dict({"kind": "collective", "group": "1"})
    assert (d.culprits, d.behind, d.last_arrival, d.no_majority) == ((), None, None, False)


def test_the_chart_and_the_finding_read_the_fields():
    from render.plots.flight_recorder import grid_chart

    def detail(stuck: dict) -> str:
        meta = SUMMARY | {"stuck": stuck}
        run = RunResult("flight-recorder", {}, {"kind": "cpu", "name": "cpu"}, {}, "2026-11-28", None, "ok", meta=meta)
        chart = grid_chart(run)
        assert chart is not None
        return chart.figure.layout.title.text

    assert "stuck: all_reduce #4 (outlined)" in detail(STUCK)
    assert "stuck: reduce_scatter #9 (outlined)" in detail(STUCK | {"op": "reduce_scatter", "seq_id": 9})
    assert "stuck: send #3 (point-to-point, not in this grid)" in detail(P2P)
    summary = HangSummary.from_meta(SUMMARY)
    (hang,) = hang_findings(summary, [])
    assert hang.text.startswith("rank 1 entered broadcast (Float, shape 4×8) where the others entered all_reduce #4 "
                                "of the default group (128 B Float, shape 4×8): a desync, other op")  # fmt: skip
    assert hang.value == 1
    (hang,) = hang_findings(replace(summary, stuck=Disagreement.from_dict(P2P)), [])
    assert hang.text.startswith("rank 5 never posted the recv for rank 0's send #3 (0→5) of the default group")

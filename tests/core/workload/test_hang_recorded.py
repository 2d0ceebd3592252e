"""``hang`` on real gloo jobs this test records (tests/data/flight_recorder/record_job.py: torch.distributed on
127.0.0.1, the recorder's default buffer of 2,000 entries), each built to stop in a known way, and checked
against torch's own analyser (``fr_trace``) where it answers: a full buffer of 2,000 all_reduces (issue 50: a
dump of 60 was refused), a rank that never enters a collective (with and without its dump), two sub-groups with
either group entered first, and a slow rank dumped during the wait (issue 47, items 12-14)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from core.store import RunStore
from render.plots.flight_recorder import figures
from tests.conftest import ROOT
from tests.core.workload.test_flight_recorder import fr_trace
from tests.core.workload.test_hostile_files import bounded_cli

pytest.importorskip("torch.distributed")

RECORD = ROOT / "tests" / "data" / "flight_recorder" / "record_job.py"
SUBGROUPS = {"0": ("default_pg", list(range(8))), "1": ("A", [0, 1, 2, 3]), "2": ("B", [4, 5, 6, 7])}
LATE_S = 1.0  # how late the slow rank enters (record_job.py --late)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """record(scenario, ranks, collectives) → the folder of its dumps, each job recorded once per module."""
    done: dict[tuple, Path] = {}

    def record(scenario: str, ranks: int, collectives: int) -> Path:
        key = (scenario, ranks, collectives)
        if key not in done:
            out = tmp_path_factory.mktemp("jobs") / f"{scenario}_{ranks}x{collectives}"
            args = [str(out), "--ranks", str(ranks), "--collectives", str(collectives), "--scenario", scenario]
            run = subprocess.run(
                [sys.executable, str(RECORD), *args, "--late", str(LATE_S)], capture_output=True, text=True, timeout=900
            )
            assert run.returncode == 0, run.stderr[-3000:]
            done[key] = out
        return done[key]

    return record


def hang(folder: Path, *more: str) -> tuple[int, dict]:
    out = bounded_cli("hang", str(folder), "--json", *more, wall_s=120)
    assert out.code in (0, 1), out.stderr[-2000:]
    return out.code, json.loads(out.stdout)


def test_a_full_buffer_of_2000_collectives_reads_and_the_rank_that_skipped_the_last_is_named(recorded, tmp_path):
    """3 ranks × 2,000 all_reduces, the recorder's default buffer: rank 2 skips the 2,000th."""
    folder = recorded("skip_last", 3, 2000)
    code, doc = hang(folder, "--no-save")
    assert code == 0
    s = doc["stuck"]
    assert (s["group"], s["seq_id"], s["op"], s["ranks_missing"], s["ranks_waiting"]) == (
        "0",
        2000,
        "all_reduce",
        [2],
        [0, 1],
    )
    assert [(r["rank"], r["entries"], r["last_entered_seq"]) for r in doc["ranks"]] == [
        (0, 2000, 2000),
        (1, 2000, 2000),
        (2, 1999, 1999),
    ]
    assert doc["findings"][0]["text"].startswith("rank 2 never entered all_reduce #2000 of the default group")
    report = fr_trace(folder, tmp_path, {"0": ("default_pg", [0, 1, 2])})
    assert "sequence number: 2000" in report and "missing ranks: {2}" in report, report[-3000:]


def test_a_rank_that_never_entered_a_collective_is_named(recorded, tmp_path):
    """Rank 1 hangs before its first collective: its dump holds no entry, ranks 0 and 2 wait in all_reduce #1 and
    gloo's status says -1 completed (none). It read "no hang" (exit 1): rank 1 was "unknown", the others' -1 read
    as nothing said."""
    folder = recorded("before_first", 3, 1)
    code, doc = hang(folder, "--no-save")
    assert code == 0
    s = doc["stuck"]
    assert (s["seq_id"], s["ranks_missing"], s["ranks_waiting"], s["ranks_completed"]) == (1, [1], [0, 2], [])
    assert doc["findings"][0]["text"].startswith("rank 1 never entered all_reduce #1 of the default group")
    assert [(r["rank"], r["state"], r["last_completed_seq"]) for r in doc["ranks"]] == [
        (0, "waiting", 0),
        (1, "missing", None),
        (2, "waiting", 0),
    ]
    report = fr_trace(folder, tmp_path, {"0": ("default_pg", [0, 1, 2])})
    assert "sequence number: 1" in report and "missing ranks: {1}" in report, report[-3000:]


def test_a_rank_that_never_entered_a_collective_and_left_no_dump_is_named(recorded, tmp_path):
    """The same job without rank 1's dump (the others' do not depend on it)."""
    folder = tmp_path / "without_rank_1"
    shutil.copytree(recorded("before_first", 3, 1), folder)
    (folder / "rank_1").unlink()
    code, doc = hang(folder, "--no-save")
    assert code == 0
    s = doc["stuck"]
    assert (s["seq_id"], s["ranks_waiting"], s["ranks_without_dump"]) == (1, [0, 2], [1])
    assert doc["ranks_without_dump"] == [1]
    text = doc["findings"][0]["text"]
    assert (
        "none completed it: they wait for rank 1, the member with no dump" in text and doc["findings"][0]["value"] == 1
    )
    report = fr_trace(folder, tmp_path, {"0": ("default_pg", [0, 1, 2])}, "--allow-incomplete-ranks")
    assert "missed FR dumps from ranks ({1})" in report, report[-3000:]


@pytest.mark.parametrize("first", ["default", "sub"])
def test_of_two_sub_groups_the_rank_that_stopped_them_all_is_named(recorded, tmp_path, first):
    """8 ranks, groups A (0-3) and B (4-7). Rank 7 stops; 4-6 wait in B's all_reduce #3 for it, 0-3 in the default
    group's #3 for 4-7. Entered first, the default group's read as the cause: "ranks 4-7 never entered"."""
    folder = recorded(f"subgroups_{first}_first", 8, 3)
    code, doc = hang(folder, "--no-save")
    assert code == 0
    s = doc["stuck"]
    assert (s["group_desc"], s["seq_id"], s["ranks_missing"], s["ranks_waiting"]) == ("B", 3, [7], [4, 5, 6])
    assert [(b["group_desc"], b["seq_id"], b["ranks_waiting"]) for b in s["behind"]] == [
        ("default_pg", 3, [0, 1, 2, 3])
    ]
    text = doc["findings"][0]["text"]
    assert text.startswith("rank 7 never entered all_reduce #3 of group 2 (B)")
    assert "ranks 0–3 wait behind it in all_reduce #3 of the default group" in text
    report = fr_trace(folder, tmp_path, SUBGROUPS)  # torch lists every group's disagreement, B's among them
    assert "group info: 2:B" in report and "missing ranks: {7}" in report, report[-3000:]


def test_a_slow_rank_dumped_during_the_wait_is_named_late_not_hung(recorded, tmp_path, data_dir):
    """Ranks 0 and 1 dump while waiting in all_reduce #4; rank 2 enters it LATE_S later, it completes, rank 2
    dumps. It read "none is left waiting" beside a table of two waiting ranks, and nothing named rank 2."""
    folder = recorded("slow", 3, 4)
    code, doc = hang(folder)  # stored: its chart is drawn from the stored run
    assert code == 1
    assert doc["stuck"] is None
    no_hang, late = doc["findings"][:2]
    assert no_hang["kind"] == "no_hang" and "none is left waiting" not in no_hang["text"]
    assert (
        "ranks 0, 1 were still waiting in all_reduce #4 of the default group at the dump, which rank 2 completed"
        in (no_hang["text"])
    )
    assert late["kind"] == "late_rank" and late["text"].startswith("rank 2 entered it last, ")
    assert late["value"] >= LATE_S * 1e6  # µs: it slept that long after the others had dumped
    assert [r["state"] for r in doc["ranks"]] == ["waiting", "waiting", "idle"]
    (chart,) = figures(RunStore().find(doc["run_id"]))
    assert "no hang: rank 2 entered all_reduce #4 " in chart.figure.layout.title.text
    report = fr_trace(folder, tmp_path, {"0": ("default_pg", [0, 1, 2])})
    assert "Not all ranks joining collective" not in report, report[-3000:]  # torch finds nothing wrong either


@pytest.mark.slow
@pytest.mark.parametrize("ranks", [16, 32])
def test_16_and_32_ranks_with_the_default_buffer_read(recorded, ranks):
    """Recording takes minutes on 2 cores (2,000 all_reduces of every rank)."""
    code, doc = hang(recorded("skip_last", ranks, 2000), "--no-save")
    assert code == 0
    s = doc["stuck"]
    assert (s["seq_id"], s["ranks_missing"], s["ranks_waiting"]) == (2000, [ranks - 1], list(range(ranks - 1)))

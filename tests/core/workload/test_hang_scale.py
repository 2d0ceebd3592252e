"""The hang analysis grows linearly with the groups and the entries (issue 48, item 7): dumps where each entry
names its own process group, and jobs whose every rank sends to every other, cost work in proportion to what
they hold, and the answer stays the one the dumps were built to give.

The work is counted, not timed: the lines of Python the analysis runs (``sys.settrace``'s events), the same on
a loaded machine as on an idle one. Four times the groups must cost about four times the lines; the analysis
that compared every disagreement with every group ran sixteen times as many, and the one that looked for each
pair's sends among all of a rank's ran twice the entries' growth.
"""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

import pytest

from core.workload.hang.analysis import analyse
from core.workload.hang.dump import check_one_job, dump_files, read_dump
from core.workload.hang.findings import hang_findings
from tests.core.workload.test_flight_recorder import _entry
from tests.core.workload.test_hostile_files import bounded_cli

T0 = 1_700_000_000 * 10**9
SLACK = 1.1  # the lines may grow a tenth faster than the input (a constant part shrinks, nothing grows faster)


def _write(folder: Path, rank: int, config: dict, status: dict, entries: list[dict]) -> None:
    """One rank's dump as torch's recorder writes it: a pickle of plain data, protocol 2."""
    folder.mkdir(exist_ok=True)
    dump = {"version": "2.10", "pg_config": config, "pg_status": status, "entries": entries}
    (folder / f"nccl_trace_rank_{rank}").write_bytes(pickle.dumps(dump, protocol=2))


def one_group_per_entry(folder: Path, groups: int) -> Path:
    """Two ranks; pg_config lists ``groups`` groups of ranks 0 and 1, named "1" … str(groups). Rank 0 entered
    all_reduce #1 of each, a microsecond apart from the last group to the first (group str(groups) first, at T0),
    and waits in every one (pg_status: last enqueued 1, last completed -1: none); rank 1 entered none (an empty
    buffer, which never wrapped), so it is missing from all of them and waits in no other."""
    names = [str(g) for g in range(groups, 0, -1)]  # in the order rank 0 entered them
    config = {name: {"name": name, "desc": f"tp{name}", "ranks": "[0, 1]"} for name in names}
    entered = [
        {**_entry(1, "nccl:all_reduce", group=(name, f"tp{name}"), created=T0 + 1000 * i), "record_id": i}
        for i, name in enumerate(names)
    ]
    status = {
        name: {"last_enqueued_collective": 1, "last_started_collective": -1, "last_completed_collective": -1}
        for name in names
    }
    _write(folder, 0, config, status, entered)
    _write(folder, 1, config, {}, [])
    return folder


def every_pair(folder: Path, ranks: int) -> Path:
    """``ranks`` ranks of the default group; rank r, for each other rank q in order, sends to q then receives from
    q (NCCL names each op's pair: "nccl:send 0->3"), except that the last rank never posts its recv from rank 0."""
    config = {"0": {"name": "0", "desc": "default_pg", "ranks": str(list(range(ranks)))}}
    for rank in range(ranks):
        ops = []
        for peer in (q for q in range(ranks) if q != rank):
            ops.append(f"nccl:send {rank}->{peer}")
            if not (rank == ranks - 1 and peer == 0):
                ops.append(f"nccl:recv {peer}->{rank}")
        entries = [{**_entry(0, op, p2p_seq=i + 1), "record_id": i} for i, op in enumerate(ops)]
        _write(folder, rank, config, {}, entries)
    return folder


def traced(folder: Path) -> tuple[dict, list[dict], int]:
    """The job's summary and findings, and the trace events (calls, lines, returns) the analysis ran; reading
    the dumps is not counted."""
    dumps = sorted((read_dump(p) for p in dump_files([str(folder)])), key=lambda d: d.rank)
    check_one_job(dumps)
    events = 0

    def count(frame, event, arg):
        nonlocal events
        events += 1
        return count

    before = sys.gettrace()
    sys.settrace(count)
    try:
        ranks, summary = analyse(dumps)
        findings = hang_findings(summary, ranks)
    finally:
        sys.settrace(before)
    return summary.to_meta(), findings, events


@pytest.mark.slow
def test_one_group_per_entry_costs_work_in_proportion_to_the_groups_and_names_the_first_entered(tmp_path):
    work = {}
    for groups in (10_000, 40_000):
        meta, findings, work[groups] = traced(one_group_per_entry(tmp_path / str(groups), groups))
        s = meta["stuck"]
        # rank 1 is missing everywhere and waits nowhere: every group is a cause; the one entered first is the
        # last group, at T0
        assert (s["group"], s["group_desc"], s["op"], s["seq_id"]) == (str(groups), f"tp{groups}", "all_reduce", 1)
        assert (s["ranks_missing"], s["ranks_waiting"], s["first_created_ns"]) == ([1], [0], T0)
        assert len(meta["disagreements"]) == groups and len(s["behind"]) == groups - 1
        text = findings[0].text
        assert text.startswith(f"rank 1 never entered all_reduce #1 of group {groups} (tp{groups})")
        # the three entered next are named, the rest counted: the text stays a sentence
        named = [f"rank 0 waits behind it in all_reduce #1 of group {g} (tp{g})" for g in (groups - 1, groups - 3)]
        assert all(n in text for n in named) and "behind it in all_reduce #1 of group 1 (" not in text
        assert text.endswith(f"; {groups - 4:,} more collectives of other groups wait behind it")
    assert work[40_000] <= 4 * SLACK * work[10_000], work  # comparing every pair of groups: 16×


def test_every_rank_sending_to_every_other_costs_work_in_proportion_to_the_entries(tmp_path):
    work, entries = {}, {}
    for ranks in (20, 40):
        meta, findings, work[ranks] = traced(every_pair(tmp_path / str(ranks), ranks))
        entries[ranks] = 2 * ranks * (ranks - 1) - 1  # a send and a recv per ordered pair, less the one recv
        s, last = meta["stuck"], ranks - 1
        # rank 0's send to the last rank is its op 2 × (ranks - 2) + 1: a send and a recv for each rank before it
        assert (s["kind"], s["op"], s["peer"], s["seq_id"]) == ("p2p", "send", [0, last], 2 * (ranks - 2) + 1)
        assert (s["ranks_missing"], s["ranks_waiting"]) == ([last], [0])
        assert findings[0].text.startswith(f"rank {last} never posted the recv for rank 0's send #")
    # each pair's sends looked for among all of the rank's ops: about 8×, twice the entries' growth
    assert work[40] <= entries[40] / entries[20] * SLACK * work[20], (work, entries)


def test_the_command_prints_ten_other_disagreements_and_counts_the_rest(tmp_path, data_dir):
    out = bounded_cli("hang", str(one_group_per_entry(tmp_path / "15", 15)), "--no-save")
    assert out.code == 0, out.stderr[-2000:]
    also = [line for line in out.stdout.splitlines() if line.startswith("also: ")]
    # after the stuck group 15, in the order rank 0 entered them: groups 14 … 5, then 4 … 1 counted
    assert also == [f"also: group '{g}' disagrees at all_reduce #1" for g in range(14, 4, -1)] + [
        "also: 4 more groups disagree (--json lists every one)"
    ]

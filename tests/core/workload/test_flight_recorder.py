"""A hung job's flight-recorder dumps (``hang DIR``): real dumps of small gloo jobs on CPU that hang
(tests/data/flight_recorder/README.md), each set built so that one known rank stops the job at a known collective;
the finding must name that rank, the sequence id and the mismatch, in both the pickle and the JSON form, and agree
with torch's own analyser (``fr_trace``) where it runs. Hostile and ill-assorted files are refused, storing nothing.
"""

from __future__ import annotations

import json
import pickle
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from core.errors import ConfigError
from core.experiment import config_from_dict, drive
from core.experiments.flight_recorder import FlightRecorderConfig, run
from core.limits import LIMITS
from tests.conftest import ROOT
from tests.core.workload.fr_trace_input import with_members
from tests.core.workload.test_hostile_files import bounded_cli, refused

DATA = ROOT / "tests" / "data" / "flight_recorder"
FORMS = ("", "_json")  # the pickle dumps, and the same ranks' JSON dumps
# What each set was built to show (generate.py): the rank that stops the job at the 4th all_reduce of the
# default group, and how; the other ranks were left waiting in it.
BUILT = {
    "skipped_rank": {"missing": [3], "waiting": [0, 1, 2], "mismatched": {}},
    "desync_op": {"missing": [], "waiting": [0, 2], "mismatched": {1: ("op", "broadcast", [[4, 8]], ["Float"])}},
    "desync_size": {"missing": [], "waiting": [0, 2], "mismatched": {1: ("sizes", "all_reduce", [[4, 16]], ["Float"])}},
    "desync_dtype": {"missing": [], "waiting": [0, 2], "mismatched": {1: ("dtypes", "all_reduce", [[4, 8]], ["Double"])}},
}  # fmt: skip


# Rank 1's JSON dump of skipped_rank was taken after gloo had ended its all_reduce (with an error, once rank 3
# left): its pg_status says last_completed_collective "4", so the JSON set has ranks 0 and 2 waiting, rank 1 done.
BUILT_JSON = {**BUILT, "skipped_rank": {**BUILT["skipped_rank"], "waiting": [0, 2], "completed": [1]}}


def imported(*paths: Path) -> tuple[list[dict], dict]:
    cfg = config_from_dict(FlightRecorderConfig, {"paths": [str(p) for p in paths]})
    out, _ = drive(run(cfg, None))  # type: ignore[arg-type]  # the experiment reads no context
    return list(out.rows), out.meta


@pytest.mark.parametrize("form", FORMS, ids=["pickle", "json"])
@pytest.mark.parametrize("name", list(BUILT))
def test_each_set_names_the_rank_the_sequence_id_and_the_mismatch(name, form):
    rows, meta = imported(DATA / f"{name}{form}")
    built, s = (BUILT_JSON if form else BUILT)[name], meta["stuck"]
    assert (s["group"], s["group_desc"], s["seq_id"], s["op"]) == ("0", "default_pg", 4, "all_reduce")
    assert s["sizes"] == [[4, 8]] and s["dtypes"] == ["Float"] and s["bytes"] == 4 * 8 * 4  # 32 floats of 4 bytes
    assert s["ranks_missing"] == built["missing"] and s["ranks_waiting"] == built["waiting"]
    assert s["ranks_completed"] == built.get("completed", [])
    got = {m["rank"]: (m["differs_in"], m["op"], m["sizes"], m["dtypes"]) for m in s["ranks_mismatched"]}
    assert got == built["mismatched"]
    ranks = {r["rank"]: r for r in rows}
    for rank in built["waiting"]:
        assert (ranks[rank]["state"], ranks[rank]["last_completed_seq"], ranks[rank]["last_entered_seq"]) == (
            "waiting",
            3,
            4,
        )
    for rank in built["missing"]:  # it completed the three before and never entered the fourth
        assert (ranks[rank]["state"], ranks[rank]["last_completed_seq"], ranks[rank]["last_entered_seq"]) == (
            "missing",
            3,
            3,
        )
    finding = meta["findings"][0]
    assert finding["kind"] == "hang" and finding["value"] == len(built["missing"]) + len(built["mismatched"])
    for rank in built["missing"]:
        assert finding["text"].startswith(f"rank {rank} never entered all_reduce #4 of the default group (128 B Float")
    for rank, (differs, op, sizes, _) in built["mismatched"].items():
        assert finding["text"].startswith(f"rank {rank} entered {op} ")
        assert f"a desync, other {differs}" in finding["text"]
        assert f"shape {'×'.join(map(str, sizes[0]))})" in finding["text"]  # [[4, 16]] reads "shape 4×16"


def test_the_skipped_rank_is_said_with_what_it_did_instead_and_where():
    _, meta = imported(DATA / "skipped_rank")
    text = meta["findings"][0]["text"]
    assert "ranks 0–2 entered it between" in text and "were still waiting at the dump" in text
    # rank 3's last collective was the third all_reduce, called from the loop of generate.py's main
    assert "rank 3's last collective was all_reduce #3, entered from " in text
    assert re.search(r"entered from \S*generate\.py:\d+ main", text)
    assert meta["grid"]["seqs"] == [1, 2, 3, 4]
    assert meta["grid"]["cells"][3] == ["completed", "completed", "completed", "missing"]
    assert meta["grid"]["cells"][0] == ["completed", "completed", "completed", "waiting"]


def test_a_job_that_did_not_hang_says_so():
    for form in FORMS:
        rows, meta = imported(DATA / f"no_hang{form}")
        assert meta["stuck"] is None and meta["findings"][0]["kind"] == "no_hang"
        assert {(r["last_completed_seq"], r["last_entered_seq"]) for r in rows} == {(4, 4)}


def test_the_second_group_is_matched_on_its_own():
    _, meta = imported(DATA / "skipped_rank")
    pair = next(g for g in meta["groups"] if g["desc"] == "pair")
    assert pair["ranks"] == [0, 1] and pair["collectives"] == 1  # one all_reduce of ranks 0 and 1, agreed
    assert len(meta["disagreements"]) == 1


FR_TRACE = "torch.distributed.flight_recorder.fr_trace"


def fr_trace(folder: Path, tmp_path: Path, groups: dict[str, tuple[str, list[int]]], *args: str) -> str:
    """torch's analyser on a copy of the dumps with the groups' members filled in (name → (desc, ranks)):
    gloo writes no members, on which fr_trace stops with a KeyError."""
    out = with_members(folder, tmp_path / f"{folder.name}_for_fr_trace", groups)
    done = subprocess.run(
        [sys.executable, "-m", FR_TRACE, str(out), *args], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    return done.stdout + done.stderr


def _fr_trace(folder: Path, tmp_path: Path) -> str:
    """The members are the ranks generate.py put in each group."""
    world = len(list(folder.iterdir()))
    return fr_trace(folder, tmp_path, {"0": ("default_pg", list(range(world))), "1": ("pair", [0, 1])})


@pytest.mark.parametrize("name", list(BUILT))
def test_torchs_own_analyser_agrees(name, tmp_path):
    pytest.importorskip("torch.distributed.flight_recorder.fr_trace")
    report = _fr_trace(DATA / name, tmp_path)
    _, meta = imported(DATA / name)
    s = meta["stuck"]
    assert f"sequence number: {s['seq_id']}" in report, report[-3000:]
    if s["ranks_missing"]:
        assert f"missing ranks: {set(s['ranks_missing'])}" in report, report[-3000:]
    kinds = {
        "op": "COLLECTIVE_TYPE_MISMATCH",
        "sizes": "SIZE_OR_SYNTAX_MISMATCH",
        "dtypes": "COLLECTIVE_DTYPE_MISMATCH",
    }
    if s["ranks_mismatched"]:
        # fr_trace takes the first rank it reads as its reference and names the others as culprits: the same
        # split of the ranks into two sides, and the same kind of mismatch
        culprits = {int(r) for r, _ in re.findall(r"Culprit rank (\d+); Error type: (\w+)", report)}
        types = {t for _, t in re.findall(r"Culprit rank (\d+); Error type: (\w+)", report)}
        expected = {int(r) for r in re.search(r"expected ranks: \{([\d, ]+)\}", report).group(1).split(",")}
        ours = {m["rank"] for m in s["ranks_mismatched"]}
        assert {frozenset(culprits), frozenset(expected - culprits)} == {frozenset(ours), frozenset(expected - ours)}
        assert types == {kinds[m["differs_in"]] for m in s["ranks_mismatched"]}, report[-3000:]


def test_hang_json_prints_stuck_ranks_and_findings_and_exits_0(data_dir):
    out = bounded_cli("hang", str(DATA / "skipped_rank"), "--json")
    assert out.code == 0, out.stderr[-2000:]
    doc = json.loads(out.stdout)
    stuck = doc["stuck"]
    assert {k: stuck[k] for k in ("group", "seq_id", "op", "sizes", "ranks_missing", "ranks_waiting")} == {
        "group": "0",
        "seq_id": 4,
        "op": "all_reduce",
        "sizes": [[4, 8]],
        "ranks_missing": [3],
        "ranks_waiting": [0, 1, 2],
    }
    assert stuck["ranks_mismatched"] == []
    assert [(r["rank"], r["last_completed_seq"], r["last_entered_seq"], r["state"]) for r in doc["ranks"]] == [
        (0, 3, 4, "waiting"),
        (1, 3, 4, "waiting"),
        (2, 3, 4, "waiting"),
        (3, 3, 3, "missing"),
    ]
    assert doc["findings"][0]["kind"] == "hang" and doc["stored"]
    from core.store import RunStore

    assert RunStore().find(doc["run_id"]).experiment == "flight-recorder"
    # the history's one-line summary counts the ranks (the naming rules picked "min last_created_ns 17957…")
    assert [s.headline for s in RunStore().summaries()] == ["4 ranks"]


def test_hang_exits_1_without_a_hang_and_prints_the_diagnosis_first(data_dir):
    out = bounded_cli("hang", str(DATA / "no_hang"), "--no-save")
    assert out.code == 1, out.stderr[-2000:]
    assert out.stdout.splitlines()[1].startswith("finding: the dumps show no hang")
    out = bounded_cli("hang", str(DATA / "desync_op"), "--no-save")
    assert out.code == 0 and out.stdout.splitlines()[1].startswith("finding: rank 1 entered broadcast")


# -- hand-built dumps: what the gloo sets cannot show ----------------------------------------------------------


def _entry(rank_seq: int, name: str, group=("0", "default_pg"), p2p_seq: int = 0, created: int = 0, **more) -> dict:
    return {
        "record_id": rank_seq + p2p_seq, "pg_id": int(group[0]), "process_group": group,
        "collective_seq_id": rank_seq, "p2p_seq_id": p2p_seq, "op_id": rank_seq + p2p_seq, "profiling_name": name,
        "time_created_ns": created or 1_700_000_000_000_000_000 + 1_000_000 * (rank_seq + p2p_seq),
        "input_sizes": [[1024]], "input_dtypes": ["BFloat16"], "output_sizes": [[1024]], "output_dtypes": ["BFloat16"],
        "state": "scheduled", "time_discovered_started_ns": None, "time_discovered_completed_ns": None,
        "retired": False, "timeout_ms": 600_000, "is_p2p": p2p_seq > 0, "frames": [], **more,
    }  # fmt: skip


def _write(folder: Path, rank: int, entries: list[dict], completed: int, enqueued: int, world: int = 2) -> None:
    folder.mkdir(exist_ok=True)
    dump = {
        "version": "2.10",
        "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": str(list(range(world)))}},
        "pg_status": {
            "0": {
                "last_enqueued_collective": enqueued,
                "last_started_collective": -1,
                "last_completed_collective": completed,
            }
        },  # fmt: skip
        "entries": entries,
    }
    (folder / f"nccl_trace_rank_{rank}").write_bytes(pickle.dumps(dump))


def test_a_send_without_its_recv_names_the_peer(tmp_path):
    folder = tmp_path / "p2p"
    _write(folder, 0, [_entry(0, "nccl:send 0->1", p2p_seq=1)], completed=0, enqueued=0)
    _write(folder, 1, [], completed=0, enqueued=0)
    _, meta = imported(folder)
    s = meta["stuck"]
    assert (s["kind"], s["op"], s["seq_id"], s["peer"], s["ranks_missing"], s["ranks_waiting"]) == (
        "p2p", "send", 1, [0, 1], [1], [0],
    )  # fmt: skip
    assert meta["findings"][0]["text"].startswith("rank 1 never posted the recv for rank 0's send #1 (0→1)")


def test_a_wrapped_buffer_is_said_and_the_newer_collectives_still_read(tmp_path):
    folder = tmp_path / "wrapped"
    # rank 0 kept collectives 5–8 of 8 (its buffer wrapped), waiting in 8; rank 1 kept 1–7 and never entered 8
    _write(folder, 0, [_entry(s, "nccl:all_reduce") for s in range(5, 9)], completed=7, enqueued=8)
    _write(folder, 1, [_entry(s, "nccl:all_reduce") for s in range(1, 8)], completed=7, enqueued=7)
    rows, meta = imported(folder)
    s = meta["stuck"]
    assert (s["seq_id"], s["ranks_missing"], s["ranks_waiting"]) == (8, [1], [0])
    assert s["bytes"] == 1024 * 2  # 1,024 bf16 elements
    assert meta["wrapped_ranks"] == [0]
    wrapped = next(f for f in meta["findings"] if f["kind"] == "wrapped")
    assert "the buffer of rank 0 wrapped: collectives before #5" in wrapped["text"]
    assert meta["grid"]["cells"][0][:4] == ["completed"] * 4  # below last_completed_collective 7: completed


def test_a_rank_without_a_dump_is_said_not_guessed(tmp_path):
    folder = tmp_path / "three_of_four"
    for rank in range(3):
        _write(folder, rank, [_entry(s, "nccl:all_reduce") for s in (1, 2)], completed=1, enqueued=2, world=4)
    rows, meta = imported(folder)
    assert meta["ranks_without_dump"] == [3] and meta["world_size"] == 4
    assert any(f["kind"] == "ranks_without_dump" and "no dump from rank 3" in f["text"] for f in meta["findings"])


# -- bad input: refused, naming the problem, nothing stored ----------------------------------------------------


def test_a_pickle_that_loads_a_class_is_refused(tmp_path, data_dir):
    folder = tmp_path / "evil"
    folder.mkdir()
    (folder / "rank0").write_bytes(pickle.dumps({"version": "2.10", "entries": [Path("/etc/passwd")]}))
    refused(folder, data_dir, "rank0: the flight-recorder dump was refused: it names the class", kind="hang")


def test_a_memory_bomb_is_refused_before_it_is_built(tmp_path, data_dir):
    folder = tmp_path / "bomb"
    folder.mkdir()
    (folder / "rank0").write_bytes(b"\x80\x04N" + b"r" + (1 << 28).to_bytes(4, "little") + b".")  # memo 2^28
    refused(folder, data_dir, f"the limit is {LIMITS.pickle_memo_index:,} slots", kind="hang")


def test_a_truncated_dump_is_refused(tmp_path, data_dir):
    folder = tmp_path / "cut"
    shutil.copytree(DATA / "skipped_rank", folder)
    raw = (folder / "rank2").read_bytes()
    (folder / "rank2").write_bytes(raw[: len(raw) // 2])
    refused(folder, data_dir, "rank2: the flight-recorder dump ends early: it is truncated", kind="hang")
    (folder / "rank2").write_text('{"version": "2.10", "entries": [')
    refused(folder, data_dir, "rank2: the flight-recorder dump is not valid JSON", kind="hang")


def test_a_folder_of_1000_files_is_refused_before_any_is_read(tmp_path, data_dir):
    folder = tmp_path / "many"
    folder.mkdir()
    for i in range(1000):
        (folder / f"rank{i}").write_bytes(b"")
    refused(folder, data_dir, f"more than {LIMITS.rank_files} files (the rank_files limit)", kind="hang")


def test_ranks_of_two_jobs_are_refused(tmp_path, data_dir):
    # rank 3 of the skipped-rank job beside ranks 0-2 of the no-hang job, recorded minutes later: ranks of one
    # job wait for each other, so their buffers cannot lie further apart than the 60 s timeout
    folder = tmp_path / "two_jobs"
    folder.mkdir()
    for r in range(3):
        shutil.copy(DATA / "no_hang" / f"rank{r}", folder)
    shutil.copy(DATA / "skipped_rank" / "rank3", folder)
    with pytest.raises(
        ConfigError,
        match=r"ranks of two different jobs: group '' .* ranks \[0, 1, 2\] in rank2, .*\[0, 1, 2, 3\] in rank3",
    ):
        imported(folder)
    refused(folder, data_dir, "ranks of two different jobs", kind="hang")
    # NCCL dumps list each group's ranks: a 2-rank job's default group beside a 4-rank job's
    other = tmp_path / "other"
    _write(other, 0, [_entry(1, "nccl:all_reduce")], completed=1, enqueued=1, world=2)
    _write(other, 1, [_entry(1, "nccl:all_reduce")], completed=1, enqueued=1, world=4)
    with pytest.raises(ConfigError, match=r"group '0' is 'default_pg' of ranks \[0, 1\] in nccl_trace_rank_0"):
        imported(other)
    # two ranks whose buffers lie two hours apart with a 10-minute timeout (600,000 ms)
    later = tmp_path / "later"
    hour = 3600 * 10**9
    _write(later, 0, [_entry(1, "nccl:all_reduce", created=1_700_000_000 * 10**9)], completed=1, enqueued=1)
    _write(later, 1, [_entry(1, "nccl:all_reduce", created=1_700_000_000 * 10**9 + 2 * hour)], completed=1, enqueued=1)
    with pytest.raises(
        ConfigError, match=r"nccl_trace_rank_0's last entry was recorded 7,200 s before nccl_trace_rank_1's"
    ):
        imported(later)


def test_one_rank_twice_and_names_without_a_rank_are_refused(tmp_path):
    folder = tmp_path / "twice"
    folder.mkdir()
    shutil.copy(DATA / "skipped_rank" / "rank0", folder / "rank0")
    shutil.copy(DATA / "skipped_rank_json" / "rank0.json", folder / "rank0.json")
    with pytest.raises(ConfigError, match="are both rank 0"):
        imported(folder)
    shutil.copy(DATA / "skipped_rank" / "rank0", tmp_path / "notes")
    with pytest.raises(ConfigError, match="notes: no rank in the name"):
        imported(tmp_path / "notes")


def test_an_example_opens_labelled_recorded_by_this_lab(data_dir):
    out = bounded_cli("hang", "--example", "hang-skipped-rank", "--json", "--no-save")
    assert out.code == 0, out.stderr[-2000:]
    doc = json.loads(out.stdout)
    assert doc["example"]["label"].startswith("recorded by this lab: a gloo job on CPU")
    assert doc["stuck"]["ranks_missing"] == [3] and not doc["stored"]
    out = bounded_cli("hang", "--example", "no-such-set")
    assert out.code == 2 and "no dump set is called 'no-such-set'" in out.stderr


def test_an_older_dump_without_status_dtypes_or_p2p_flags_leaves_them_unknown(tmp_path):
    """A 2.x dump before pg_status, input_dtypes and is_p2p: completion from the entries' own state (NCCL's
    watchdog marks them), bytes not guessed without a dtype."""
    folder = tmp_path / "old"
    folder.mkdir()
    for rank, seqs in ((0, (1, 2, 3)), (1, (1, 2))):
        entries = []
        for s in seqs:
            e = _entry(s, "nccl:all_reduce", state="completed" if s < 3 else "started")
            for key in ("input_dtypes", "output_dtypes", "is_p2p", "thread_id", "thread_name"):
                e.pop(key, None)
            entries.append(e)
        dump = {"version": "2.2", "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}}}
        (folder / f"nccl_trace_rank_{rank}").write_bytes(pickle.dumps({**dump, "entries": entries}))
    rows, meta = imported(folder)
    s = meta["stuck"]
    assert (s["seq_id"], s["ranks_missing"], s["ranks_waiting"], s["dtypes"], s["bytes"]) == (3, [1], [0], [], None)
    assert [(r["last_completed_seq"], r["last_entered_seq"]) for r in rows] == [(2, 3), (2, 2)]
    assert "dtype not recorded" in meta["findings"][0]["text"] and meta["version"] == "2.2"


def test_a_gzip_of_a_json_bomb_is_refused_within_bounds(tmp_path, data_dir, monkeypatch):
    """Its objects are counted as it inflates (the inflate ratio, which refuses it first, raised past it here)."""
    import gzip

    from core.limits import LIMITS_ENV

    monkeypatch.setenv(LIMITS_ENV, "inflate_ratio=10000")
    folder = tmp_path / "bomb"
    folder.mkdir()
    with gzip.open(folder / "rank0.json.gz", "wb", compresslevel=9) as fh:
        fh.write(b'{"version": "2.10", "entries": ')
        for _ in range(256):
            fh.write(b"[{}," * (1 << 18))  # 256 MiB of objects and lists
    assert (folder / "rank0.json.gz").stat().st_size < 4 << 20
    refused(folder, data_dir, "JSON objects and lists, more than the 4,000,000 limit", kind="hang")


def test_a_dump_that_is_not_a_dump_is_refused_naming_the_file(tmp_path, data_dir):
    folder = tmp_path / "odd"
    folder.mkdir()
    (folder / "rank0.json").write_text('{"traceEvents": []}')
    refused(folder, data_dir, "rank0.json: not a flight-recorder dump: no version", kind="hang")


@pytest.mark.slow
def test_a_live_gloo_job_that_skips_a_collective_is_named(tmp_path):
    """generate.py run here: 4 gloo ranks, rank 3 never entering the 4th all_reduce (~30 s of CPU on 2 cores)."""
    pytest.importorskip("torch.distributed")
    out = tmp_path / "live"
    out.mkdir()
    procs = [
        subprocess.Popen(
            [sys.executable, str(DATA / "generate.py"), "--rank", str(r), "4", "29613", str(out),
             "skip"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        for r in range(4)
    ]  # fmt: skip
    for p in procs:
        p.wait(timeout=300)
    _, meta = imported(*sorted(p for p in out.iterdir() if p.is_file()))
    s = meta["stuck"]
    assert (s["seq_id"], s["op"], s["ranks_missing"], s["ranks_waiting"]) == (4, "all_reduce", [3], [0, 1, 2])


def test_dumps_of_two_names_are_refused_before_any_is_read(tmp_path):
    folder = tmp_path / "names"
    folder.mkdir()
    shutil.copy(DATA / "no_hang" / "rank0", folder / "nccl_trace_rank_0")
    (folder / "other_1").write_bytes(b"\x80\x04N" + b"r" + (1 << 28).to_bytes(4, "little") + b".")  # never read
    with pytest.raises(ConfigError, match=r"dumps of more than one name .*nccl_trace_rank_: nccl_trace_rank_0; other_"):
        imported(folder)


def test_of_two_groups_that_disagree_the_one_entered_first_stopped_the_job(tmp_path):
    folder = tmp_path / "two_groups"
    t0 = 1_700_000_000 * 10**9
    tp = ("1", "tp")
    # group "1" (ranks 0, 1): rank 1 never entered its #2, which rank 0 entered at t0 + 5 s; the default group's
    # #3, entered by rank 0 at t0 + 9 s, waits behind it (rank 1 never got there either)
    rank0 = [
        _entry(1, "nccl:all_reduce", created=t0 + 10**9),
        _entry(2, "nccl:all_reduce", created=t0 + 2 * 10**9),
        _entry(1, "nccl:all_gather", group=tp, created=t0 + 3 * 10**9),
        _entry(2, "nccl:all_gather", group=tp, created=t0 + 5 * 10**9),
        _entry(3, "nccl:all_reduce", created=t0 + 9 * 10**9),
    ]
    rank1 = rank0[:3]
    for rank, entries in ((0, rank0), (1, rank1)):
        dump = {
            "version": "2.10",
            "pg_config": {
                "0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"},
                "1": {"name": "1", "desc": "tp", "ranks": "[0, 1]"},
            },
            "entries": [{**e, "record_id": i} for i, e in enumerate(entries)],
        }
        folder.mkdir(exist_ok=True)
        (folder / f"nccl_trace_rank_{rank}").write_bytes(pickle.dumps(dump))
    _, meta = imported(folder)
    s = meta["stuck"]
    assert (s["group"], s["group_desc"], s["op"], s["seq_id"], s["ranks_missing"]) == ("1", "tp", "all_gather", 2, [1])
    assert [(d["group"], d["seq_id"]) for d in meta["disagreements"]] == [("1", 2), ("0", 3)]
    assert meta["findings"][0]["text"].startswith(
        "rank 1 never entered all_gather #2 of group 1 (tp) (2.0 KiB BFloat16"
    )
    # no pg_status and no entry marked completed: rank 0 entered it, whether it was still inside is not recorded
    assert s["ranks_entered"] == [0] and s["ranks_waiting"] == []
    assert "rank 0 entered it too (the dumps record no completion)" in meta["findings"][0]["text"]

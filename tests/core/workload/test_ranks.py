"""Every rank of a job (``trace DIR``): two real ranks of one 128-rank job recorded on A100s (HolisticTraceAnalysis'
``tests/data/trace_filter``, tests/data/workload/README.md) against a straggler computed by hand in this test and
against HolisticTraceAnalysis; bad sets of files refused, naming the problem, storing nothing; findings."""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("msgspec")  # reading a trace decodes it with msgspec (core/workload/trace/file.py)

from core.errors import ConfigError
from core.experiment import config_from_dict, drive
from core.experiments.profiler_trace_ranks import ProfilerTraceRanksConfig, run
from core.workload.findings import snapshot_findings, to_store, trace_findings
from core.workload.trace.timeline import analyse_trace, read_trace
from tests.conftest import ROOT
from tests.core.workload.test_hostile_files import bounded_cli, files_under

DATA = ROOT / "tests" / "data" / "workload"
RANK0, RANK1 = DATA / "hta_recsys_sampled_rank0.json.gz", DATA / "hta_recsys_sampled_rank1.json.gz"
HTA_VENV = Path("/tmp/htavenv/bin/python")
# HolisticTraceAnalysis 0.5.0 on both files as rank-0/rank-1.json.gz in one folder (README):
# get_temporal_breakdown (include_last_profiler_step=True) and get_comm_comp_overlap, per rank.
HTA_RANKS = {
    0: {"idle_us": 675_191.0, "compute_us": 210_320.0, "span_us": 1_222_847.0, "overlap_pct": 14.95},
    1: {"idle_us": 651_136.0, "compute_us": 271_973.0, "span_us": 1_231_186.0, "overlap_pct": 19.93},
}


def imported(*paths) -> tuple[list[dict], dict]:
    cfg = config_from_dict(ProfilerTraceRanksConfig, {"paths": [str(p) for p in paths]})
    out, _ = drive(run(cfg, None))  # type: ignore[arg-type]  # the experiment reads no context
    return list(out.rows), out.meta


def rank_rows(rows: list[dict]) -> dict[int, dict]:
    return {r["rank"]: r for r in rows if r["kind"] == "rank"}


def hand_compute_us(path: Path) -> float:
    """The union of a rank's compute kernels (kernel events whose name is no collective), by a plain loop."""
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    spans = sorted(
        (float(e["ts"]), float(e["ts"]) + float(e["dur"]))
        for e in events
        if e.get("ph") == "X" and e.get("cat") == "kernel" and "nccl" not in e["name"].lower()
    )
    total, (lo, hi) = 0.0, spans[0]
    for s, e in spans[1:]:
        if s > hi:
            total, lo, hi = total + hi - lo, s, e
        else:
            hi = max(hi, e)
    return total + hi - lo


EMBEDDING = ("embedding", "permute_pooled_embs", "bounds_check_indices", "linearize_index")  # the group's rule


def hand_kernel_us(path: Path, words: tuple[str, ...]) -> float:
    """The summed durations of the kernel events whose lower-cased name holds one of ``words``."""
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    kernels = (e for e in events if e.get("ph") == "X" and e.get("cat") == "kernel")
    return sum(float(e["dur"]) for e in kernels if any(w in e["name"].lower() for w in words))


@pytest.fixture(scope="module")
def two_ranks():
    return imported(RANK0, RANK1)


def test_the_straggler_and_its_margin_equal_a_hand_computation(two_ranks):
    rows, meta = two_ranks
    compute = {0: hand_compute_us(RANK0), 1: hand_compute_us(RANK1)}
    worst = max(compute, key=lambda r: compute[r])
    assert worst == 1 and compute == {0: 210_320.0, 1: 271_973.0}
    s = meta["straggler"]
    assert meta["straggler_rank"] == s["rank"] == worst
    # against the other rank, never a median the straggler takes part in (that halved the margin: +12.8%, 30.8 ms)
    assert s["median_compute_us"] == compute[0] == 210_320
    assert s["margin_us"] == compute[1] - compute[0] == 61_653
    assert s["margin_pct"] == pytest.approx(100 * 61_653 / 210_320)  # 29.31…%
    assert meta["findings"][0]["kind"] == "straggler"
    assert meta["findings"][0]["text"].startswith(
        "rank 1 holds the job back: its compute is +29.3% over the other rank's (272.0 ms against 210.3 ms)"
    )
    # where the extra time goes: the embedding lookups' summed durations, rank 1 against rank 0
    embedding = {0: hand_kernel_us(RANK0, EMBEDDING), 1: hand_kernel_us(RANK1, EMBEDDING)}
    assert embedding == {0: 85_903.0, 1: 140_405.0}
    top = s["groups"][0]
    assert top["group"] == "embedding" and top["extra_us"] == 140_405 - 85_903 == 54_502
    assert "; by kernel group, embedding +54.5 of +61.7 ms" in meta["findings"][0]["text"]


def test_each_rank_agrees_with_holistic_trace_analysis(two_ranks):
    rows, meta = two_ranks
    ranks = rank_rows(rows)
    assert meta["ranks"] == [0, 1] and meta["world_size"] == 128 and meta["backend"] == "nccl"
    for rank, hta in HTA_RANKS.items():
        r = ranks[rank]
        assert (
            r["idle_us"] == hta["idle_us"] and r["compute_us"] == hta["compute_us"] and r["span_us"] == hta["span_us"]
        )
        overlap = 100 * r["compute_and_communication_us"] / r["communication_us"]
        assert round(overlap, 2) == hta["overlap_pct"]
        assert r["exposed_communication_us"] == r["communication_us"] - r["compute_and_communication_us"]
    steps = {(r["rank"], r["step"]) for r in rows if r["kind"] == "step"}
    assert steps == {(0, 551), (0, 552), (1, 551), (1, 552)} and meta["common_steps"] == [551, 552]
    # idle by cause: HTA's per-stream sums for rank 1 (README), and the device's own, which add up to its idle
    r = ranks[1]
    hta = (r["host_wait_summed_over_streams_us"], r["kernel_wait_summed_over_streams_us"])
    assert hta + (r["other_wait_summed_over_streams_us"],) == (3_461_650, 3_626, 679_096)
    assert r["host_wait_us"] == device_host_wait(RANK1)
    assert r["host_wait_us"] + r["kernel_wait_us"] + r["other_wait_us"] == r["idle_us"] == 651_136


def test_each_rank_says_what_its_host_did_while_its_gpu_idled(two_ranks):
    """Each rank's idle by the host's cause, against the loop over the file's own events that checks a single
    trace (tests/core/workload/test_host_gaps.py); the causes add up to HTA's idle time of that rank."""
    from tests.core.workload.test_host_gaps import reference
    from tests.core.workload.traces import trace_events

    rows, _ = two_ranks
    for rank, path in ((0, RANK0), (1, RANK1)):
        mine = [r for r in rows if r["kind"] == "host_gap" and r["rank"] == rank]
        got = {r["cause"]: r["time_us"] for r in mine}
        device = rank_rows(rows)[rank]["device"]
        assert got == pytest.approx(reference(trace_events(path, exact=True), device), abs=1e-6)
        assert sum(got.values()) == pytest.approx(HTA_RANKS[rank]["idle_us"], abs=1e-6)
        optimizer = next(r for r in mine if r["cause"] == "optimizer")
        assert optimizer["top_op"] == "Optimizer.step#Shampoo.step"


def test_each_rank_s_operators_and_the_straggler_s_extra_time_by_operator(two_ranks):
    """Each rank's operators against the attribution written from the file's own events that checks a single
    trace (tests/core/workload/test_ops.py), summed over modules; the straggler's extra time per operator is its
    time less the other rank's (an operator a rank lacks counts 0), the five largest."""
    from tests.core.workload.test_ops import reference

    rows, meta = two_ranks
    want: dict[int, dict[str, float]] = {}
    for rank, path in ((0, RANK0), (1, RANK1)):
        per_op: dict[str, float] = {}
        for (op, _), (us, *_) in reference(path, rank_rows(rows)[rank]["device"]).items():
            per_op[op] = per_op.get(op, 0.0) + us
        want[rank] = per_op
        got = {r["op"]: r["gpu_time_us"] for r in rows if r["kind"] == "op" and r["rank"] == rank}
        assert len(got) == 20 and got == pytest.approx({op: per_op[op] for op in got})
        assert min(got.values()) >= sorted(per_op.values(), reverse=True)[19]  # the 20 with the most time
    s = meta["straggler"]
    assert s["rank"] == 1
    ops = set(want[0]) | set(want[1])
    extra = {op: want[1].get(op, 0.0) - want[0].get(op, 0.0) for op in ops}
    assert [o["extra_us"] for o in s["ops"]] == pytest.approx(sorted(extra.values(), reverse=True)[:5])
    assert {o["op"]: o["extra_us"] for o in s["ops"]} == pytest.approx({o["op"]: extra[o["op"]] for o in s["ops"]})
    # the embedding's backward holds most of it: 106,365 − 62,879 = 43,486 µs (the sums above)
    assert s["ops"][0]["op"] == "torch::autograd::CppNode<SplitLookupFunction_rowwise_adagrad_Op>"
    assert (want[0][s["ops"][0]["op"]], want[1][s["ops"][0]["op"]]) == pytest.approx((62_879, 106_365))
    straggler = next(f for f in meta["findings"] if f["kind"] == "straggler")
    assert "by operator, torch::autograd::CppNode<SplitLookupFunction_rowwise_adagrad_Op> +43.5 ms" in straggler["text"]


def test_each_rank_s_steps_say_what_its_host_did_in_their_idle(two_ranks):
    """Each rank's steps carry their idle by the host's cause (CPU-span steps: the causes are the step's idle)."""
    from core.rows.trace import HOST_CAUSES
    from core.rows.trace_ranks import RankTables

    rows, _ = two_ranks
    steps = RankTables.from_rows(rows).steps
    assert len(steps) == 4
    for s in steps:
        assert list(s.window_causes) == list(HOST_CAUSES)
        assert sum(s.window_causes.values()) == pytest.approx(s.extra["idle_us"], abs=1e-6)


@pytest.mark.skipif(not HTA_VENV.exists(), reason="HolisticTraceAnalysis is not installed in /tmp/htavenv")
def test_holistic_trace_analysis_itself_where_installed(two_ranks, tmp_path):
    for rank, path in ((0, RANK0), (1, RANK1)):
        shutil.copy(path, tmp_path / f"rank-{rank}.json.gz")
    script = (
        "import json, sys\nfrom hta.trace_analysis import TraceAnalysis\n"
        "t = TraceAnalysis(trace_dir=sys.argv[1], include_last_profiler_step=True)\n"
        "d = t.get_temporal_breakdown(visualize=False)\n"
        "print(json.dumps({int(r['rank']): [r['idle_time(us)'], r['compute_time(us)']] for _, r in d.iterrows()}))"
    )
    out = subprocess.run([HTA_VENV, "-c", script, tmp_path], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    hta = {int(k): v for k, v in json.loads(out.stdout.strip().splitlines()[-1]).items()}
    ranks = rank_rows(two_ranks[0])
    for rank, (idle, compute) in hta.items():
        assert (ranks[rank]["idle_us"], ranks[rank]["compute_us"]) == (idle, compute)


def test_trace_dir_json_prints_each_rank_and_the_straggler(tmp_path, data_dir):
    folder = tmp_path / "job"
    folder.mkdir()
    shutil.copy(RANK0, folder / "rank-0.json.gz")
    shutil.copy(RANK1, folder / "rank-1.json.gz")
    out = bounded_cli("trace", str(folder), "--json")
    assert out.code == 0, out.stderr[-2000:]
    doc = json.loads(out.stdout)
    assert doc["straggler_rank"] == 1 and doc["stored"]
    got = {r["rank"]: (r["kernel_time_us"], r["idle_us"], r["communication_us"]) for r in doc["ranks"]}
    # kernel time: the sum of kernel durations; idle: HTA's; communication: the union of the NCCL kernels
    assert got[0][1] == HTA_RANKS[0]["idle_us"] and got[1][1] == HTA_RANKS[1]["idle_us"]
    for rank, path in ((0, RANK0), (1, RANK1)):
        events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
        kernels = [e for e in events if e.get("ph") == "X" and e.get("cat") == "kernel"]
        assert got[rank][0] == sum(float(e["dur"]) for e in kernels)
    from core.store import RunStore

    assert RunStore().find(doc["run_id"]).experiment == "profiler-trace-ranks"


def refused_cli(data_dir: Path, reason: str, *paths: Path) -> None:
    before = files_under(data_dir)
    out = bounded_cli("trace", *map(str, paths))
    assert out.code == 2, (out.code, out.stderr[-2000:])
    assert reason in out.stderr and "Traceback" not in out.stderr, out.stderr[-2000:]
    assert not {p for p in files_under(data_dir) - before if not p.startswith("runs.sqlite")}
    if (data_dir / "runs.sqlite").exists():
        from core.store import RunStore

        assert RunStore().count() == 0


def test_a_folder_with_a_file_that_is_no_trace_is_refused_naming_it(tmp_path, data_dir):
    shutil.copy(RANK0, tmp_path / "rank-0.json.gz")
    (tmp_path / "notes.txt").write_text("not a trace\n")
    refused_cli(data_dir, "notes.txt: the profiler trace is not valid JSON", tmp_path)


def test_a_hostile_file_among_good_ranks_is_refused_naming_it(tmp_path, data_dir):
    shutil.copy(RANK0, tmp_path / "rank-0.json.gz")
    shutil.copy(RANK1, tmp_path / "rank-1.json.gz")
    (tmp_path / "rank-2.json").write_text("[" * 100_000 + "]" * 100_000)
    refused_cli(data_dir, "rank-2.json: the profiler trace nests too deeply", tmp_path)


def test_ranks_of_two_different_jobs_are_refused(tmp_path, data_dir):
    other = json.loads(gzip.decompress(RANK1.read_bytes()))
    other["distributedInfo"]["world_size"] = 8  # the same rank file, said to come from an 8-rank job
    (tmp_path / "rank-1.json").write_text(json.dumps(other))
    with pytest.raises(ConfigError, match="ranks of two different jobs: .* world size 128.* world size 8"):
        imported(RANK0, tmp_path / "rank-1.json")
    # a real trace of another job (an A100 excerpt, rank 0 with no world size) beside rank 1 of the 128
    refused_cli(data_dir, "ranks of two different jobs", RANK1, DATA / "hta_a100_backward_excerpt.json")


def test_one_rank_twice_and_disjoint_steps_are_refused(tmp_path):
    shutil.copy(RANK0, tmp_path / "copy.json.gz")
    with pytest.raises(ConfigError, match="both rank 0"):
        imported(RANK0, tmp_path / "copy.json.gz")
    later = json.loads(gzip.decompress(RANK1.read_bytes()))
    for e in later["traceEvents"]:
        if str(e.get("name", "")).startswith("ProfilerStep#"):
            e["name"] = f"ProfilerStep#{int(e['name'].split('#')[1]) + 1000}"
    (tmp_path / "later.json").write_text(json.dumps(later))
    with pytest.raises(ConfigError, match="none in common"):
        imported(RANK0, tmp_path / "later.json")


def test_1000_files_are_refused_before_any_is_read(tmp_path, data_dir):
    folder = tmp_path / "many"
    folder.mkdir()
    for i in range(1000):
        (folder / f"rank-{i}.json").write_text("{}")
    refused_cli(data_dir, "more than 512 files (the rank_files limit)", folder)


def device_host_wait(path) -> float:
    """µs of the device's idle waiting on the host, by a plain loop over the file's events: activities by start
    (of those starting together, the one launched first), the gap before each that starts past every earlier end,
    host wait when its launch call (cuda_runtime, same correlation) began after the gap did."""
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    launch = {e["args"]["correlation"]: e["ts"] for e in events if e.get("cat") == "cuda_runtime" and "args" in e}
    gpu = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    acts = sorted((e["ts"], launch.get(e["args"].get("correlation"), float("inf")), e["ts"] + e["dur"]) for e in gpu)
    host, reach = 0.0, acts[0][2]
    for start, called, end in acts[1:]:
        if start > reach and called > reach:
            host += start - reach
        reach = max(reach, end)
    return host


def test_trace_findings_on_a_real_file_carry_hta_numbers():
    tables, meta = analyse_trace(read_trace(RANK0))
    found = {f.kind: f for f in trace_findings(meta, tables)}
    # HTA: idle 675,191 of a 1,222,847 µs span; idle breakdown host 3,525,804 / kernel 3,966 / other 701,924 µs
    assert found["idle"].value == pytest.approx(100 * 675_191 / 1_222_847)
    # the host's share of the device's idle (gaps of the union of its streams), by a plain loop over the file: HTA's
    # per-stream sums (3,525,804 of 4,231,694 µs: 83%) count a gap once per stream that idles in it
    host = device_host_wait(RANK0)
    assert host == 362_945
    assert found["idle"].text == (
        f"GPU idle {675_191 / 1_222_847:.1%} of the span (675.2 ms of 1.2 s), {host / 675_191:.1%} of it waiting on "
        "the host (the next activity's launch call came after the GPU ran dry)"
    )
    # exposed communication: the NCCL kernels' union (396,199 µs) less HTA's overlap of it with compute (14.95%)
    assert found["exposed_communication"].value == pytest.approx(100 * 396_199 * (1 - 0.1495) / 1_222_847, rel=1e-3)
    assert [f.kind for f in trace_findings(meta, tables)][0] == "idle"  # the largest share of the span first


def test_snapshot_findings_on_a_real_snapshot():
    from core.experiments.memory_snapshot import MemorySnapshotConfig
    from core.experiments.memory_snapshot import run as import_snapshot

    path = DATA / "snapshots" / "cs336_bcrafton_train_step_all_stacks.pickle.gz"
    out, _ = drive(import_snapshot(MemorySnapshotConfig(path=str(path), keep_detail=False), None))  # type: ignore[arg-type]
    found = out.meta["findings"]
    assert found == to_store(snapshot_findings(out.meta)) and len(found) == 3
    # README (the test's own replay): peak 3,849,232,640 B, 3,064,418,304 B allocated before recording
    assert found[0]["kind"] == "before_recording" and found[0]["value"] == 3_064_418_304
    assert f"({3_064_418_304 / 3_849_232_640:.1%} of the peak)" in found[0]["text"]
    site = next(f for f in found if f["kind"] == "site")
    assert "optimizer.py:78 step" in site["text"]  # the peak's site, named by the user's frame (README)


def test_the_text_report_opens_with_the_findings_and_gives_each_step_on_each_rank(data_dir):
    out = bounded_cli("trace", str(RANK0), str(RANK1), "--no-save")
    assert out.code == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    assert lines[1].startswith("finding: rank 1 holds the job back: its compute is +29.3% over the other rank's")
    assert "most compute: rank 1, 272.0 ms against the other rank's 210.3 ms: 61.7 ms (+29.3%)" in lines
    assert next(line for line in lines if line.lstrip().startswith("1 ")).endswith("← straggler")
    walls = {}  # each rank's ProfilerStep spans (CPU side: these files have no GPU-side ones), from the file
    for rank, path in ((0, RANK0), (1, RANK1)):
        for e in json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]:
            if str(e.get("name", "")).startswith("ProfilerStep#") and e.get("cat") != "gpu_user_annotation":
                walls[rank, int(e["name"].split("#")[1])] = float(e["dur"]) / 1000
    for step in (551, 552):
        want = f"  step {step:>6}: rank 0 {walls[0, step]:.1f} ms, rank 1 {walls[1, step]:.1f} ms"
        assert want in lines, (want, lines)


def test_the_run_names_each_rank_file_by_its_digest_in_rank_order():
    _, meta = imported(RANK1, RANK0)  # named out of order: the run lists them by rank
    assert meta["files"] == [RANK0.name, RANK1.name]
    assert meta["files_sha256"] == [hashlib.sha256(p.read_bytes()).hexdigest() for p in (RANK0, RANK1)]

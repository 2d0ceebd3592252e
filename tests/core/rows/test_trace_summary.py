"""An imported trace's timeline figures (:mod:`core.rows.trace_summary`): a stored meta — TraceLens' H100 BERT trace
as `python -m core trace FILE --json` printed it before it had a type — reads into its fields, one stored before a
figure reads with defaults, and the text reads the fields."""

from __future__ import annotations

from core.rows.trace import TraceTables
from core.rows.trace_summary import KERNEL_WAIT_US, RankSetSummary, TraceSummary, Verdict
from core.workload.trace.text import report_lines

LAUNCH = {"launched": 61, "launch_delay_p50_us": 6.538, "launch_delay_p90_us": 8.485, "launch_delay_p99_us": 14.6586,
          "launch_delay_max_us": 16.683, "launch_delay_mean_us": 7.079, "queue_delay_mean_us": 1.629,
          "graph_launched": 0, "launch_bound": 60, "launch_bound_share": 0.9836065573770492, "launch_wait_us": 3598.388,
          "shorter_than_launch_call": 40, "shorter_than_launch_call_share": 0.6557377049180327}  # fmt: skip
BERT = {
    "events": 1372, "gpu_activities": 61, "devices": [0], "device": 0, "span_us": 3907.825, "busy_us": 309.437,
    "idle_us": 3598.388, "kernel_time_us": 307.197, "compute_union_us": 307.197, "copy_union_us": 2.24,
    "communication_union_us": 0.0, "compute_and_communication_us": 0.0, "compute_and_copy_us": 0.0,
    "communication_and_copy_us": 0.0, "exposed_communication_us": 0.0, "idle_share": 0.9208, "kernel_count": 59,
    "streams": [7], "idle_causes": {"host_wait_us": 3598.388, "kernel_wait_us": 0.0, "other_wait_us": 0.0},
    "idle_causes_basis": "device", "kernel_wait_threshold_us": 30.0, "launch": LAUNCH, "steps": 1,
    "step_basis": "CPU ProfilerStep spans (the host's steps)", "rules": [], "file": "tracelens_h100_bert_small.json.gz",
}  # fmt: skip


def test_a_stored_summary_reads_into_its_fields():
    s = TraceSummary.from_meta(BERT)
    assert (s.events, s.gpu_activities, s.kernel_count, s.streams, s.steps) == (1372, 61, 59, (7,), 1)
    assert s.idle_on_device and s.idle_causes is not None and s.idle_causes.host_wait_share == 1.0
    assert s.launch.measured_launch_bound and (s.launch.launched, s.launch.launch_bound) == (61, 60)


def test_a_summary_stored_before_the_figures_reads_with_defaults():
    s = TraceSummary.from_meta({"gpu_activities": 3, "launch": {"launched": 10, "launch_bound": 6}})
    assert (s.idle_causes, s.idle_on_device, s.rules, s.kernel_wait_threshold_us) == (None, False, (), KERNEL_WAIT_US)
    assert not s.launch.measured_launch_bound  # its launch_bound is HTA's short kernels
    assert TraceSummary.from_meta({"steps": [{"kind": "step"}]}).steps == 0  # a --json output's steps table


def test_the_text_reads_the_fields():
    lines = report_lines(BERT, TraceTables.from_rows([]))
    assert lines[0] == "1,372 events; GPU 0 (the file names no GPU; the file has GPU 0): 59 kernels on streams 7"
    assert "host wait 3.598 ms, kernel wait 0.000 ms (< 30 µs), other 0.000 ms" in lines[3]
    assert any(line.startswith("  launch-bound (launched onto an idle GPU") and "60 of 61 (98.4%)" in line
               for line in lines)  # fmt: skip
    moved = report_lines(BERT | {"kernel_wait_threshold_us": 12.5, "streams": [7, 9]}, TraceTables.from_rows([]))
    assert "(< 12.5 µs)" in moved[3] and moved[0].endswith("streams 7 and 9")


# the two recsys ranks of HTA's 128-rank A100 job, as `python -m core trace --example recsys-a100-ranks --json`
# printed its summary before it had a type
RECSYS = {
    "straggler": {"rank": 1, "compute_us": 271973.0, "median_compute_us": 210320.0, "margin_us": 61653.0,
                  "margin_pct": 29.31390262457208, "against": "others"},
    "straggler_rank": 1, "verdict": {"rank": 1, "reasons": ["compute"]}, "ranks": [0, 1], "world_size": 128,
    "arrivals": {"matched": 0, "matched_by_kernel": 0, "inconsistent": 0, "sequences_left_out": 0, "last_rank": None,
                 "last_arrivals": 0, "waited_us": 0.0},
    "backend": "nccl", "files": ["rank-0.json.gz", "rank-1.json.gz"], "file": "recsys_a100_2_of_128_ranks",
}  # fmt: skip


def test_a_rank_set_s_summary_reads_into_its_fields_and_its_words():
    from core.workload.trace.text import verdict_text

    s = RankSetSummary.from_meta(RECSYS)
    assert (s.ranks, s.world_size, s.straggler.rank, s.straggler.against, s.files[1]) == (2, 128, 1, "others",
                                                                                         "rank-1.json.gz")  # fmt: skip
    assert verdict_text(s) == "holding the job back: rank 1 (compute)"
    old = RankSetSummary.from_meta({k: v for k, v in RECSYS.items() if k != "verdict"})
    assert verdict_text(old) is None and old.judged == Verdict(1, ("compute",))  # stored before the judgement
    nobody = RankSetSummary.from_meta(RECSYS | {"verdict": {"rank": None, "reasons": []}})
    assert verdict_text(nobody) == "no rank holds the job back"

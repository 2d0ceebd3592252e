"""One owner for what an import says first (:mod:`core.workload.findings`): one ranking for every kind of file,
capped at the three the README promises, on findings made here by hand; and the stored form, read back from
findings as runs stored them (copied from the JSON the CLI printed for a shipped example before the type)."""

from __future__ import annotations

from core.workload.findings import CRITICAL, INFO, MAX_FINDINGS, Finding, ranked, stored_findings, to_store


def f(kind: str, **kw) -> Finding:
    return Finding(kind, kind, 1.0, "%", **kw)


def kinds(found: list[Finding]) -> list[str]:
    return [x.kind for x in found]


def test_the_cap_is_the_three_the_docs_state():
    assert MAX_FINDINGS == 3
    found = [f(f"k{i}", time_us=float(i)) for i in range(5)]
    assert kinds(ranked(found)) == ["k4", "k3", "k2"]


def test_the_most_time_first_and_one_finding_a_cause():
    found = [
        f("a", time_us=10.0, cause="data loading"),
        f("b", time_us=30.0),
        f("c", time_us=20.0, cause="data loading"),  # more time than a: said instead of it
        f("d", time_us=5.0),
    ]
    assert kinds(ranked(found)) == ["b", "c", "d"]


def test_a_finding_without_a_measure_keeps_its_place_after_those_with_one():
    found = [f("untimed1"), f("small", time_us=1.0), f("untimed2"), f("large", time_us=9.0)]
    assert kinds(ranked(found, cap=4)) == ["large", "small", "untimed1", "untimed2"]


def test_what_failed_comes_first_whatever_its_size():
    """An out-of-memory of 1 byte before 10 GiB of reserved gap; a hang (no measure) before a late rank's time."""
    oom = Finding("oom", "oom", 1, "bytes")
    gap = Finding("reserved_gap", "gap", 10 * 2**30, "bytes", weight=10 * 2**30)
    assert oom.severity == CRITICAL and gap.severity != CRITICAL
    assert kinds(ranked([gap, oom])) == ["oom", "reserved_gap"]
    assert kinds(ranked([f("wrapped"), f("late_rank", time_us=4e6), f("hang")])) == ["hang", "late_rank", "wrapped"]
    assert f("wrapped").severity == INFO


def test_a_weight_ranks_where_the_stored_time_would_not():
    """A rank's idle and exposed communication are ranked by their share of that rank's span, not their µs."""
    idle = f("idle", time_us=900.0, weight=0.10)  # 10 % of a long rank's span
    exposed = f("exposed_communication", time_us=100.0, weight=0.40)  # 40 % of a short one's
    assert kinds(ranked([idle, exposed])) == ["exposed_communication", "idle"]


def test_the_text_is_what_then_why_then_what_to_try():
    x = Finding("host_gap", "50 ms in cudaFree", 5.0, "%", why=" — allocator", advice=" — try: a caching allocator")
    assert x.text == "50 ms in cudaFree — allocator — try: a caching allocator"


STRAGGLER = {  # the recsys-a100-ranks example's first finding, as `trace --example recsys-a100-ranks --json` printed it
    "kind": "straggler",
    "text": "rank 1 holds the job back: its compute is +29.3% over the other rank's (272.0 ms against 210.3 ms); by "
    "kernel group, embedding +54.5 of +61.7 ms; by operator, torch::autograd::CppNode<SplitLookupFunction_rowwise_"
    "adagrad_Op> +43.5 ms (summed durations against the other rank's)",
    "value": 29.3,
    "unit": "%",
    "time_us": 61653.0,
    "rank": 1,
    "reasons": ["compute"],
}
OOM = {  # oom_h200_cap.pickle.gz's first finding: no time, no cause
    "kind": "oom",
    "text": "out of memory: a request of 1.0 GiB (large pool) failed with 136.6 GiB free on the device and 2.9 MiB "
    "reserved but unallocated, whose largest free block is 0 B: not the device's memory",
    "value": 1073741824,
    "unit": "bytes",
}
PATTERN = {  # an unfused-attention finding: its count between its time and its cause, as ops.py stored it
    "kind": "op_pattern",
    "text": "unfused attention in 24 modules",
    "value": 68.6,
    "unit": "%",
    "time_us": 1000.0,
    "count": 24,
    "cause": "attention kernels",
}


def test_stored_findings_read_back_and_store_the_same_keys_in_the_same_order():
    for stored in (STRAGGLER, OOM, PATTERN):
        back = Finding.from_dict(stored).to_dict()
        assert back == stored and list(back) == list(stored)
    (straggler,) = stored_findings({"findings": [STRAGGLER]})
    assert straggler.extra["rank"] == 1 and straggler.time_us == 61653.0 and straggler.severity == CRITICAL
    assert stored_findings({}) == []


def test_a_new_finding_stores_its_sentence_and_no_severity_or_weight():
    x = Finding("site", "the largest site", 200, "bytes", advice="; record earlier", weight=200)
    assert to_store([x]) == [
        {"kind": "site", "text": "the largest site; record earlier", "value": 200, "unit": "bytes"}
    ]

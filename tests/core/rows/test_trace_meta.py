"""An imported trace's stored rules (:class:`core.rows.kernel_rules.RuleCount`): the engine builds each rule's count
and stores ``to_dict()``, so a stored meta — HTA's A100 backward excerpt as `python -m core trace FILE --json`
printed it before the engine built them — reads back into the same dicts, keys in order."""

from __future__ import annotations

import json
from pathlib import Path

from core.rows.kernel_rules import RuleCount
from core.rows.trace_summary import RankSetSummary, TraceSummary
from core.workload.trace.file import read_trace
from core.workload.trace.timeline import analyse_trace

FILE = Path(__file__).parents[2] / "data/workload/hta_a100_backward_excerpt.json"
# two of its 29 rules, copied by hand from the --json output: its one kernel, 45 µs, is CUTLASS's
CUTLASS = {"rule": "CUTLASS", "group": "matmul", "count": 1, "us": 45.0}
NONE = {"rule": "no rule matched", "group": "other", "count": 0, "us": 0.0}


def test_a_stored_rule_round_trips_with_its_keys_in_order():
    for stored in (CUTLASS, NONE):
        back = RuleCount(**stored).to_dict()
        assert back == stored and json.dumps(back) == json.dumps(stored)


def test_the_engine_stores_the_rules_it_built():
    rules = analyse_trace(read_trace(str(FILE)))[1]["rules"]
    assert len(rules) == 29 and CUTLASS in rules and rules[-1] == NONE
    assert [list(r) for r in rules] == [["rule", "group", "count", "us"]] * 29


def test_a_meta_stored_before_the_newer_keys_reads_with_defaults():
    s = TraceSummary.from_meta({"gpu_activities": 1, "rules": [CUTLASS]})
    assert (s.file, s.rules, s.steps, s.step_basis) == ("", (RuleCount(**CUTLASS),), 0, "")
    r = RankSetSummary.from_meta({"straggler_rank": 1})
    assert (r.file, r.world_size, r.backend, r.straggler.rank) == ("", None, None, 1)  # the headline's "unknown"s

"""An imported trace's breakdown (:mod:`core.rows.trace_breakdown`): patterns, operators and host causes stored by
the trace engine read into fields — here as `python -m core trace FILE --json` printed them before they had a type
(HTA's A100 control step 1012 and TraceLens' H100 TimeSformer) — and the page's tables read those fields."""

from __future__ import annotations

from core.rows.trace_breakdown import OpTime, TraceBreakdown
from render import trace_why

ADVICE = "each is mostly launch and memory traffic: fuse them (torch.compile, a fused optimizer, foreach ops) or capture them in a CUDA graph"  # fmt: skip
TINY = {
    "pattern": "many tiny elementwise kernels", "time_us": 2262.0, "kernels": 501, "of_kernels": 1428,
    "below_us": 10.0, "ops": [{"op": "aten::add_", "kernels": 167}, {"op": "aten::mul", "kernels": 125}],
    "advice": ADVICE,
}  # fmt: skip
UNFUSED = {
    "pattern": "unfused attention", "module": "nn.Module: TimesformerSelfAttention_5", "time_us": 9403.6, "kernels": 3,
    "ops": ["aten::_softmax", "aten::bmm"], "advice": "softmax and batched matmuls as separate kernels",
}  # fmt: skip


def test_the_patterns_read_both_forms_of_their_operators():
    rows = trace_why.patterns_table(TraceBreakdown.from_meta({"op_patterns": [TINY, UNFUSED]}))
    assert rows[0] == {
        "pattern": "many tiny elementwise kernels",
        "where": "aten::add_ ×167, aten::mul ×125",
        "ms": 2.262,
        "kernels": 501,
        "advice": ADVICE,
    }
    assert rows[1]["where"] == "nn.Module: TimesformerSelfAttention_5" and rows[1]["ms"] == 9.404


def test_an_operator_has_a_rate_only_where_one_was_derived():
    stored = {"op": "aten::addmm", "module": "nn.Module: Linear_25", "gpu_time_us": 41.28, "kernels": 1,
              "share": 0.1334, "calls": 1, "tflops": 106.756, "tbps": 0.9706, "peak_share": 0.1079}  # fmt: skip
    op = OpTime.from_dict(stored)
    assert op.rated and (op.copies, op.memsets) == (None, None)  # a run stored before copies were counted
    (row,) = trace_why.ops_table(TraceBreakdown(ops=(op,)))
    assert (row["GPU ms"], row["% of GPU time"], row["TFLOPS"], row["% of peak"]) == (0.041, 13.3, 106.756, 10.8)
    unrated = {k: v for k, v in stored.items() if k not in ("tflops", "tbps", "peak_share")}
    (row,) = trace_why.ops_table(TraceBreakdown.from_meta({"ops": [unrated]}))
    assert "TFLOPS" not in row


def test_the_host_causes_read_their_top_operators():
    meta = {"host_gaps": {"gaps": 60, "causes": [{"cause": "other CPU work", "time_us": 3571.078, "share": 0.9924,
            "top_ops": [{"op": "forward", "time_us": 3571.078, "count": 1, "longest_us": 3571.078,
                         "source": "modeling_bert.py:1306 forward"}]}]}}  # fmt: skip
    why = TraceBreakdown.from_meta(meta)
    assert why.host_gaps.gaps == 60 and why.host_before_first_kernel.causes == ()
    (row,) = trace_why.host_gap_table(why.host_gaps)
    assert row == {
        "cause": "other CPU work",
        "ms": 3.571,
        "% of the gaps": 99.2,
        "top operators": "forward (3.571 ms ×1)",
        "source": "modeling_bert.py:1306 forward",
    }

"""The why-tables of a trace import show the run's own figures: each cause of the GPU's gaps, each operator with
its rate where shapes give one, each module and pattern — from a real trace's meta, nothing recomputed."""

import pytest

pytest.importorskip("msgspec")

from core.rows.trace_breakdown import TraceBreakdown
from core.units import duration_text
from core.workload.trace.file import read_trace
from core.workload.trace.host_gaps import host_gaps
from core.workload.trace.op_flops import tensor_core_use
from core.workload.trace.ops import op_breakdown
from core.workload.trace.timeline import analyse_trace
from render import trace_why
from tests.conftest import ROOT

BERT = ROOT / "tests" / "data" / "workload" / "tracelens_h100_bert_small.json.gz"


def meta_of(path):
    trace = read_trace(path)
    _, meta = analyse_trace(trace)
    meta["host_gaps"], _ = host_gaps(trace, meta["device"])
    meta.update(op_breakdown(trace, meta["device"]))
    meta["tensor_cores"] = tensor_core_use(trace, meta["device"])
    return meta


def test_the_tables_show_the_runs_figures():
    meta = meta_of(BERT)
    why = TraceBreakdown.from_meta(meta)
    gaps = trace_why.host_gap_table(why.host_gaps)
    assert [r["cause"] for r in gaps] == [c["cause"] for c in meta["host_gaps"]["causes"]]
    assert [r["ms"] for r in gaps] == [round(c["time_us"] / 1000, 3) for c in meta["host_gaps"]["causes"]]
    assert sum(r["% of the gaps"] for r in gaps) == pytest.approx(100, abs=0.05 * len(gaps))  # as %, like the charts
    sync = next(r for r in gaps if r["cause"] == "synchronisation")
    assert sync["source"] == "transformers/modeling_attn_mask_utils.py:429 _prepare_4d_attention_mask_for_sdpa"
    ops = trace_why.ops_table(why)
    assert [r["operator"] for r in ops] == [r["op"] for r in meta["ops"]]
    rated = [r for r in ops if r.get("TFLOPS") is not None]
    assert rated and all(r["% of peak"] == pytest.approx(100 * r["TFLOPS"] / 989.4, abs=0.05) for r in rated)
    assert [r["module"] for r in trace_why.modules_table(why)] == [r["module"] for r in meta["modules"]]
    caption = trace_why.rates_caption(why, meta)
    older = duration_text(meta["tensor_cores"]["older_us"] / 1e6)  # the lab's one way of writing a time
    assert "against NVIDIA H100 SXM" in caption and f"older architecture {older}," in caption


def test_runs_stored_before_the_figures_show_nothing():
    none = TraceBreakdown.from_meta({})
    assert trace_why.host_gap_table(none.host_gaps) == trace_why.ops_table(none) == trace_why.modules_table(none) == []
    assert trace_why.patterns_table(none) == [] and trace_why.rates_caption(none, {}) == ""


def test_the_host_s_time_before_the_first_kernel_is_a_table_of_its_own():
    """TraceLens' TimeSformer on an H100: the host's 218.1 ms before the step's first kernel, by cause."""
    from core.workload.trace.host_gaps import host_in_steps

    path = ROOT / "tests" / "data" / "workload" / "tracelens_h100_timesformer_video.json.gz"
    trace = read_trace(path)
    tables, meta = analyse_trace(trace)
    meta["host_before_first_kernel"], _ = host_in_steps(trace, meta["device"], tables.steps)
    table = trace_why.host_gap_table(TraceBreakdown.from_meta(meta).host_before_first_kernel)
    causes = meta["host_before_first_kernel"]["causes"]
    assert [r["cause"] for r in table] == [c["cause"] for c in causes] and table[0]["cause"] == "other CPU work"
    assert sum(r["ms"] for r in table) == pytest.approx(meta["host_before_first_kernel"]["time_us"] / 1000, abs=0.01)

"""AppTest: a trace import opens with what the host did while the GPU idled — the findings naming the operator
first, then the table of causes — the same figures the CLI's --json gives (stored in the run's meta)."""

import pytest

pytest.importorskip("streamlit")
pytest.importorskip("plotly")

from pages.common.markdown import markdown_text
from tests.pages.test_workload import open_trace_example


def test_a_trace_import_says_what_the_host_did_in_the_gaps(store):
    at, stored = open_trace_example(store, "resnet50-v100")
    causes = stored.meta["host_gaps"]["causes"]
    assert causes and sum(c["time_us"] for c in causes) == pytest.approx(stored.meta["idle_us"], abs=1e-3)
    # the host's time before each step's first kernel comes first, by cause too; then the gaps' table
    before, shown = [d.value for d in at.dataframe if "cause" in d.value.columns]
    assert before["cause"].tolist() == [c["cause"] for c in stored.meta["host_before_first_kernel"]["causes"]]
    assert shown["cause"].tolist() == [c["cause"] for c in causes]
    assert shown["ms"].tolist() == pytest.approx([c["time_us"] / 1000 for c in causes], abs=0.0005)  # to the µs
    ops = next(d.value for d in at.dataframe if "operator" in d.value.columns)
    assert ops["operator"].tolist() == [r["op"] for r in stored.meta["ops"]]
    assert ops["GPU ms"].tolist() == pytest.approx([r["gpu_time_us"] / 1000 for r in stored.meta["ops"]], abs=0.0005)
    assert any(
        markdown_text(stored.meta["ops_reference"]) in c.value for c in at.caption
    )  # "no reference for Tesla V100…"
    # a cause is a finding where it holds 5 % of the span, ahead of the summary's findings
    big = [c for c in causes[:2] if c["time_us"] >= 0.05 * stored.meta["span_us"]]
    kinds = [f["kind"] for f in stored.meta["findings"]]
    assert kinds[: len(big)] == ["host_gap"] * len(big) and kinds.count("host_gap") == len(big)

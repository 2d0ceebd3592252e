"""AppTest: one click on an example recorded elsewhere (examples/) imports it in a worker and draws it,
labelled recorded elsewhere with its GPU and source; a second click reopens the stored import; a copy of the
lab without examples/ says so."""

import gzip
import json

import pytest

pytest.importorskip("streamlit")
pytest.importorskip("plotly")

from core.workload import examples
from pages.common.markdown import markdown_text
from tests.pages.test_workload import open_trace_example, page, wait_for_metric


def test_step_bench_opens_a_trace_recorded_on_a_v100(store):
    example = examples.find("resnet50-v100")
    with gzip.open(examples.import_path(example)) as f:
        gpu = json.load(f)["deviceProperties"][0]["name"]  # what the file itself says
    at = page("pages/step_bench.py")
    button = at.button(key=f"step_bench.trace.example.{example.name}")
    assert markdown_text(gpu) in button.label and button.label.startswith("Open an example recorded on")
    button.click().run()
    at = wait_for_metric(at, "Kernel time")
    assert not at.exception
    assert len(at.get("plotly_chart")) >= 3
    assert len(at.get("html")) == 1  # the answer brought into view (tests/e2e/test_screenshots.py: in a browser)
    (stored,) = store.list(experiment="profiler-trace")
    assert stored.recorded_elsewhere == gpu == "Tesla V100-SXM2-32GB"
    assert stored.meta["example"]["name"] == example.name
    said = " ".join(i.value for i in at.info)
    assert "Recorded elsewhere" in said and "HolisticTraceAnalysis" in said and example.commit[:12] in said
    assert any(markdown_text(f"recorded elsewhere on {gpu}") in c.value for c in at.caption)  # the run's own line
    at.button(key=f"step_bench.trace.example.{example.name}").click().run()  # again: the stored import, no new run
    assert not at.exception and len(store.list(experiment="profiler-trace")) == 1
    assert any(m.label == "Kernel time" for m in at.metric) and len(at.get("html")) == 1


def test_a_ddp_trace_s_collectives_are_listed_as_nccl_tests_sizes_them(store):
    """The A100 DDP example records each collective's figures: the page's table is the stored rows, in ms and
    GB/s (tests/core/workload/test_collective_calls.py checks them against the file)."""
    at, stored = open_trace_example(store, "resnet50-a100")
    rows = [r for r in stored.rows if r["kind"] == "collective"]
    table = next(d.value for d in at.dataframe if "busbw GB/s" in d.value.columns)
    assert table["collective"].tolist() == [r["collective"] for r in rows] and len(rows) == 7
    assert table["total ms"].tolist() == pytest.approx([r["total_us"] / 1000 for r in rows])
    assert table["busbw GB/s"].tolist() == pytest.approx([r["busbw_gbs"] for r in rows])


@pytest.mark.parametrize(
    "path, key", [("pages/allocator.py", "allocator"), ("pages/train_memory.py", "training_memory")]
)
def test_memory_pages_open_a_snapshot_recorded_elsewhere(store, path, key):
    example = examples.find("train-step-snapshot")
    at = page(path)
    at.button(key=f"{key}.snapshot.example.{example.name}").click().run()
    at = wait_for_metric(at, "Peak allocated")
    assert not at.exception
    assert len(at.get("plotly_chart")) >= 5
    (stored,) = store.list(experiment="memory-snapshot")
    assert stored.recorded_elsewhere == example.gpu and stored.meta["example"]["repository"] == example.repository
    assert any("Recorded elsewhere" in i.value and "bcrafton" in i.value for i in at.info)


def test_without_examples_the_page_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("GPULAB_EXAMPLES_DIR", str(tmp_path))
    at = page("pages/step_bench.py")
    assert not at.exception
    assert any("No example trace here" in i.value and "without examples" in i.value for i in at.info)
    assert not [b for b in at.button if b.key and ".example." in b.key]
    assert any("upload one and press Import." in i.value for i in at.info)


def test_the_label_of_an_import_says_recorded_elsewhere_and_survives_any_meta():
    from core.result import RunResult
    from render.style import device_label

    def imported(**meta) -> RunResult:
        return RunResult("profiler-trace", {}, {"kind": "cpu"}, {}, "2026-01-01T00:00:00", None, "ok", meta=meta)

    base = {"recorded_on": "the machine that recorded the trace (imported file)", "file": "t.json"}
    assert device_label(imported(**base)) == "imported t.json — recorded elsewhere"
    named = imported(**base, device_name="Tesla V100-SXM2-32GB", example={"repository": "github.com/x/y"})
    assert device_label(named) == "imported t.json — recorded elsewhere on Tesla V100-SXM2-32GB (github.com/x/y)"
    assert device_label(imported(**base, example="junk")) == "imported t.json — recorded elsewhere"


class _EndsWhileDrawn:
    """A job the page first sees running (its example buttons drawn disabled), then done (its result drawn)."""

    def __init__(self, result):
        self.id, self.result, self._reads = "ends-while-drawn", result, 0

    @property
    def state(self) -> str:
        self._reads += 1
        return "running" if self._reads == 1 else "done"


def test_an_import_that_ends_while_the_page_is_drawn_leaves_its_buttons_enabled():
    from core.result import RunResult
    from pages.common import lab

    failed = RunResult(
        "profiler-trace", {}, {"kind": "cpu"}, {}, "2026-01-01T00:00:00", None, "error", error="bad file"
    )
    at = page("pages/step_bench.py")
    job = _EndsWhileDrawn(failed)
    lab.manager().track(job)  # the same process: AppTest runs the page in a thread of this one
    at.session_state["step_bench.trace.job"] = job.id
    at.session_state["step_bench.trace.scroll"] = True  # as a click's submit leaves it
    at.run()
    assert job._reads >= 2 and not at.exception
    assert not at.button(key="step_bench.trace.example.resnet50-v100").disabled  # no click needed to free it
    assert any("bad file" in e.value for e in at.error)  # the ended run is drawn
    (scroll,) = at.get("html")  # the answer the person asked for is brought into view, once
    assert 'id="gl-answer-step-bench-trace"' in scroll.proto.body and "scrollIntoView" in scroll.proto.body
    assert scroll.proto.unsafe_allow_javascript
    at.run()
    assert not at.get("html") and any("bad file" in e.value for e in at.error)  # redrawn later: no scroll again

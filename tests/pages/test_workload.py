"""AppTest: import a snapshot on the Allocator page and a trace on the Step benchmark page (upload → worker →
stored run → charts), plan a published architecture on the Training memory page; the plot modules draw
stored imports for Compare and the report."""

import pickle
import re
import time
from pathlib import Path

import pytest

from core.workload.snapshot.analysis import OTHER_SITES
from tests.conftest import ROOT
from tests.core.workload import snapshots
from tests.pages.waiting import error, metric, until

V100 = ROOT / "tests" / "data" / "workload" / "kineto_v100_trace.json"


def page(path):
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    st.cache_resource.clear()
    at = AppTest.from_file(str(ROOT / path), default_timeout=120)
    at.session_state["lab.device"] = "cpu"
    at.session_state["lab.model"] = "tiny"
    return at.run()


def wait_for_metric(at, label, timeout=120):
    return until(at, metric(label), timeout, what=repr(label))


def open_trace_example(store, name: str):
    """The Step benchmark page after one click on the shipped trace ``name``, and the run it stored."""
    from core.workload import examples

    at = page("pages/step_bench.py")
    at.button(key=f"step_bench.trace.example.{examples.find(name).name}").click().run()
    at = wait_for_metric(at, "Kernel time")
    assert not at.exception
    (stored,) = store.list(experiment="profiler-trace")
    return at, stored


def import_snapshot(at, key, name, content):
    uploader = next(u for u in at.get("file_uploader") if u.label == "Memory snapshot")
    uploader.set_value((name, content, "application/octet-stream"))
    at.run()
    at.button(key=f"{key}.import").click().run()
    return wait_for_metric(at, "Peak allocated")


def test_allocator_page_imports_a_snapshot_and_draws_it(data_dir):
    snap = snapshots.big_snapshot(300)
    expected = snapshots.plain_replay(snap, 1)
    at = import_snapshot(page("pages/allocator.py"), "allocator.snapshot", "mine.pickle", pickle.dumps(snap))
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    # 1,334,147,072 B / 2³⁰ = 1.2425… GiB
    assert expected["peak"] == 1_334_147_072
    assert metrics["Peak allocated"] == "1.2 GiB"
    assert metrics["Trace events"] == f"{expected['events']:,}"
    charts = at.get("plotly_chart")
    assert len(charts) >= 5  # timeline, sites, segment map, categories, fragmentation
    assert any("Python stack at the peak" in e.label for e in at.expander)
    # no metric's delta (an arrow) for a plain fact, and the facts in words with their units, no Python list
    assert not any(m.delta for m in at.metric), [(m.label, m.delta) for m in at.metric]
    captions = " ".join(c.value for c in at.caption)
    assert "device 1 of 2 (0, 1)" in captions and "[" not in captions.split("device 1")[1][:20]
    assert re.search(r"at \d[\d.,]* (ms|µs|s) ", captions + " ")
    window = next(s for s in at.slider if s.label.startswith("Time window"))
    assert window.label == "Time window (ms since the first event)"
    window.set_value((window.value[0], window.value[1] / 2)).run()  # zoom: re-read from the whole trace
    assert not at.exception


def test_a_moment_with_nothing_live_says_so(data_dir):
    """A moment where no block is live (a scratch block allocated and freed at the first instant, the steps
    begin 5 µs later; nothing was allocated before recording): the page says so instead of failing on an
    empty table of sites."""
    snap = snapshots.big_snapshot(20)
    scratch = [
        snapshots.event(action, 0x1000, 512, -5, snapshots.OTHER)
        for action in ("alloc", "free_requested", "free_completed")
    ]
    snap["device_traces"][1][:0] = scratch
    at = import_snapshot(page("pages/allocator.py"), "allocator.snapshot", "small.pickle", pickle.dumps(snap))
    assert not at.exception
    assert not any("Nothing live" in i.value for i in at.info)  # the peak: something is live
    next(s for s in at.slider if s.label.startswith("Moment")).set_value(0.0).run()
    assert not at.exception, at.exception
    assert any("Nothing live at this moment" in i.value and "0 B allocated" in i.value for i in at.info)


def test_the_sites_chart_of_an_empty_moment_has_its_columns():
    from render.plots import memory_snapshot

    frame = memory_snapshot.sites_frame([])
    assert list(frame.columns) == list(memory_snapshot.SITE_COLUMNS) and frame.empty
    assert frame.drop(columns=["stack"]).empty
    fig = memory_snapshot.sites_figure([], "at 0.00 (0 B allocated)")
    assert "nothing live" in fig.layout.annotations[0].text


def test_a_refused_snapshot_is_an_error_on_the_page_and_not_stored(data_dir):
    import os

    at = page("pages/allocator.py")
    uploader = next(u for u in at.get("file_uploader") if u.label == "Memory snapshot")
    uploader.set_value(("evil.pickle", pickle.dumps({"segments": [], "device_traces": [[os.system]]}), "x"))
    at.run()
    at.button(key="allocator.snapshot.import").click().run()
    until(at, error, 120)
    shown = " ".join(e.value for e in at.error).replace("\\", "")  # the banner escapes Markdown punctuation
    assert "names the class posix.system" in shown
    from core.store import RunStore

    assert RunStore().count() == 0


# Peak allocated of the committed real snapshots (the plain replay's bytes, blocks from before recording at their
# requested size), as the page must print it.
REAL_PEAKS = {
    "cs336_mem_snapshot.pickle.gz": (3_249_143_816, "3.0 GiB"),  # / 2³⁰ = 3.0260…
    "cs336_memory_forward_bf16_128.pickle.gz": (779_837_440, "743.7 MiB"),  # / 2²⁰ = 743.710…
    "cs336_memory_forward_fp32_128.pickle.gz": (556_843_008, "531.0 MiB"),  # / 2²⁰ = 531.046…
    "cs336_bcrafton_train_step_all_stacks.pickle.gz": (3_849_232_640, "3.6 GiB"),  # / 2³⁰ = 3.5848…
}
UNITS = {"GiB": 2**30, "MiB": 2**20, "KiB": 2**10, "B": 1}


@pytest.mark.parametrize("path", snapshots.real_snapshot_files(), ids=lambda p: Path(p).name)
def test_the_page_draws_a_real_snapshot(path, data_dir):

    expected = snapshots.plain_replay(snapshots.load_any(path), 0)
    at = import_snapshot(
        page("pages/train_memory.py"), "training_memory.snapshot", Path(path).name, Path(path).read_bytes()
    )
    assert not at.exception and len(at.get("plotly_chart")) >= 5
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Trace events"] == f"{expected['events']:,}"
    findings = next(m.value for m in at.markdown if m.value.startswith("**What stands out**")).replace("\\", "")
    if expected["baseline"]:  # the diagnosis first: what was there before recording, against the replayed peak
        assert f"({expected['baseline'] / expected['peak']:.1%} of the peak)" in findings
    shown = metrics["Peak allocated"]
    if Path(path).name in REAL_PEAKS:
        assert (expected["peak"], shown) == REAL_PEAKS[Path(path).name]
    # any snapshot (GPULAB_REAL_SNAPSHOTS adds more): the printed figure is the replayed peak, rounded
    number, unit = shown.split()
    decimals = len(number.partition(".")[2])
    assert abs(float(number.replace(",", "")) - expected["peak"] / UNITS[unit]) <= 0.5 * 10**-decimals


def test_step_bench_page_imports_a_real_trace(data_dir):
    at = page("pages/step_bench.py")
    uploader = next(u for u in at.get("file_uploader") if u.label == "Profiler trace")
    uploader.set_value(("kineto_v100_trace.json", V100.read_bytes(), "application/json"))
    at.run()
    at.button(key="step_bench.trace.import").click().run()
    wait_for_metric(at, "Kernel time")
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Kernel time"] == "48.00 µs" and metrics["GPU idle"] == "11.90 ms"
    assert len(at.get("plotly_chart")) >= 4 and not at.exception
    # the diagnosis first, the most time first: HTA's idle (11,896 µs of an 11,946 µs span), then what the host did
    # in it (this excerpt kept no CPU operators: 11.3 ms of it)
    findings = next(m.value for m in at.markdown if m.value.startswith("**What stands out**")).replace("\\", "")
    assert f"1. GPU idle {11_896 / 11_946:.1%} of the span" in findings
    assert (
        "2. 11.3 ms of the GPU's 11.9 ms idle" in findings and "with no CPU event on the launching thread" in findings
    )


def test_a_trace_on_the_box_is_imported_from_its_path_without_an_upload(data_dir, monkeypatch):
    monkeypatch.setenv("GPULAB_IMPORT_DIRS", str(V100.parent))  # the operator allows the folder it lies in
    at = page("pages/step_bench.py")
    at.text_input(key="step_bench.trace.path").input(str(V100)).run()
    at.button(key="step_bench.trace.import").click().run()
    wait_for_metric(at, "Kernel time")
    metrics = {m.label: m.value for m in at.metric}
    # HolisticTraceAnalysis 0.5.0 on this file (tests/data/workload/README.md): 48 µs of kernels, 11,896 µs idle
    assert metrics["Kernel time"] == "48.00 µs" and metrics["GPU idle"] == "11.90 ms"
    assert not (data_dir / "uploads").exists()  # read where it lies: nothing was copied


RANKS = [ROOT / "tests" / "data" / "workload" / f"hta_recsys_sampled_rank{i}.json.gz" for i in (0, 1)]


def test_step_bench_page_puts_the_ranks_of_a_job_side_by_side(data_dir, tmp_path):
    """Two real ranks of one job (tests/data/workload/README.md), uploaded together: the straggler and the
    diagnosis first, each rank's time, each step on each rank, each rank's host during its GPU's gaps. The margin: rank 1's compute 271,973 µs against
    the other rank's 210,320 µs (HolisticTraceAnalysis' compute_time) = +29.3%."""
    at = page("pages/step_bench.py")
    uploader = next(u for u in at.get("file_uploader") if u.label == "Profiler trace")
    uploader.set_value([(p.name, p.read_bytes(), "application/gzip") for p in RANKS])
    at.run()
    at.button(key="step_bench.trace.import").click().run()
    wait_for_metric(at, "Straggler")
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Straggler"] == "rank 1" and metrics["Ranks"] == "2"
    assert metrics["Most compute: rank 1"] == f"{(271_973 - 210_320) / 1000:,.2f} ms"
    findings = next(m.value for m in at.markdown if m.value.startswith("**What stands out**")).replace("\\", "")
    assert "1. rank 1 holds the job back: its compute is +29.3% over the other rank's" in findings
    assert len(at.get("plotly_chart")) == 3 and not at.exception
    steps, gaps, ops = (frame.value for frame in at.dataframe[-3:])
    assert list(steps.index) == [551, 552] and list(steps.columns) == ["rank 0", "rank 1"]
    # each rank's operators: the embedding backward's GPU time, summed from each file (test_ranks.py)
    embedding = "torch::autograd::CppNode<SplitLookupFunction_rowwise_adagrad_Op>"
    assert list(ops.columns) == ["rank 0", "rank 1"] and ops.loc[embedding].tolist() == pytest.approx([62.879, 106.365])
    # what each rank's host did while its GPU idled: the causes add up to each rank's idle (HTA's idle_time)
    assert list(gaps.columns) == ["rank 0", "rank 1"] and "optimizer" in gaps.index
    assert gaps.sum().tolist() == pytest.approx([675.191, 651.136])
    uploads = data_dir / "uploads"
    assert not uploads.exists() or not any(uploads.iterdir())  # both uploads deleted once imported


def test_step_bench_page_says_who_the_ranks_waited_for_and_how_the_calls_were_matched(data_dir):
    """Three ranks built in tests/core/workload/test_arrivals.py, waits worked out there by hand: rank 2 arrives
    last at 2 of 3 all-reduces; the ranks waited 190, 125 and 30 µs, 345 of the all-reduce kernels' 435 µs."""
    import json

    from tests.core.workload.test_arrivals import rank_trace

    at = page("pages/step_bench.py")
    uploader = next(u for u in at.get("file_uploader") if u.label == "Profiler trace")
    uploader.set_value([(f"rank-{r}.json", json.dumps(rank_trace(r)).encode(), "application/json") for r in range(3)])
    at.run()
    at.button(key="step_bench.trace.import").click().run()
    wait_for_metric(at, "Straggler")
    findings = next(m.value for m in at.markdown if m.value.startswith("**What stands out**")).replace("\\", "")
    assert "rank 2 holds the job back: it arrives last at 2 of 3 collectives matched across the ranks" in findings
    waits = next(f.value for f in at.dataframe if "arrived last" in f.value.columns)
    assert waits["waited ms"].tolist() == pytest.approx([0.19, 0.125, 0.03])
    per_call = next(f.value for f in at.dataframe if "% waited" in f.value.columns)
    assert per_call[["kernel ms", "waited ms"]].values[0].tolist() == pytest.approx([0.435, 0.345])  # by hand there
    assert "3 collectives matched across the ranks" in [c.value for c in at.caption] and not at.exception


def test_a_folder_on_the_box_is_the_ranks_of_one_job(data_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("GPULAB_IMPORT_DIRS", str(tmp_path))
    for i, p in enumerate(RANKS):
        (tmp_path / f"rank-{i}.json.gz").write_bytes(p.read_bytes())
    (tmp_path / "rank-2.json").write_text("not a trace")
    at = page("pages/step_bench.py")
    at.text_input(key="step_bench.trace.path").input(str(tmp_path)).run()
    at.button(key="step_bench.trace.import").click().run()
    until(at, error, 120)
    assert any("rank-2.json: the profiler trace is not valid JSON" in e.value.replace("\\", "") for e in at.error)
    (tmp_path / "rank-2.json").unlink()
    at.run()
    at.button(key="step_bench.trace.import").click().run()
    wait_for_metric(at, "Straggler")
    assert {m.label: m.value for m in at.metric}["Straggler"] == "rank 1"


def test_a_path_that_is_no_file_is_refused_on_the_page(data_dir, monkeypatch, tmp_path):
    monkeypatch.setenv("GPULAB_IMPORT_DIRS", str(tmp_path))  # allowed, so whether it exists may be said
    at = page("pages/step_bench.py")
    at.text_input(key="step_bench.trace.path").input(str(tmp_path / "trace.json")).run()
    at.button(key="step_bench.trace.import").click().run()
    assert any("is not a file on this machine" in e.value for e in at.error)


def test_training_memory_plans_a_published_architecture(data_dir):
    at = page("pages/train_memory.py")
    at.radio(key="training_memory.model_source").set_value("published architecture").run()
    at.selectbox(key="training_memory.architecture").set_value("mistral-7b").run()
    assert not at.exception
    assert any("*published*: 7,241,732,096 parameters" in c.value for c in at.caption)
    assert any(c.value.startswith("mistral-7b: 7,241,732,096 parameters") for c in at.caption)
    assert any("Estimated peak" in m.label for m in at.metric)


def test_stored_imports_draw_for_compare_and_the_report(tmp_path):
    from core.experiment import Context, drive
    from core.experiments.memory_snapshot import MemorySnapshotConfig, run
    from core.experiments.profiler_trace import ProfilerTraceConfig
    from core.experiments.profiler_trace import run as run_trace
    from core.result import RunResult
    from render.plots import memory_snapshot, profiler_trace

    def stored(experiment, out, name):
        return RunResult(
            experiment=experiment,
            config={},
            device={"kind": "cpu", "name": "CPU"},
            versions={},
            started_at="2026-01-01T00:00:00",
            finished_at=None,
            status="ok",
            rows=out.rows,
            meta=out.meta,
            name=name,
        )

    runs = []
    for i, snap in enumerate((snapshots.hand_snapshot(), snapshots.big_snapshot(200))):
        path = tmp_path / f"s{i}.pickle"
        path.write_bytes(pickle.dumps(snap))
        out, _ = drive(run(MemorySnapshotConfig(path=str(path)), Context("cpu", "CPU")))
        runs.append(stored("memory-snapshot", out, f"s{i}"))
    charts = memory_snapshot.figures(runs[0])
    assert [c.name for c in charts] == [
        "snapshot-timeline",
        "snapshot-categories",
        "snapshot-fragmentation",
        "snapshot-sites-at-peak",
    ]
    assert "imported s0.pickle" in charts[0].figure.layout.title.text  # never "CPU": it was recorded elsewhere
    overlay = memory_snapshot.overlay(runs)
    assert [c.name for c in overlay] == [
        "snapshot-overlay",
        "snapshot-site-differences",
        "snapshot-category-differences",
    ]
    diff = memory_snapshot.site_differences(*runs)
    listed = diff.loc[diff["site"] != OTHER_SITES]
    assert listed["A_bytes"].sum() == sum(s["bytes"] for s in runs[0].meta["top_sites_at_peak"])
    assert diff["A_bytes"].sum() == runs[0].meta["peak_allocated_bytes"]  # the rest of the peak: one row
    assert diff["B_bytes"].sum() == runs[1].meta["peak_allocated_bytes"]
    out, _ = drive(run_trace(ProfilerTraceConfig(path=str(V100)), Context("cpu", "CPU")))
    trace_run = stored("profiler-trace", out, "t")
    names = [c.name for c in profiler_trace.figures(trace_run)]
    assert names == [
        "trace-kernel-groups",
        "trace-busy",
        "trace-idle-causes",
        "trace-launch-delay",
        "trace-overlap",
        "trace-steps",
        "trace-top-kernels",
    ]
    idle = next(c for c in profiler_trace.figures(trace_run) if c.name == "trace-idle-causes").figure
    assert [round(float(y), 3) for y in idle.data[0].y] == [11.896]  # V100: all its idle is host wait (HTA: 11,896 µs)
    # A run stored before the idle breakdown and the kernel rules (old group names, no idle/launch rows) still draws.
    old_rows = [r for r in out.rows if r["kind"] not in ("idle", "launch_delay")]
    old_rows = [r | {"group": "attention-softmax"} if r.get("group") == "attention" else r for r in old_rows]
    old_meta = {k: v for k, v in out.meta.items() if k not in ("idle_causes", "launch", "rules")}
    old = RunResult(
        experiment="profiler-trace",
        config={},
        device={"kind": "cpu", "name": "CPU"},
        versions={},
        started_at="2025-06-01T00:00:00",
        finished_at=None,
        status="ok",
        rows=old_rows,
        meta=old_meta,
        name="old",
    )
    assert [c.name for c in profiler_trace.figures(old)] == [
        "trace-kernel-groups",
        "trace-busy",
        "trace-overlap",
        "trace-steps",
        "trace-top-kernels",
    ]
    from core.rows.trace import TraceTables
    from core.workload.trace.text import report_lines

    assert not any("idle by cause" in line for line in report_lines(old_meta, TraceTables.from_rows(old_rows)))
    assert "Tesla V100-DGXS-32GB" in profiler_trace.figures(trace_run)[0].figure.layout.title.text


def test_template_kernels_and_module_frames_are_text_in_charts(tmp_path):
    """Plotly reads a subset of HTML in labels and hovers: a C++ kernel's ``<…>`` template arguments and a
    stack's ``<module>`` frame must arrive escaped (html.escape), or Plotly drops them as unknown tags."""
    import html

    from core.experiment import Context, drive
    from core.experiments.memory_snapshot import MemorySnapshotConfig
    from core.experiments.memory_snapshot import run as run_snapshot
    from core.experiments.profiler_trace import ProfilerTraceConfig
    from core.experiments.profiler_trace import run as run_trace
    from core.result import RunResult
    from render.plots import memory_snapshot, profiler_trace

    def stored(experiment, out):
        return RunResult(
            experiment=experiment,
            config={},
            device={"kind": "cpu", "name": "CPU"},
            versions={},
            started_at="2026-01-01T00:00:00",
            finished_at=None,
            status="ok",
            rows=out.rows,
            meta=out.meta,
        )

    trace = stored("profiler-trace", drive(run_trace(ProfilerTraceConfig(path=str(V100)), Context("cpu", "CPU")))[0])
    top = next(c for c in profiler_trace.figures(trace) if c.name == "trace-top-kernels").figure.data[0]
    templated = next(n for n in trace.frame()["name"].dropna() if "<" in n)
    assert html.escape(templated, quote=False) in [row[4] for row in top.customdata]
    assert not any("<" in label for label in top.y) and any("&lt;" in label for label in top.y)

    path = snapshots.real_snapshot_files()[0]
    snap = stored("memory-snapshot", drive(run_snapshot(MemorySnapshotConfig(path=path), Context("cpu", "CPU")))[0])
    sites = next(c for c in memory_snapshot.figures(snap) if c.name == "snapshot-sites-at-peak").figure.data[0]
    hovers = " ".join(sites.hovertext)
    assert "&lt;module&gt;" in hovers and "<module>" not in hovers


class ChunkedUpload:
    """An uploaded file that serves its bytes only through ``read(n)``: ``getbuffer()`` (a whole copy held
    in the server's memory) fails the test."""

    def __init__(self, name: str, data: bytes):
        self.name, self.file_id, self._data, self._at, self.reads = name, "f1", data, 0, []

    def getbuffer(self):
        raise AssertionError("the upload was taken whole with getbuffer()")

    def getvalue(self):
        raise AssertionError("the upload was taken whole with getvalue()")

    def seek(self, offset: int, whence: int = 0) -> int:
        self._at = offset
        return offset

    def read(self, n: int = -1) -> bytes:
        assert n is not None and n > 0, "the upload was read whole with read()"
        self.reads.append(n)
        chunk = self._data[self._at : self._at + n]
        self._at += len(chunk)
        return chunk


def test_an_upload_is_written_in_chunks(data_dir):
    from pages.common import uploads

    data = bytes(range(256)) * (3 * 2**20 // 256 + 7)  # 3 MiB and a bit: four chunks
    upload = ChunkedUpload("my snap.pickle", data)
    path = uploads.save_upload(upload)
    # its own folder (in its batch), its own name: the run names the file the user uploaded
    assert path.read_bytes() == data and path.parents[2] == data_dir / "uploads" and path.name == "my_snap.pickle"
    assert upload.reads and set(upload.reads) == {2**20}
    assert len(upload.reads) == 5  # four chunks, then the empty read that ends it


def test_kept_uploads_are_bounded_in_bytes_as_well_as_count(data_dir, monkeypatch):
    import os

    from pages.common import uploads

    monkeypatch.setattr(uploads, "UPLOADS_MAX_BYTES", 3 * 1024)
    monkeypatch.setattr(uploads, "_waiting", set())  # none is waiting for its import: each may go when old
    paths = []
    for i in range(5):
        paths.append(uploads.save_upload(ChunkedUpload(f"u{i}.pickle", bytes([i]) * 1024)))
        os.utime(paths[-1], (1000 + i, 1000 + i))  # distinct ages, oldest first
        uploads._waiting.clear()  # as once its import has ended without deleting it (a server stopped meanwhile)
    left = sorted((data_dir / "uploads").rglob("*.pickle"))
    assert sum(p.stat().st_size for p in left) <= 3 * 1024
    assert set(left) == set(paths[-3:])  # the newest three fit in 3 KiB; the older two were removed
    assert len(list((data_dir / "uploads").iterdir())) == 3  # their folders went with them
    big = uploads.save_upload(ChunkedUpload("big.pickle", b"x" * 4096))  # alone over the bound: still kept
    assert list((data_dir / "uploads").rglob("*.pickle")) == [big]
    assert list((data_dir / "uploads").iterdir()) == [big.parents[1]]


def test_the_upload_limit_is_the_same_in_the_config_the_page_and_the_docs():
    import tomllib

    from pages.common import uploads

    server = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())["server"]
    assert server["maxUploadSize"] == uploads.UPLOAD_LIMIT_MB == 1024
    operations = (ROOT / "docs" / "OPERATIONS.md").read_text()
    assert "| `server.maxUploadSize` (`.streamlit/config.toml`) | 1024 |" in operations
    assert "up to **1 GiB**" in operations and uploads.UPLOAD_LIMIT_TEXT == "1 GiB"
    assert "larger files: give their path on the box" in operations.lower()


def test_an_upload_is_deleted_once_imported_and_the_import_reopens_without_it(data_dir):
    snap = snapshots.big_snapshot(30)
    at = import_snapshot(page("pages/allocator.py"), "allocator.snapshot", "gone.pickle", pickle.dumps(snap))
    peak = next(m.value for m in at.metric if m.label == "Peak allocated")
    deadline = time.monotonic() + 30  # the job's end is heard in its own thread, just after the result
    while any((data_dir / "uploads").iterdir()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any((data_dir / "uploads").iterdir())
    from core.store import RunStore

    (stored,) = RunStore().list(experiment="memory-snapshot")
    assert stored.meta["file"] == "gone.pickle"  # the name the user uploaded, not the copy's
    at = page("pages/allocator.py")  # a new session: only the store and the detail folder are left
    at.selectbox(key="allocator.snapshot.reopen").set_value(stored.id).run()
    assert not at.exception, at.exception
    assert any(m.label == "Peak allocated" and m.value == peak for m in at.metric)
    assert not any("no longer on this machine" in w.value for w in at.warning)
    assert len(at.get("plotly_chart")) >= 5


def _streamlit_says(limit_mib: int) -> str:
    """The uploader's "N per file" as Streamlit's frontend writes it (base 1000, a unit up past half of the next,
    no decimals)."""
    size, units = limit_mib * 2**20, ["B", "KB", "MB", "GB"]
    unit = 0
    while unit < 3 and size > 500:
        size, unit = size / 1000, unit + 1
    return f"{size:.0f}{units[unit]}"


def test_the_uploader_s_limit_and_the_page_s_words_agree(data_dir):
    """The page says "up to 1 GiB" and the uploader under it "1GB per file" (512 MiB read "1GB" under
    "512 MB"); Compare's runs file says its limit beside its uploader the same way."""
    import tomllib

    from pages.common import uploads

    server = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())["server"]
    assert _streamlit_says(server["maxUploadSize"]) == "1GB" and uploads.UPLOAD_LIMIT_TEXT == "1 GiB"
    at = page("pages/allocator.py")
    text = " ".join(m.value for m in at.markdown)
    assert f"take up to {uploads.UPLOAD_LIMIT_TEXT};" in text and "512 MB" not in text

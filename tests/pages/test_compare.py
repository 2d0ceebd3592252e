"""Compare & export: the generic comparison (by hand-checked numbers) and the page in AppTest."""

import re

import pandas as pd
import pytest

pytest.importorskip("plotly")

from core.result import RunResult
from render import comparison
from render.plots import figures_for
from tests.pages.waiting import until

H100 = {"kind": "cuda", "name": "NVIDIA H100 80GB HBM3", "label": "cuda:0 — NVIDIA H100 80GB HBM3"}
A100 = {"kind": "cuda", "name": "NVIDIA A100-SXM4-80GB", "label": "cuda:0 — NVIDIA A100-SXM4-80GB"}
CPU = {"kind": "cpu", "name": "Test CPU", "label": "CPU — Test CPU"}


def sweep(device, tflops, run_id, experiment="sweep", dtype="bf16", started="2026-03-01T00:00:00+00:00", **config):
    """Hand-built matmul-like run: one row per (size, dtype) with the given TFLOPS values."""
    rows = [
        {"size": s, "dtype": dtype, "tflops": t, "median_ms": 2 * s**3 / (t * 1e9), "status": "ok"}
        for s, t in zip((256, 4096, 65536), tflops)
    ]
    run = RunResult(
        experiment, {"dtype": dtype, **config}, device, {"torch": "2.13.0"}, started, started, "ok", rows=rows
    )
    run.id = run_id
    return run


def test_columns_split_into_sweep_keys_and_metrics():
    df = pd.DataFrame(
        {
            "size": [1],
            "dtype": ["bf16"],
            "tflops": [1],
            "ms_median": [1],
            "peak_bytes": [3],
            "batch": [8],
            "ratio": [0.5],
            "reason": ["x"],
            "samples_ms": [[1.0, 2.0]],
            "ok": [True],
        }
    )
    assert comparison.split_columns(df) == (
        ["size", "dtype", "batch", "ok"],
        ["tflops", "ms_median", "peak_bytes", "ratio"],
    )
    assert comparison.headline_metric(["ms_median", "peak_bytes", "tflops"]) == ("tflops", "max")
    assert comparison.headline_metric(["peak_bytes", "ms_median"]) == ("ms_median", "min")


def test_headline_is_the_best_throughput_in_the_devices_unit():
    assert comparison.headline(sweep(H100, (100.0, 600.0, 550.0), "a1")) == "max TFLOPS 600"
    assert comparison.headline(sweep(CPU, (0.01, 0.0313, 0.02), "a1")) == "max GFLOPS 31.3"


def test_legend_names_what_differs():
    runs = [sweep(H100, (1, 2, 3), "a1"), sweep(A100, (1, 2, 3), "b2", dtype="fp16")]
    assert comparison.differences(runs) == ["device", "dtype"]
    assert comparison.labels(runs) == ["NVIDIA H100 80GB HBM3 · dtype=bf16", "NVIDIA A100-SXM4-80GB · dtype=fp16"]
    same = [sweep(CPU, (1, 2, 3), "c3"), sweep(CPU, (1, 2, 3), "d4")]
    assert comparison.labels(same) == ["run c3", "run d4"]


def test_delta_table_ratio_and_difference_by_hand():
    base, other = sweep(H100, (100.0, 600.0, 800.0), "a1"), sweep(A100, (50.0, 300.0, 200.0), "b2")
    table = comparison.delta_table([base, other], ["tflops"])
    assert list(table["size"]) == [256, 4096, 65536]
    assert list(table["difference"]) == [-50.0, -300.0, -600.0]
    assert list(table["ratio"]) == [0.5, 0.5, 0.25]
    assert set(table["run"]) == {"NVIDIA A100-SXM4-80GB"} and set(table["baseline"]) == {"NVIDIA H100 80GB HBM3"}


def test_delta_table_with_no_common_points_says_nothing_pairs():
    """Issue: unlike rows were once reduced to one 'median of all rows' and compared; nothing pairs now, in words."""
    base = sweep(CPU, (1.0, 2.0, 9.0), "a1")
    other = sweep(CPU, (4.0, 4.0, 4.0), "b2")
    for row in other.rows:
        row["size"] += 1  # no shared size
    table = comparison.delta_table([base, other], ["tflops"])
    assert table.empty
    assert comparison.pairing_text([base, other], table) == (
        "Nothing pairs: no row of another run has the same size as a row of the baseline."
    )


def test_a_column_rows_are_paired_on_is_no_metric_of_the_delta_table():
    """Interconnect rows pair on their size in bytes, which is also a number with a unit: the table once took it
    as a metric too and ended in a TypeError (Compare and the report of two H200 interconnect runs drew nothing)."""

    def copies(gbs: tuple[float, float], run_id: str) -> RunResult:
        rows = [
            {"kind": "host_copy", "direction": "h2d", "memory": "pinned", "bytes": b, "gbs": g, "status": "ok"}
            for b, g in zip((1 << 20, 1 << 30), gbs)
        ]
        run = RunResult("interconnect", {}, H100, {"torch": "2.13.0"}, "2026-03-01", "2026-03-01", "ok", rows=rows)
        run.id = run_id
        return run

    table = comparison.delta_table([copies((20.0, 50.0), "a1"), copies((25.0, 40.0), "b2")])
    assert list(table["metric"]) == ["gbs", "gbs"]
    assert list(table["bytes"]) == [1 << 20, 1 << 30]
    assert list(table["difference"]) == [5.0, -10.0]
    assert list(table["ratio"]) == [1.25, 0.8]


def test_a_cpu_and_a_gpu_matmul_run_pair_on_their_shared_shapes():
    """A CPU sweep (64 and 256, fp32 and bf16) against the shipped H200 run: only points with the same dtype and
    M×N×K pair, whatever else the rows carry (the device kind, TF32 flags, clocks)."""
    from pathlib import Path

    from core.store import parse_runs_file

    examples = Path(__file__).parents[2] / "examples" / "nvidia-h200-2026-11-26.json"
    h200 = next(r for r in parse_runs_file(examples.read_bytes()) if r.experiment == "matmul")
    shapes = {(r.get("dtype"), r.get("m")) for r in h200.rows if r.get("status") == "ok"}
    cpu_rows = [
        {"dtype": d, "m": n, "n": n, "k": n, "tflops": 0.01 * n / 64, "median_ms": 1.0, "status": "ok"}
        | {"device_kind": "cpu", "allow_tf32": False}
        for d in ("fp32", "bf16")
        for n in (64, 256)
    ]
    cpu = RunResult(
        "matmul", dict(h200.config), CPU, {"torch": "2.13.0"}, "2026-11-27", "2026-11-27", "ok", rows=cpu_rows
    )
    table = comparison.delta_table([h200, cpu], ["tflops"])
    expected = {(d, n) for d in ("fp32", "bf16") for n in (64, 256) if (d, n) in shapes}
    assert expected and set(zip(table["dtype"], table["m"])) == expected
    assert comparison.pairing_text([h200, cpu], table).startswith(
        f"Rows paired by dtype, m, n, k: {len(expected)} pair"
    )


def test_an_empty_setting_is_named_not_left_blank():
    runs = [
        sweep(CPU, (1, 2, 3), "a1", alloc_conf=""),
        sweep(CPU, (1, 2, 3), "b2", alloc_conf="expandable_segments:True"),
    ]
    assert comparison.labels(runs) == ["alloc_conf=(none)", "alloc_conf=expandable_segments:True"]


@pytest.mark.parametrize(
    "runs, reason",
    [
        ([sweep(CPU, (1, 2, 3), "a1")], "at least two"),
        ([sweep(CPU, (1, 2, 3), "a1"), sweep(CPU, (1, 2, 3), "b2", experiment="other")], "different experiments"),
        (
            [sweep(CPU, (1, 2, 3), "a1"), sweep(CPU, (1, 2, 3), "b2", model="tiny")],
            "incompatible settings: field(s) model",
        ),
    ],
)
def test_incompatible_runs_are_refused_with_the_reason(runs, reason):
    assert reason in comparison.compare_problem(runs)


def test_runs_without_rows_or_metrics_are_refused():
    empty = sweep(CPU, (1, 2, 3), "b2")
    empty.rows, empty.status = [], "error"
    assert "run b2 (error) has no measured rows" in comparison.compare_problem([sweep(CPU, (1, 2, 3), "a1"), empty])
    steps = [
        RunResult("probe", {}, CPU, {}, "2026-01-01T00:00:00+00:00", None, "ok", rows=[{"step": 1}]) for _ in range(2)
    ]
    assert "no measured column" in comparison.compare_problem(steps)


def test_generic_overlay_draws_one_trace_per_run_on_a_log_axis():
    runs = [sweep(H100, (1, 2, 3), "a1"), sweep(A100, (4, 5, 6), "b2"), sweep(CPU, (7, 8, 9), "c3")]
    chart = comparison.generic_overlay(runs, "tflops")
    fig = chart.figure
    assert [list(t.y) for t in fig.data] == [[1, 2, 3], [4, 5, 6], [7, 8, 9]]
    assert [t.name for t in fig.data] == ["NVIDIA H100 80GB HBM3 · bf16", "NVIDIA A100-SXM4-80GB · bf16", "CPU · bf16"]
    assert fig.layout.xaxis.type == "log"  # sizes span 256 … 65536
    assert "differs: device" in fig.layout.title.text
    assert len(chart.data) == 9 and set(chart.data["run_id"]) == {"a1", "b2", "c3"}
    with pytest.raises(ValueError, match="not a measured column"):
        comparison.generic_overlay(runs, "size")


def test_generic_figures_give_each_metric_its_own_axis():
    charts = comparison.generic_figures(sweep(H100, (1.0, 2.0, 3.0), "a1"))
    assert [c.figure.layout.yaxis.title.text for c in charts] == ["tflops", "median_ms"]
    assert list(charts[0].figure.data[0].y) == [1.0, 2.0, 3.0] and charts[0].figure.data[0].name == "bf16"
    assert "cuda:0 — NVIDIA H100 80GB HBM3" in charts[0].figure.layout.title.text


def test_probe_figures():
    run = RunResult(
        "probe",
        {"mode": "ok"},
        CPU,
        {},
        "2026-01-01T00:00:00+00:00",
        None,
        "cancelled",
        rows=[{"step": 1, "t": 100.0}, {"step": 2, "t": 100.25}, {"step": 3, "t": 101.0}],
    )
    (chart,) = figures_for(run)
    assert list(chart.figure.data[0].y) == [0.0, 0.25, 1.0]
    assert "CPU — Test CPU" in chart.figure.layout.title.text and "cancelled" in chart.figure.layout.title.text


# -- the page ----------------------------------------------------------------------------------------


def _open(app):
    at = app.run()
    at.switch_page("pages/compare.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_history_lists_runs_and_compare_draws_one_chart(app, store):
    runs = [
        sweep(H100, (100.0, 600.0, 800.0), "a1a1", started="2026-03-01T00:00:00+00:00"),
        sweep(A100, (50.0, 300.0, 200.0), "b2b2", started="2026-03-02T00:00:00+00:00"),
        sweep(CPU, (0.1, 0.2, 0.3), "c3c3", experiment="other", started="2026-03-03T00:00:00+00:00"),
    ]
    for run in runs:
        store.save(run)
    at = _open(app)
    history = at.dataframe[0].value
    assert list(history["id"]) == ["c3c3", "b2b2", "a1a1"]  # newest first
    # one unit rule: GFLOPS for the CPU run (0.3 TFLOPS = 300 GFLOPS), TFLOPS for the GPUs
    assert list(history["headline"]) == ["max GFLOPS 300", "max TFLOPS 300", "max TFLOPS 800"]
    assert set(history["device"]) == {"CPU", "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"}

    at.multiselect(key="compare.selected").set_value(["a1a1", "b2b2"]).run()
    assert not at.exception, [e.value for e in at.exception]
    charts = at.get("plotly_chart")
    assert len(charts) == 1
    assert "sweep: tflops" in charts[0].proto.spec
    deltas = at.dataframe[1].value
    assert list(deltas["ratio"]) == [0.5, 0.5, 0.25]
    assert [b.label for b in at.get("download_button")][:2] == ["Export runs file", "Report (HTML)"]

    at.multiselect(key="compare.selected").set_value(["a1a1", "c3c3"]).run()
    assert len(at.get("plotly_chart")) == 0
    assert "different experiments" in at.error[0].value


def test_open_rename_and_delete_a_run(app, store):
    store.save(sweep(H100, (100.0, 600.0, 800.0), "a1a1"))
    store.save(sweep(A100, (1.0, 2.0, 3.0), "b2b2"))
    at = _open(app)
    at.multiselect(key="compare.selected").set_value(["a1a1"]).run()
    assert len(at.get("plotly_chart")) == 2  # generic (no plot module for "sweep"): tflops and median_ms
    name_box = next(t for t in at.text_input if t.label == "Name")
    name_box.input("H100 baseline")
    next(t for t in at.text_input if t.label.startswith("Tags")).input("h100, bf16")
    next(b for b in at.button if b.label == "Save").click().run()
    assert (store.get("a1a1").name, store.get("a1a1").tags) == ("H100 baseline", ["h100", "bf16"])
    next(b for b in at.button if b.label == "Delete for good").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert [r.id for r in store.list()] == ["b2b2"]
    assert "Deleted 1 run(s)" in at.success[0].value


def test_throughput_is_also_shown_as_percent_of_each_devices_own_peak():
    h100 = sweep(H100 | {"spec": {"name": "H100 SXM", "tflops": {"bf16": 1000.0}}}, (100.0, 500.0, 800.0), "a1")
    a100 = sweep(A100 | {"spec": {"name": "A100 SXM", "tflops": {"bf16": 300.0}}}, (30.0, 150.0, 240.0), "b2")
    absolute, percent = comparison.generic_charts([h100, a100, sweep(CPU, (1, 2, 3), "c3")])
    assert [list(t.y) for t in percent.figure.data] == [[10.0, 50.0, 80.0], [10.0, 50.0, 80.0]]
    assert "no datasheet, not shown: CPU" in percent.figure.layout.title.text
    assert len(absolute.figure.data) == 3
    assert len(comparison.generic_charts([sweep(CPU, (1, 2, 3), "c3"), sweep(CPU, (1, 2, 3), "d4")])) == 1


def test_a_run_with_a_measurement_error_says_so_above_its_charts(app, store):
    from core.hardware.specs import measurement_errors
    from core.rows.matmul import MatmulPoint

    row = {
        "dtype": "bf16",
        "m": 8192,
        "n": 8192,
        "k": 8192,
        "tflops": 1000.0,
        "peak_tflops": 989.4,
        "status": "ok",
        "median_ms": 1.1,
    }
    point = MatmulPoint.from_row(row).checked()
    rows = [row | {"above_peak": point.above_peak, "measurement_error": point.measurement_error}]
    run = RunResult(
        "matmul",
        {"sizes": [8192]},
        H100,
        {},
        "2026-03-01T00:00:00+00:00",
        None,
        "ok",
        rows=rows,
        meta={"measurement_errors": measurement_errors(rows)},
    )
    run.id = "e1e1"
    store.save(run)
    at = _open(app)
    at.multiselect(key="compare.selected").set_value(["e1e1"]).run()
    assert any(
        e.value.startswith("Measurement error: above the datasheet peak: bf16 8192×8192×8192 measured 1000.0")
        for e in at.error
    ), [e.value for e in at.error]


def test_load_example_runs_imports_the_examples_through_the_validated_import(app, store, tmp_path, monkeypatch):
    from core.store import RunStore

    examples = tmp_path / "examples"
    examples.mkdir()
    elsewhere = RunStore(tmp_path / "recorded.sqlite")  # as recorded on a GPU box
    elsewhere.save(sweep(H100, (100.0, 600.0, 800.0), "f1f1"))
    (examples / "h100.json").write_text(elsewhere.export_json())
    (examples / "broken.json").write_text('{"format": "gpulab-runs", "runs": [{"id": 1}]}')
    monkeypatch.setenv("GPULAB_EXAMPLES_DIR", str(examples))
    at = _open(app)
    at.button(key="compare.examples").click().run()
    _follow(at)
    assert "Imported 1 run(s) from h100.json; 0 were already here." in at.success[0].value.replace("\\", "")
    assert any("broken.json refused, nothing of it was added" in e.value.replace("\\", "") for e in at.error)
    assert store.get("f1f1").imported and store.get("f1f1").rows == elsewhere.get("f1f1").rows


def test_without_example_runs_the_page_speaks_to_its_user_not_its_maintainer(app, tmp_path, monkeypatch):
    """No example runs: the page says what its user can do; how a maintainer records the set (a script to run
    on a GPU box and commit) is in docs/TESTING.md, not on the page."""
    monkeypatch.setenv("GPULAB_EXAMPLES_DIR", str(tmp_path / "none"))
    at = _open(app)
    text = " ".join(e.value for e in (*at.caption, *at.markdown, *at.info))
    assert "No example runs come with this copy of the lab" in text
    assert "record_reference_runs" not in text and "commit" not in text


# -- careless and hostile input (issue 15) ------------------------------------------------------------

IMAGE = "![t](http://127.0.0.1:9/track.png)"


def _markdown_sources(at) -> list[str]:
    """The source of every element Streamlit renders as Markdown."""
    kinds = ("markdown", "caption", "title", "header", "subheader", "error", "warning", "info", "success")
    return [str(e.value) for kind in kinds for e in getattr(at, kind)]


def test_user_text_is_shown_as_text_not_markdown(app, store):
    """Finding 6: a run renamed to an image in Markdown made the browser fetch its URL."""
    hostile = sweep(CPU | {"name": f"CPU {IMAGE}", "label": f"CPU — {IMAGE}"}, (1.0, 2.0, 3.0), "a1a1")
    hostile.name = f"**loud** {IMAGE} :red[x] $x^2$"
    hostile.status, hostile.error = "error", f"failed <img src=x onerror=alert(1)> {IMAGE}"
    other = sweep(CPU, (1.0, 2.0, 3.0), "b2b2", started="2026-03-02T00:00:00+00:00", **{f"k{IMAGE}": 1})
    store.save(hostile)
    store.save(other)
    at = _open(app)
    at.multiselect(key="compare.selected").set_value(["a1a1"]).run()
    assert not at.exception, [e.value for e in at.exception]
    sources = _markdown_sources(at)
    assert any("\\*\\*loud\\*\\* \\!\\[t\\]\\(http\\:" in s for s in sources), sources  # the name, escaped
    unescaped = re.compile(r"(?<!\\)(<img|!\[t|\*\*loud|:red\[|\$x)")  # not escaped by a backslash
    assert not any(unescaped.search(s) for s in sources), [s for s in sources if unescaped.search(s)]
    at.multiselect(key="compare.selected").set_value(["a1a1", "b2b2"]).run()  # "What differs" quotes config keys
    sources = _markdown_sources(at)
    assert not any(IMAGE in s for s in sources), sources


def test_history_reads_summaries_not_runs(app, store, monkeypatch):
    """Finding 13: the history loaded every whole run (8.6 s with one 150 MB run) to list them."""
    store.save(sweep(H100, (100.0, 600.0, 800.0), "a1a1"))
    store.save(sweep(A100, (50.0, 300.0, 200.0), "b2b2", started="2026-03-02T00:00:00+00:00"))

    def refuse(cls, data):
        raise AssertionError("the history decoded a whole run")

    monkeypatch.setattr(RunResult, "from_dict", classmethod(refuse))
    at = _open(app)
    assert list(at.dataframe[0].value["headline"]) == [
        "max TFLOPS 300",
        "max TFLOPS 800",
    ]  # GPU runs: TFLOPS by the unit rule
    at.text_input(key="compare.f.text").input("dtype=bf16").run()  # a filter keystroke
    assert not at.exception, [e.value for e in at.exception]
    at = app.run()  # the home page's latest runs too
    assert not at.exception and at.dataframe[-1].value["experiment"].tolist() == ["sweep", "sweep"]


def test_the_uploader_states_and_enforces_the_import_limit(app):
    """Finding 5: the uploader said 200 MB (Streamlit's default), the docs 256 MiB."""
    import tomllib

    from core.store import MAX_IMPORT_BYTES
    from tests.conftest import ROOT

    limit_mib = MAX_IMPORT_BYTES // 2**20
    at = _open(app)
    (uploader,) = at.get("file_uploader")
    assert uploader.proto.max_upload_size_mb == limit_mib
    server = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())["server"]
    # The server enforces its own setting, not the widget's: it must let a whole runs file through (it is
    # larger, for snapshot and trace uploads on other pages; this page checks the import limit itself).
    assert server["maxUploadSize"] >= limit_mib
    # The page's method file (its "How measured" expander) and the operations guide state the same limit.
    assert f"{limit_mib} MiB" in (ROOT / "docs" / "methods" / "compare.md").read_text()
    assert f"{limit_mib} MiB" in (ROOT / "docs" / "OPERATIONS.md").read_text()


def test_chart_text_from_runs_is_escaped_for_plotly():
    """Plotly reads a subset of HTML in titles and legends (links, bold): names arrive as text."""
    link = "<a href='http://127.0.0.1:9/x'>click</a>"
    a = sweep(CPU | {"kind": "cuda", "name": link, "label": link}, (1.0, 2.0, 3.0), "a1")
    b = sweep(H100, (1.0, 2.0, 3.0), "b2")
    chart = comparison.generic_overlay([a, b], "tflops")
    assert [t.name for t in chart.figure.data][0].startswith("&lt;a href='http://127.0.0.1:9/x'&gt;click&lt;/a&gt;")
    (single, _) = comparison.generic_figures(a)
    assert "<a " not in single.figure.layout.title.text and "&lt;a href=" in single.figure.layout.title.text


def _import_upload(at, name: str, content: bytes, timeout: float = 120):
    """Upload a runs file on the page, press Import and follow the worker's import to what the page says."""
    (uploader,) = at.get("file_uploader")
    uploader.set_value((name, content, "application/octet-stream"))
    at.run()
    at.button(key="compare.runs_file.import").click().run()
    return _follow(at, timeout)


def _follow(at, timeout: float = 120):
    """Draw the page once the worker's imports have ended, until it says what they came to."""
    until(at, lambda at: at.success or at.error, timeout, what="word on the imports")
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_a_runs_file_is_imported_by_a_worker_and_its_upload_deleted(app, store, data_dir, tmp_path):
    from core.store import RunStore

    elsewhere = RunStore(tmp_path / "recorded.sqlite")
    elsewhere.save(sweep(H100, (100.0, 600.0, 800.0), "f1f1"))
    at = _import_upload(_open(app), "runs.json", elsewhere.export_json().encode())
    assert "Imported 1 run(s) from runs.json; 0 were already here." in at.success[0].value.replace("\\", "")
    assert store.get("f1f1").imported and store.count() == 1
    assert not any((data_dir / "uploads").rglob("*.json"))  # the upload is gone once imported


def test_a_runs_bomb_is_refused_in_a_worker_and_the_server_stays_flat(app, store, tmp_path):
    """Issue 32, hole 1: 242 KiB of gzip (85 M ``{}``) took the server past 4 GiB when Compare parsed it."""
    import threading

    import psutil

    from tests.core.test_exchange import write_runs_bomb

    bomb = tmp_path / "runs.json.gz"
    write_runs_bomb(bomb, 85_000_000)
    at = _open(app)
    me, peak, done = psutil.Process(), [0], threading.Event()
    baseline = me.memory_info().rss

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], me.memory_info().rss)
            done.wait(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        at = _import_upload(at, "runs.json.gz", bomb.read_bytes())
    finally:
        done.set()
        sampler.join()
    (error,) = [e.value.replace("\\", "") for e in at.error]
    # refused by the inflate ratio before its containers are counted: 100× its gzip bytes
    size = bomb.stat().st_size
    assert "runs.json.gz refused, nothing of it was added" in error
    assert (
        f"the runs file ({size:,} bytes of gzip) inflates past {100 * size:,} bytes, the inflate_ratio limit" in error
    )
    assert peak[0] - baseline < 100 << 20, f"the server grew by {(peak[0] - baseline) / 2**20:,.0f} MiB"
    assert store.count() == 0


def test_two_traces_compare_by_group_and_by_operator(app, store):
    """Two trace imports selected: the waterfall by kernel group and the bars by CPU operator, each from the
    runs' own rows (matmul 2 → 3 ms; aten::mm 2 → 3 ms, aten::mul 1.5 → 0.5 ms)."""
    from tests.factories import make_run

    for run_id, mm, mul in (("d4d4", 2000.0, 1500.0), ("e5e5", 3000.0, 500.0)):
        store.save(
            make_run(
                "profiler-trace",
                [{"kind": "group", "group": "matmul", "count": 1, "total_us": mm}],
                meta={"op_totals": [{"op": "aten::mm", "gpu_time_us": mm, "calls": 1},
                                    {"op": "aten::mul", "gpu_time_us": mul, "calls": 1}]},
                id=run_id,
                name=run_id,
            )
        )  # fmt: skip
    at = _open(app)
    at.multiselect(key="compare.selected").set_value(["d4d4", "e5e5"]).run()
    assert not at.exception, [e.value for e in at.exception]
    specs = [chart.proto.spec for chart in at.get("plotly_chart")]
    assert any("What got slower: GPU time" in spec for spec in specs)
    (ops,) = [spec for spec in specs if "What got slower by CPU operator" in spec]
    assert '"x":[-1.0,1.0]' in ops.replace(" ", "") and "aten::mul" in ops and "aten::mm" in ops

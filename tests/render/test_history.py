"""How stored runs are listed: the history table, its filter and sort orders, a run's label, its settings and
device as tables, each checked on hand-built runs."""

import pytest

pytest.importorskip("plotly")

from core.result import RunResult, RunSummary
from render import history
from tests.factories import make_run

H100 = {"kind": "cuda", "name": "NVIDIA H100 80GB HBM3", "label": "cuda:0 — NVIDIA H100 80GB HBM3"}
CPU = {"kind": "cpu", "name": "Test CPU", "label": "CPU — Test CPU"}


def run(run_id, experiment, device, started, status="ok", name="", tags=(), **config) -> RunResult:
    times = {"started_at": started, "finished_at": started}
    return make_run(
        experiment, device=device, status=status, config=config, name=name, id=run_id, tags=list(tags), **times
    )


def summary(r: RunResult) -> RunSummary:
    return RunSummary.of(r, payload_bytes=100, headline="max TFLOPS 800")


RUNS = [
    summary(run("a1a1a1a1a1", "matmul", H100, "2026-03-01T10:00:00+00:00", name="Baseline", dtype="bf16")),
    summary(run("b2b2b2b2b2", "matmul", CPU, "2026-03-03T10:00:00+00:00", status="error", tags=["Nightly"])),
    summary(run("c3c3c3c3c3", "allocator", H100, "2026-03-02T10:00:00+00:00", name="alpha", dtype="fp32")),
]


def ids(runs) -> list[str]:
    return [r.id[:2] for r in runs]


def test_the_history_table_has_one_row_per_run_in_its_columns():
    frame = history.history_frame(RUNS)
    assert frame.columns.tolist() == history.HISTORY_COLUMNS
    assert frame.iloc[0].to_dict() == {
        "id": "a1a1a1a1",
        "started": "2026-03-01 10:00:00",
        "experiment": "matmul",
        "device": "NVIDIA H100 80GB HBM3",
        "settings": "dtype=bf16",
        "status": "ok",
        "headline": "max TFLOPS 800",
        "name": "Baseline",
        "tags": "",
        "imported": False,
    }
    assert frame.iloc[1]["device"] == "CPU" and frame.iloc[1]["tags"] == "Nightly"
    assert history.history_frame([]).columns.tolist() == history.HISTORY_COLUMNS  # an empty store: the columns


@pytest.mark.parametrize(
    "keep, expected",
    [
        (history.Filter(), ["b2", "c3", "a1"]),
        (history.Filter(experiments=["matmul"]), ["b2", "a1"]),
        (history.Filter(statuses=["error"]), ["b2"]),
        (history.Filter(device=" h100 "), ["c3", "a1"]),  # case and spaces ignored
        (history.Filter(device="cuda:0"), ["c3", "a1"]),  # the device's label counts too
        (history.Filter(text="NIGHTLY"), ["b2"]),  # a tag
        (history.Filter(text="dtype=fp32"), ["c3"]),  # a setting
        (history.Filter(experiments=["matmul"], device="h100"), ["a1"]),  # every condition at once
    ],
)
def test_the_filter_keeps_runs_matching_every_condition(keep, expected):
    assert ids(history.shown(RUNS, keep, "newest first")) == expected


@pytest.mark.parametrize(
    "sort, expected",
    [
        ("newest first", ["b2", "c3", "a1"]),
        ("experiment", ["c3", "a1", "b2"]),  # allocator before matmul; equal keys keep their order
        ("device", ["b2", "a1", "c3"]),  # "CPU" before "NVIDIA…"
        ("status", ["b2", "a1", "c3"]),
        ("name", ["b2", "c3", "a1"]),  # "", "alpha", "baseline": case ignored
    ],
)
def test_each_sort_order(sort, expected):
    assert ids(history.shown(RUNS, history.Filter(), sort)) == expected


def test_labels_in_pickers():
    assert history.run_label(RUNS[0]) == "a1a1a1a1 · matmul · NVIDIA H100 80GB HBM3 · 2026-03-01 10:00 · Baseline"
    assert history.run_label(RUNS[1]) == "b2b2b2b2 · matmul · CPU · 2026-03-03 10:00"
    imported = run("d4d4d4d4d4", "memory-snapshot", CPU, "2026-03-04T08:30:59+00:00")
    imported.meta = {"file": "snap.pickle"}
    assert history.import_label(imported) == "snap.pickle · 2026-03-04 08:30 · d4d4d4"
    imported.name = "before the change"
    assert history.import_label(imported) == "before the change · 2026-03-04 08:30 · d4d4d4"


def test_a_run_s_settings_and_device_as_tables():
    r = run("e5", "matmul", H100, "2026-03-01T00:00:00+00:00", dtypes=["bf16", "fp32"], size=4096)
    assert history.settings_frame(r).values.tolist() == [["dtypes", "bf16,fp32"], ["size", "4096"]]
    device = history.device_frame(r)
    assert device.columns.tolist() == ["property", "value"]
    pairs = dict(device.values.tolist())
    assert pairs["device"] == "cuda:0 — NVIDIA H100 80GB HBM3" and pairs["kind"] == "cuda"
    assert pairs["torch"] == "2.13.0" and "cuda" not in pairs and "memory" not in pairs  # empty ones left out

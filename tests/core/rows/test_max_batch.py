"""The max-batch search's rows and meta (:mod:`core.rows.max_batch`): stored ones round-trip with their keys in
their order, an older row reads with defaults, and the chart reads the fields."""

from __future__ import annotations

from dataclasses import replace

from core.rows.max_batch import BatchProbe, MaxBatchSummary
from render.plots.max_batch import figures
from tests.factories import make_run

GIB = 2**30
# two probes and the answer as the engine stores them (a search of the small preset on an 80 GiB card)
FIT = {
    "batch": 64,
    "fits": True,
    "peak_measured_bytes": 30 * GIB,
    "peak_estimated_bytes": 31 * GIB,
    "failure": None,
    "error": None,
}
OOM = {
    "batch": 128,
    "fits": False,
    "peak_measured_bytes": None,
    "peak_estimated_bytes": 62 * GIB,
    "failure": "out of memory",
    "error": "CUDA out of memory",
}
META = {
    "max_batch_measured": 64,
    "max_batch_estimated": 100,
    "memory_bytes": 80 * GIB,
    "config": {"model": "small", "context": 256},
    "requested_device": "cuda:0",
}


def test_stored_rows_and_meta_round_trip_with_their_keys_in_order():
    for row in (FIT, OOM):
        back = BatchProbe.from_row(row).to_row()
        assert back == row and list(back) == list(row)
    meta = MaxBatchSummary.from_meta(META).to_meta()
    assert meta == META and list(meta) == list(META)


def test_a_row_without_the_failure_keys_reads_as_none():
    probe = BatchProbe.from_row({"batch": 8, "fits": True, "peak_measured_bytes": GIB, "peak_estimated_bytes": GIB})
    assert (probe.failure, probe.error, probe.extra) == (None, None, {})


def test_the_chart_reads_the_fields():
    run = make_run("max-batch", [FIT, OOM], meta=META, config={"model": "small", "context": 256})
    fig = figures(run)[0].figure
    assert fig.layout.title.text.startswith("Max batch that fits: 64 (estimate 100)")
    assert [s.y0 for s in fig.layout.shapes] == [80.0]  # the device's 80 GiB line
    smaller = replace(MaxBatchSummary.from_meta(META), memory_bytes=40 * GIB, max_batch_measured=32)
    other = figures(make_run("max-batch", [FIT, OOM], meta=smaller.to_meta(), config=run.config))[0].figure
    assert other.layout.title.text.startswith("Max batch that fits: 32") and other.layout.shapes[0].y0 == 40.0

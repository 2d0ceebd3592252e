"""A training step's stored memory summary (:mod:`core.rows.train_memory`): a stored meta round-trips with its keys
in their order, a meta stored without the newer keys reads with defaults, and the charts read the fields."""

from __future__ import annotations

from dataclasses import replace

from core.rows.train_memory import PhaseBand, TrainMemorySummary
from render.plots.train_memory import comparison_figure, timeline_figure
from tests.factories import make_run

CATEGORIES = {"parameters": 5645568, "gradients": 5645568, "optimizer_state": 11291220}
# the meta of `train-memory --model tiny --batch 2 --context 32` on a CPU, stored before it had a type (the
# estimate's activations and the breakdowns' last three categories cut to keep it short)
META = {
    "peak_measured_bytes": 27705204,
    "peak_estimated_bytes": 27705428,
    "error_pct": 0.0008085123646806571,
    "peak_phase": "optimizer",
    "peak_phase_estimated": "optimizer",
    "peak_moment_estimated": "adamw step",
    "peak_t_ms": 34.681788,
    "breakdown_measured_bytes": CATEGORIES | {"activations": 4},
    "breakdown_estimated_bytes": CATEGORIES | {"activations": 0},
    "trace_peak_bytes": 27705204,
    "bands": [
        {"step": 1, "phase": "forward", "start_ms": 0.0, "end_ms": 8.423873},
        {"step": 1, "phase": "backward", "start_ms": 8.423873, "end_ms": 24.661929},
        {"step": 1, "phase": "optimizer", "start_ms": 24.661929, "end_ms": 43.682288},
        {"step": 1, "phase": "zero_grad", "start_ms": 43.682288, "end_ms": 44.225272},
    ],
    "params": 1411392,
    "allocations": 1243,
    "estimate": {
        "model": "tiny",
        "params": 1411392,
        "precision": "fp32",
        "optimizer": "adamw",
        "batch": 2,
        "context": 32,
        "target": "cpu",
        "peak_estimated_bytes": 27705428,
        "peak_phase": "optimizer",
        "peak_moment": "adamw step",
        "breakdown_bytes": CATEGORIES | {"activations": 0},
        "activations_bytes": {"per_layer_attention": 148736},
        "cuda_context_allowance_bytes": 0,
        "device_total_estimated_bytes": 27705428,
        "label": "estimate (analytical)",
        "stack": "course",
        "attention_note": "written out: scores, causal mask, softmax, @V (saves the b·h·s² scores)",
        "attention_scores_bytes": 65536,
        "memory_bytes": 25276510208,
        "max_batch_estimated": 5841,
        "fits": True,
    },
    "byte_columns": ["parameters", "gradients", "optimizer_state", "activations", "temporaries", "other"],
    "method": "CPU: torch.profiler profile_memory allocation events",
    "worker": {"pid": 1, "fresh": True},
    "requested_device": "auto",
}
_ZERO = dict.fromkeys(("parameters", "gradients", "optimizer_state", "activations", "temporaries", "other"), 0)
ROWS = [{"t_ms": 0.1, "total_bytes": 1} | _ZERO, {"t_ms": 40.0, "total_bytes": 2} | _ZERO]


def test_a_stored_meta_round_trips_with_its_keys_in_order():
    back = TrainMemorySummary.from_meta(META).to_meta()
    assert back == META and list(back) == list(META)
    assert list(back["estimate"]) == list(META["estimate"]) and list(back["bands"][0]) == list(META["bands"][0])


def test_a_meta_without_the_newer_keys_reads_with_defaults():
    kept = ("peak_measured_bytes", "peak_estimated_bytes", "error_pct", "peak_phase", "peak_t_ms")
    old = {k: META[k] for k in (*kept, "breakdown_measured_bytes", "breakdown_estimated_bytes")}
    summary = TrainMemorySummary.from_meta(old)
    assert (summary.bands, summary.estimate, summary.peak_phase_estimated, summary.method) == (None, None, None, None)
    assert summary.to_meta() == old


def test_the_charts_read_the_fields():
    summary = TrainMemorySummary.from_meta(META)
    run = make_run("train-memory", ROWS, meta=META, config={"model": "tiny", "batch": 2})
    detail = comparison_figure(run).layout.title.text
    assert "error +0.0%" in detail and "26.4 MiB (optimizer)" in detail  # 27705204 B / 2**20
    worse = make_run("train-memory", ROWS, meta=replace(summary, error_pct=-12.34).to_meta(), config=run.config)
    assert "error -12.3%" in comparison_figure(worse).layout.title.text
    shaded = [s.fillcolor for s in timeline_figure(run).layout.shapes]
    assert len(shaded) == 4  # one band per phase of the stored step
    one = make_run("train-memory", ROWS, meta=replace(summary, bands=(PhaseBand(1, "forward", 0, 1),)).to_meta())
    assert len(timeline_figure(one).layout.shapes) == 1

"""Where an imported run came from (:mod:`core.rows.provenance`), as the charts' device label says it: a shipped
example in its own label's words, another file recorded elsewhere on the GPU it names, a measurement here by its
device."""

from __future__ import annotations

from core.result import RunResult
from core.rows.provenance import Provenance
from render.style import device_label

HANG = {"name": "hang-skipped-rank", "title": "4 ranks", "label": "recorded by this lab: a gloo job on CPU (x.py)",
        "source_path": "flight_recorder/skipped_rank"}  # fmt: skip


def run_of(meta: dict) -> RunResult:
    device = {"kind": "cpu", "name": "Xeon", "torch_device": "cpu"}
    return RunResult("profiler-trace", {}, device, {}, "t", None, "ok", meta=meta)


def test_an_import_is_labelled_by_where_it_was_recorded():
    imported = {"recorded_on": "the machines that ran the job (imported files)", "file": "skipped_rank"}
    assert device_label(run_of(imported | {"example": HANG})) == f"imported skipped_rank — {HANG['label']}"
    trace = imported | {"file": "t.json", "device_name": "NVIDIA H100", "example": {"repository": "github.com/x/y"}}
    assert device_label(run_of(trace)) == "imported t.json — recorded elsewhere on NVIDIA H100 (github.com/x/y)"
    assert device_label(run_of(imported | {"file": "t.json"})) == "imported t.json — recorded elsewhere"
    assert device_label(run_of({"file": "t.json"})) == "CPU — Xeon"  # measured here: its device


def test_a_label_that_is_not_text_is_not_said():
    p = Provenance.from_meta({"recorded_on": "x", "example": {"label": None, "repository": "github.com/x/y"}})
    assert p.example is not None and (p.example.label, p.example.repository) == ("", "github.com/x/y")

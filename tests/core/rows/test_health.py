"""A health check's rows typed: the rows of the check recorded on an H200 (examples/) read with every value they
stored, a row the verdict builds written back under the keys and in the order checks store, a cluster's marks
after them, and the views reading the fields."""

import json
from dataclasses import replace

from core.hardware.clocks import ClockReading
from core.health.figures import Figure
from core.health.verdict import figure_row, step_row
from core.health.words import at, cell, marks, place, source, while_measured, why
from core.rows.health import (
    ClocksSaid,
    FleetShare,
    HealthRow,
    HealthSummary,
    JudgedAgain,
    NodeSummary,
    Rule,
    health_rows,
)
from tests.conftest import ROOT
from tests.core.health.test_verdict import H100_SXM

EXAMPLE = ROOT / "examples" / "nvidia-h200-2026-11-26.json"


def stored_check_rows() -> list[dict]:
    (check,) = [r for r in json.loads(EXAMPLE.read_text())["runs"] if r["experiment"] == "health"]
    return check["rows"]


def test_the_h200_check_s_rows_read_with_every_value_they_stored():
    rows = stored_check_rows()
    typed = health_rows(rows)
    for row, read in zip(rows, typed):
        written = read.to_row()
        assert {k: written[k] for k in row} == row  # a check stored before later keys: its own keys as stored
    step = typed[-1]  # "all_reduce busbw": one GPU, no peer
    assert (
        not step.is_figure and step.unit == "" and (step.verdict, step.reason) == ("not measured", "one GPU: no peer")
    )
    burst = typed[0]
    assert burst.is_figure and burst.history is None and burst.device_kind == "cuda"
    assert (burst.figure, burst.where, burst.measured) == (rows[0]["figure"], "cuda:0", rows[0]["measured"])


def test_a_judged_soak_row_writes_the_keys_and_order_checks_store():
    reading = ClockReading(1455.0, 693.0, 700.0, 1980.0, ("sw_power_cap",))
    row = figure_row(
        Figure("matmul bf16 sustained", "cuda:0", 661.0, "TFLOPS", H100_SXM, "matmul bf16", clocks=reading)
    )
    stored = row.to_row()
    assert list(stored) == [
        "figure", "where", "device", "device_kind", "measured", "unit", "reference", "reference_kind",
        "reference_label", "reference_card", "source", "date", "fraction", "verdict", "reason", "slowdown", "shape",
        "searched", "not_comparable", "published_note", "clocks", "per_clock", "history", "regressed",
    ]  # fmt: skip
    assert stored["clocks"] == {
        "sm_clock_mhz": 1455.0,
        "power_w": 693.0,
        "power_limit_w": 700.0,
        "max_sm_clock_mhz": 1980.0,
        "reasons": ["sw_power_cap"],
        "state": "power-limited",
        "faults": [],
        "text": "SM 1455 MHz, 693 W of 700 W, NVML: sw_power_cap",
    }
    # per clock: 661 TFLOPS at 1.455 GHz = 454.3 TFLOPS/GHz against the sheet's 989.4 at 1,830 MHz (540.7)
    assert stored["per_clock"]["efficiency"] == (661.0 / 1.455) / (989.4 / 1.830)
    assert HealthRow.from_row(stored) == row and HealthRow.from_row(stored).to_row() == stored


def test_a_step_row_stores_no_figure_keys_and_a_cluster_s_marks_come_last():
    row = step_row("doctor: every experiment runs", "cpu", "pass", "", "3 of 3 ok", "ok or unsupported")
    assert "device" not in row.to_row() and "shape" not in row.to_row()
    marked = replace(row, slow_gpu=True, node="node 1 (b)", host="b", fleet=FleetShare(700.0, 0.8, 4), outlier=True)
    stored = marked.to_row()
    assert list(stored)[-5:] == ["slow_gpu", "node", "host", "fleet", "outlier"]
    assert stored["fleet"] == {"median": 700.0, "fraction": 0.8, "values": 4}
    assert HealthRow.from_row(stored) == marked
    assert HealthRow.from_row(stored | {"added_later": 1}).to_row()["added_later"] == 1  # a later key is kept


def test_the_words_read_the_fields():
    clocks = ClocksSaid.of(ClockReading(1455.0, 693.0, 700.0, 1980.0, ("hw_slowdown",)))
    row = HealthRow(
        figure="matmul bf16 burst",
        where="cuda:1",
        verdict="far below",
        reason="the card named a fault",
        measured=394.2,
        unit="TFLOPS",
        device="NVIDIA H200",
        device_kind="cuda",
        source="this lab",
        date="2026-11-26",
        reference_card="measured on an H200 SXM",
        clocks=clocks,
        regressed=True,
        slow_gpu=True,
        node="node 1 (b)",
    )
    assert cell(row, row.measured) == "394.2 TFLOPS" and cell(replace(row, device_kind="cpu"), 0.5) == "500 GFLOPS"
    assert at(row) == "matmul bf16 burst @ node 1 (b) @ cuda:1" and place(row) == "node 1 (b) cuda:1"
    assert marks(row) == " · regressed · slow GPU" and marks(replace(row, regressed=False, slow_gpu=False)) == ""
    assert while_measured(row) == "SM 1455 MHz, 693 W of 700 W, NVML: hw_slowdown — fault"
    assert why(row) == "the card named a fault" and source(row) == "this lab (2026-11-26); measured on an H200 SXM"


def test_the_h200_check_s_meta_reads_as_its_summary():
    from core.result import RunResult

    (check,) = [r for r in json.loads(EXAMPLE.read_text())["runs"] if r["experiment"] == "health"]
    said = HealthSummary.from_run(RunResult.from_dict(check))
    meta = check["meta"]
    assert said.verdict == meta["verdict"] and said.answer == meta["answer"]
    assert (said.host, list(said.devices)) == (meta["box"]["host"], meta["box"]["devices"])
    assert said.wall_s == meta["wall_s"] and list(said.run_ids) == meta["run_ids"]
    assert said.judged is None and said.judged_again is None and said.nodes == ()  # stored before those were kept
    cluster = RunResult.from_dict(
        check
        | {
            "meta": meta
            | {
                "nodes": [{"node": "node 0 (a)", "host": "a", "status": "ok", "error": "", "rows": 6}],
                "judged_again": {"of": "c380", "at": "2026-11-29T00:00:00", "origin": "vm", "imported": True},
                "rules": [{"rule": "fleet", "says": "10 % below", "source": "gpu-fryer"}],
            }
        }
    )
    said = HealthSummary.from_run(cluster)
    assert said.nodes == (NodeSummary("node 0 (a)", "a", "ok", "", 6),)
    assert said.judged_again == JudgedAgain("c380", "2026-11-29T00:00:00", "vm", True)
    assert said.rules == (Rule("fleet", "10 % below", "gpu-fryer"),)

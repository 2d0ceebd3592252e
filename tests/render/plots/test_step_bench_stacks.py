"""The step benchmark's stacks side by side and its size × precision grid, drawn from hand-made rows."""

import pytest

pytest.importorskip("plotly")

from render.plots.step_bench import config_table, figures, host_bound_stacks, stack_table, tables
from tests.factories import make_run

CONFIG = {"model": "gpt2-124m", "batch": 64, "context": 1024, "precision": "bf16-autocast", "optimizer": "adamw"}


def _summary(stack: str, ms: float, mfu: float, busy: float, **more) -> dict:
    return {
        "kind": "summary",
        "stack": stack,
        "precision": "bf16-autocast",
        "step_ms_median": ms,
        "step_ms_p20": ms * 0.99,
        "step_ms_p80": ms * 1.01,
        "tokens_per_s": 65536 / (ms / 1e3),
        "achieved_tflops": mfu * 989.4,
        "mfu": mfu,
        "mfu_measured": mfu * 989.4 / 794.5,
        "mfu_unit": mfu,
        "busy": busy,
        "warmup_steps_run": 6,
        "steady": True,
        "compile_s": more.get("compile_s"),
        "peak_estimated_bytes": 40 * 2**30,
        "peak_measured_bytes": 41 * 2**30,
    }


def _single(*summaries):
    run = make_run("step-bench", list(summaries), {"batch": 64}, config=CONFIG | {"stacks": ["course", "modern"]})
    run.device |= {"kind": "cuda", "name": "NVIDIA H100 80GB HBM3"}
    return run


def test_course_and_modern_side_by_side_with_their_three_mfus():
    run = _single(_summary("course", 400.0, 0.12, 0.55), _summary("modern", 120.0, 0.40, 0.97, compile_s=41.5))
    table = stack_table(run)
    assert list(table["stack"]) == ["course", "modern"]
    # the fractions as percentages, by hand: 0.12 → 12.0, 0.40 × 989.4 / 794.5 = 0.4981 → 49.81
    assert list(table["MFU (bf16 dense peak) (%)"]) == [12.0, 40.0]
    assert list(table["MFU (measured bf16 ceiling) (%)"]) == pytest.approx([14.94, 49.81], abs=0.01)
    assert list(table["device busy (%)"]) == [55.0, 97.0]
    assert list(table["compile (s)"]) == ["—", "41.5"]
    assert list(table["peak memory: planner / measured"]) == ["40.0 GiB / 41.0 GiB"] * 2
    assert host_bound_stacks(tables(run).summaries) == ["course · bf16-autocast (55% busy)"]
    chart = next(c for c in figures(run) if c.name == "step-stacks")
    assert [t.name for t in chart.figure.data] == [
        "MFU (bf16 dense peak)",
        "MFU (measured bf16 ceiling)",
        "MFU (own unit's peak)",
    ]
    assert list(chart.figure.data[0].y) == pytest.approx([12.0, 40.0])


def test_a_run_stored_before_stacks_is_the_course_s():
    old = _summary("course", 59.0, 0.054, 0.45)
    old.pop("stack")
    run = _single(old)
    assert list(stack_table(run)["stack"]) == ["course"]
    assert "step-stacks" not in [c.name for c in figures(run)]  # one stack: nothing to set side by side


def _point(model: str, params: int, precision: str, tokens: float, mfu: float) -> dict:
    return {
        "kind": "grid",
        "model": model,
        "params": params,
        "precision": precision,
        "stack": "modern",
        "status": "ok",
        "reason": None,
        "step_ms_median": 1.0,
        "tokens_per_s": tokens,
        "mfu": mfu,
        "busy": 0.95,
    }


def test_the_grid_plots_tokens_and_mfu_against_parameters():
    rows = [
        _point("gpt2-124m", 123_587_328, "fp32", 200_000.0, 0.05),
        _point("gpt2-124m", 123_587_328, "bf16-autocast", 260_000.0, 0.07),
        _point("2.7B", 3_406_809_600, "fp32", 5_000.0, 0.10),
        _point("2.7B", 3_406_809_600, "bf16-autocast", 22_000.0, 0.45),
        {"kind": "grid", "model": "llama-3-8b", "params": 8_030_261_248, "precision": "fp32", "stack": "modern"}
        | {"status": "refused", "reason": "needs 130 GiB"},
    ]
    run = make_run("step-bench", rows, {}, config=CONFIG | {"models": ["gpt2-124m", "2.7B", "llama-3-8b"]})
    tokens, mfu = figures(run)
    assert (tokens.name, mfu.name) == ("step-grid-tokens", "step-grid-mfu")
    lines = {t.name: t for t in tokens.figure.data}
    assert list(lines["bf16-autocast"].x) == [123_587_328, 3_406_809_600]
    assert list(lines["bf16-autocast"].y) == [260_000.0, 22_000.0]
    assert list({t.name: t for t in mfu.figure.data}["bf16-autocast"].y) == pytest.approx([7.0, 45.0])
    assert tokens.figure.layout.xaxis.type == "log" and "parameters" in tokens.figure.layout.xaxis.title.text
    assert "refused" in list(tokens.data["status"])  # the table keeps what could not run, with why
    table = config_table(run)  # as the page lists it: never None or nan
    refused = table.loc[table["status"] == "refused"].iloc[0]
    assert refused["tokens_per_s"] == "—" and refused["reason"] == "needs 130 GiB"

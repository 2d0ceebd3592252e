"""The step benchmark's charts on hand-made rows: phase times, cold against warm steps on a log axis that spans
the data, kernel groups that add up to the step, and a precision sweep that shows the modes it could not run."""

import math

import pytest

pytest.importorskip("plotly")

from core.rows.step_bench import StackSummary
from render.plots.step_bench import figures, overlay
from tests.factories import make_run


def _run(rows, config, meta=None):
    return make_run("step-bench", rows, meta, config=config)


SINGLE = {
    "model": "tiny",
    "batch": 2,
    "context": 16,
    "precision": "fp32",
    "optimizer": "adamw",
    "sweep": False,
    "cold_steps": 3,
    "warmup_steps": 2,
}


def charts_y_title(rows) -> str:
    groups = next(c for c in figures(_run(rows, SINGLE)) if c.name == "step-kernel-groups")
    return groups.figure.layout.yaxis.title.text


def test_single_run_figures_from_rows():
    rows = [
        {"kind": "sample", "series": s, "precision": "fp32", "step": i, "phase": p, "ms": ms}
        for s, base in (("cold", 50.0), ("warm", 10.0))
        for i in (1, 2, 3)
        for p, ms in (
            ("forward", base),
            ("backward", 2 * base),
            ("optimizer", 1.0),
            ("zero_grad", 0.1),
            ("step", 3 * base + 1.1),
        )
    ]
    rows += [
        {
            "kind": "group",
            "scope": sc,
            "group": g,
            "ms_per_step": 1.0,
            "share": 1 / 6,
            "flops_share": {"matmul": 0.99, "attention-softmax": 0.01}.get(g),
        }
        for sc in ("forward", "step")
        for g in ("matmul", "attention-softmax", "elementwise", "normalisation", "optimizer", "other")
    ]
    # the engine's summary: the warm steps' median, 3 × 10.0 + 1.1 ms (the chart draws it, never recomputes it)
    rows += [{"kind": "summary", "precision": "fp32", "step_ms_median": 31.1}]
    rows += [
        {
            "kind": "kernel",
            "scope": "step",
            "rank": 1,
            "name": "aten::mm",
            "group": "matmul",
            "count_per_step": 45.0,
            "ms_per_step": 3.0,
            "share": 0.5,
        }
    ]
    from render.plots.step_bench import SHARE_COLUMN, kernel_table

    # the page's table gives each kernel's share in %, as the group chart beside it, not as a fraction
    table = kernel_table(_run(rows, SINGLE))
    assert "share" not in table.columns and list(table[SHARE_COLUMN]) == [50.0]
    assert SHARE_COLUMN.removeprefix("share of ") in charts_y_title(rows)
    charts = {c.name: c for c in figures(_run(rows, SINGLE))}
    assert list(charts) == [
        "step-phase-times",
        "step-cold-vs-warm",
        "step-kernel-groups",
        "step-time-vs-flops",
        "step-top-kernels",
    ]
    cold = charts["step-cold-vs-warm"].figure
    assert [list(t.y) for t in cold.data[:2]] == [[50.0 * 3 + 1.1] * 3, [10.0 * 3 + 1.1] * 3]
    assert [list(t.x) for t in cold.data[:2]] == [[1, 2, 3], [6, 7, 8]]  # 3 cold + 2 warm-up steps before
    # the log axis spans the data, by hand: log10(31.1 / 1.5) … log10(151.1 × 1.5) — not up to 10^77
    assert list(cold.layout.yaxis.range) == pytest.approx([math.log10(31.1 / 1.5), math.log10(151.1 * 1.5)])
    assert not cold.layout.annotations and cold.data[2].name == "warm median 31.10 ms"
    stacked = charts["step-kernel-groups"].figure
    assert sum(t.y[0] for t in stacked.data) == pytest.approx(100.0)


def test_sweep_figures_show_unsupported_modes():
    rows = [
        {
            "kind": "precision",
            "precision": "fp32",
            "status": "ok",
            "reason": None,
            "step_ms_median": 10.0,
            "step_ms_p20": 9.0,
            "step_ms_p80": 11.0,
            "tokens_per_s": 3200.0,
            "speedup_vs_fp32": 1.0,
        },
        {"kind": "precision", "precision": "tf32", "status": "unsupported", "reason": "unsupported on CPU: x"},
        {
            "kind": "precision",
            "precision": "bf16",
            "status": "ok",
            "reason": None,
            "step_ms_median": 5.0,
            "step_ms_p20": 4.0,
            "step_ms_p80": 6.0,
            "tokens_per_s": 6400.0,
            "speedup_vs_fp32": 2.0,
        },
    ]
    run = _run(rows, SINGLE | {"sweep": True})
    ms, tokens = figures(run)
    assert list(ms.figure.data[0].x) == ["fp32", "bf16"]
    assert [a.text for a in ms.figure.layout.annotations] == ["unsupported"]
    assert list(tokens.figure.data[0].text) == ["1.00× fp32", "2.00× fp32"]
    (chart,) = overlay([run])
    assert sorted(chart.data["step_ms_median"]) == [5.0, 10.0]


@pytest.mark.parametrize(
    "ratio, says, never",
    [
        (3.2, "3.2× the warmed-up median: slower; the first steps pay for first-touch page faults", "no first-call"),
        (1.0, "1.0× the warmed-up median: no slower than the warmed-up steps", "page faults"),
        (0.6, "0.6× the warmed-up median: faster than the warmed-up steps", "page faults"),
    ],
)
def test_the_first_step_s_words_follow_its_figures(ratio, says, never):
    """What the first steps pay for is said only when they were slower than the warm median."""
    from core.experiments.step_bench import COLD_INCLUDES
    from render.plots.step_bench import cold_text

    text = cold_text(StackSummary(first_step_ms=10.0 * ratio, first_step_over_median=ratio), COLD_INCLUDES["cpu"])
    assert says in text and never not in text
    assert cold_text(StackSummary(), None) == ""

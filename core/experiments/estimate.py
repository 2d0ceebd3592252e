"""``estimate``: the memory planner — where every byte of a training step should go, without running it.

The arithmetic lives in :mod:`core.transformer.planner` (torch-free, shared with ``train-memory`` and the
pages); this module makes its answer a run that is stored, compared and charted like a measurement,
always labelled *estimate*. It runs in-process (no worker, no torch): the answer takes milliseconds.
"""

from __future__ import annotations

from dataclasses import replace

from core.experiment import Context, Experiment, Output, Progress
from core.hardware.device import describe_no_device
from core.rows.estimate import EstimateMoment, EstimatePlan
from core.transformer.planner import CATEGORIES, EstimateConfig, fit_text, max_batch, moments, peak, plan
from core.transformer.stack import ATTENTION_NOTES
from core.units import GIB, bytes_text


def run(cfg: EstimateConfig, ctx: Context):
    memory = int(cfg.memory_gib * GIB)
    if not memory and ctx.device == "cpu":
        memory = describe_no_device("cpu").get("total_memory_bytes") or 0
    yield Progress(0, 1, "estimating")
    result = plan(cfg, memory or None)
    rows = [EstimateMoment(m.label, m.phase, m.total_bytes, m.bytes).to_row() for m in moments(cfg)]
    note = None
    if cfg.memory_gib == 0 and ctx.device == "cpu" and cfg.target == "cuda":
        note = "max batch computed for this machine's RAM; pass --memory-gib for a GPU"
    elif not memory:
        note = (
            "no max batch: the planner runs without touching the GPU, so give its memory with "
            "--memory-gib (python -m core info shows it)"
        )
    fused = replace(cfg, attention="sdpa") if result.attention_scores_bytes else None
    meta = replace(
        result,
        byte_columns=CATEGORIES,  # the rows' category columns are bytes
        memory_note=note,
        fp32_peak_estimated_bytes=peak(replace(cfg, precision="fp32")).total_bytes,
        fused_attention_peak_estimated_bytes=peak(fused).total_bytes if fused else None,
        fused_attention_max_batch_estimated=max_batch(fused, memory) if fused and memory else None,
    ).to_meta()
    return Output(rows=rows, meta=meta)


def answer_lines(rows: list[dict], meta: dict) -> list[str]:
    """The plan in words: the step, the attention it models, the peak, and whether it fits, said plainly."""
    plan = EstimatePlan.from_meta(meta)
    lines = [
        f"{plan.model} ({plan.params:,} parameters), {plan.precision}, {plan.optimizer}, batch "
        f"{plan.batch} × {plan.context:,} tokens, stack {plan.stack or 'course'} — attention "
        f"{plan.attention_note or ATTENTION_NOTES['course']}: estimated peak {bytes_text(plan.peak_estimated_bytes)}"
        f" at {plan.peak_moment}; {bytes_text(plan.device_total_estimated_bytes)} with the CUDA context and "
        "fragmentation allowances (estimate)."
    ]
    if plan.memory_bytes:
        lines.append(fit_text(plan))
    if plan.attention_scores_bytes:
        fused = plan.fused_attention_peak_estimated_bytes or 0
        best = plan.fused_attention_max_batch_estimated
        lines.append(
            f"{bytes_text(plan.attention_scores_bytes)} of it is the b·h·s² attention scores the written-out "
            f"attention saves; a fused attention (--attention sdpa) saves none: peak {bytes_text(fused)}"
            + (f", largest batch {best:,}." if best else ".")
        )
    return lines


EXPERIMENTS = [
    Experiment(
        name="estimate",
        title="Training memory planner (estimate)",
        config_type=EstimateConfig,
        run=run,
        description=(__doc__ or "").partition("\n")[0],
        in_process=True,
        answer=answer_lines,
    )
]

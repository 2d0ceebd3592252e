"""The planner's stored answer (:mod:`core.rows.estimate`): a stored plan round-trips with its keys in their order,
a plan stored before stacks reads with defaults, and the answer's words read the fields."""

from __future__ import annotations

from dataclasses import replace

from core.experiments.estimate import answer_lines
from core.rows.estimate import EstimateMoment, EstimatePlan
from core.transformer.planner import fit_text
from core.transformer.presets import get_preset
from render.plots.estimate import activations_caption, model_caption, published_caption

NOTE = "written out: scores, causal mask, softmax, @V (saves the b·h·s² scores)"
# the meta of `estimate --memory-gib 16` (tiny, fp32, adamw, batch 4 × 256, CPU box), stored before it had a type
META = {
    "model": "tiny",
    "params": 1411392,
    "precision": "fp32",
    "optimizer": "adamw",
    "batch": 4,
    "context": 256,
    "target": "cuda",
    "peak_estimated_bytes": 229916416,
    "peak_phase": "backward",
    "peak_moment": "cross-entropy backward (grad of log-probs and logits)",
    "breakdown_bytes": {
        "parameters": 5645568,
        "gradients": 0,
        "optimizer_state": 11291136,
        "activations": 63918080,
        "temporaries": 81920000,
        "other": 67141632,
    },
    "activations_bytes": {
        "per_layer_attention": 6098944,
        "per_layer_mlp": 4984832,
        "per_layer_weight_copies": 0,
        "final_norm_head_loss": 41750528,
        "per_layer_checkpoint_input": 262144,
    },
    "cuda_context_allowance_bytes": 629145600,
    "device_total_estimated_bytes": 870557836,
    "label": "estimate (analytical)",
    "stack": "course",
    "attention_note": NOTE,
    "attention_scores_bytes": 8388608,
    "memory_bytes": 17179869184,
    "max_batch_estimated": 430,
    "fits": True,
    "byte_columns": ["parameters", "gradients", "optimizer_state", "activations", "temporaries", "other"],
    "fp32_peak_estimated_bytes": 229916416,
    "fused_attention_peak_estimated_bytes": 221953792,
    "fused_attention_max_batch_estimated": 454,
    "worker": {"pid": 27332, "fresh": False, "env": {}, "in_process": True, "memory_cap_bytes": None},
    "requested_device": "auto",
}
ROW = {
    "moment": "cross-entropy backward (grad of log-probs and logits)",
    "phase": "backward",
    "total_bytes": 229916416,
    "parameters": 5645568,
    "gradients": 0,
    "optimizer_state": 11291136,
    "activations": 63918080,
    "temporaries": 81920000,
    "other": 67141632,
}
# keys a plan has gained since the first stored ones
NEWER = ("stack", "attention_note", "attention_scores_bytes", "fp32_peak_estimated_bytes", "byte_columns")


def test_a_stored_plan_and_moment_round_trip_with_their_keys_in_order():
    back = EstimatePlan.from_meta(META).to_meta()
    assert back == META and list(back) == list(META)
    row = EstimateMoment.from_row(ROW).to_row()
    assert row == ROW and list(row) == list(ROW)


def test_no_memory_keeps_the_fused_batch_as_stored_none_and_writes_no_fit():
    meta = {k: v for k, v in META.items() if k not in ("memory_bytes", "max_batch_estimated", "fits")}
    meta["fused_attention_max_batch_estimated"] = None
    back = EstimatePlan.from_meta(meta).to_meta()
    assert back == meta and list(back) == list(meta)


def test_a_plan_stored_before_stacks_reads_with_defaults_and_the_course_attention():
    old = {k: v for k, v in META.items() if k not in NEWER and not k.startswith("fused")}
    plan = EstimatePlan.from_meta(old)
    assert (plan.stack, plan.attention_note, plan.attention_scores_bytes) == (None, None, None)
    assert plan.to_meta() == old
    first = answer_lines([], old)[0]
    assert "stack course — attention written out: scores" in first
    assert len(answer_lines([], old)) == 2  # no scores line: the run said nothing about them


def test_the_fit_in_words_reads_the_fields():
    plan = EstimatePlan.from_meta(META)
    # 16 GiB given, 430 the largest batch (from the stored run), batch 4 fits
    assert fit_text(plan) == "In 16.0 GiB it fits: the largest batch that fits is 430 (estimate)."
    assert fit_text(replace(plan, fits=False)) == (
        "In 16.0 GiB it does not fit at batch 4: the largest batch that fits is 430 (estimate)."
    )
    none = replace(plan, max_batch_estimated=0, batch_1_device_total_estimated_bytes=3 * 2**20)
    assert fit_text(none) == "Does not fit in 16.0 GiB, not even batch 1: it needs 3.0 MiB (estimate)."


def test_the_answer_reads_the_fields():
    lines = answer_lines([], META)
    assert "estimated peak 219.3 MiB at cross-entropy backward" in lines[0]  # 229916416 B / 2**20
    assert lines[2].endswith("peak 211.7 MiB, largest batch 454.")  # 221953792 / 2**20
    changed = answer_lines([], EstimatePlan.from_meta(META | {"fused_attention_max_batch_estimated": 7}).to_meta())
    assert changed[2].endswith("largest batch 7.")


def test_the_page_caption_reads_the_plan_fields():
    plan = EstimatePlan.from_meta(META)
    caption = activations_caption(plan)
    assert caption.startswith("Predicted peak at *cross-entropy backward (grad of log-probs and logits)*.")
    assert "per layer attention 5.8 MiB, per layer mlp 4.8 MiB" in caption  # 6098944 and 4984832 B over 2**20
    assert "per layer mlp 1.0 KiB" in activations_caption(replace(plan, activations_bytes={"per_layer_mlp": 1024}))


def test_the_model_caption_names_kv_heads_and_tied_embeddings_only_where_they_differ():
    spec = "custom:d_model=64,layers=1,heads=8,kv_heads=2,d_ff=128,vocab=100,tied=1"
    assert model_caption(spec, get_preset(spec)).endswith(
        "(d_model 64, 1 layers, 8 heads, 2 KV heads, tied embeddings)."
    )
    # tiny: d 64, 2 layers, 4 heads; 2·(4·64² + 3·64·256 + 2·64) + 64 + 10000·64·2 parameters, counted by hand
    tiny = 2 * (4 * 64 * 64 + 3 * 64 * 256 + 2 * 64) + 64 + 10_000 * 64 * 2
    assert model_caption("tiny", get_preset("tiny")) == f"tiny: {tiny:,} parameters (d_model 64, 2 layers, 4 heads)."


def test_the_published_caption_sets_the_published_count_beside_the_counted_one():
    arch = replace(get_preset("tiny"), published_params=1_400_000, source="a model card")
    assert published_caption(arch) == (
        "*published*: 1,400,000 parameters — a model card. Counted from the shapes here: 1,411,392."
    )

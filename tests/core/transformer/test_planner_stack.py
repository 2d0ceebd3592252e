"""The planner's rules for today's stack (fused attention, foreach and fused AdamW, bf16 with fp32 masters)
against byte counts worked out by hand, and against the step measured on the CPU (profiler allocation events)."""

import pytest

from core.experiments.train_memory import TrainMemoryConfig, measure
from core.transformer.planner import EstimateConfig, moments, peak, plan
from core.transformer.stack import parse_stack

# tiny: d_model 64, d_ff 256, 2 layers, 4 heads, vocabulary 10,000
D, F, LAYERS, HEADS, VOCAB = 64, 256, 2, 4, 10_000
N = 2 * VOCAB * D + LAYERS * (4 * D * D + 3 * D * F + 2 * D) + D  # 1,411,392 parameters
TENSORS = 9 * LAYERS + 3


def _plan(spec: str = "course", **kw):
    return plan(EstimateConfig(model="tiny", **parse_stack(spec).setup_fields(), **kw))


def test_fused_attention_saves_no_score_matrix():
    # per layer the written-out attention saves the b·h·s² softmax output (fp32) and the s×s bool mask where
    # the fused one saves its output (b·s·d) and the b·h·s fp32 log-sum-exp instead
    b, s = 2, 128
    course = _plan(batch=b, context=s, target="cpu").activations_bytes["per_layer_attention"]
    fused = _plan("sdpa", batch=b, context=s, target="cpu").activations_bytes["per_layer_attention"]
    assert course - fused == b * HEADS * s * s * 4 + s * s - b * s * D * 4 - b * HEADS * s * 4 == 471_040


def test_fused_attention_keeps_grouped_keys_and_values_at_their_own_heads():
    # custom model: d 64, 8 heads, 2 key/value heads (kv_dim 16): k and v saved at b·s·16 each, fp32
    spec = "custom:d_model=64,layers=1,heads=8,kv_heads=2,d_ff=128,vocab=100"
    b, s = 1, 32
    bsd, bs_kv = b * s * 64, b * s * 16
    per_layer = plan(EstimateConfig(model=spec, attention="sdpa", batch=b, context=s, target="cpu"))
    norm = 2 * bsd * 4 + b * s * 4
    expected = norm + bsd * 4 + 3 * bsd * 4 + 2 * bs_kv * 4 + b * 8 * s * 4
    assert (per_layer.activations_bytes or {})["per_layer_attention"] == expected


@pytest.mark.parametrize(
    "impl, temporaries",
    [
        ("course", 2 * VOCAB * D * 4),  # sqrt(v) and sqrt(v)/c of the largest tensor (the embedding)
        ("foreach", N * 4),  # sqrt(v) of every tensor at once
        ("fused", 0),
    ],
)
def test_adamw_temporaries_by_implementation(impl, temporaries):
    cfg = EstimateConfig(model="tiny", batch=1, context=8, **parse_stack(impl).setup_fields())
    (step,) = [m for m in moments(cfg) if m.phase == "optimizer"]
    assert step.bytes["temporaries"] == temporaries


def test_fused_adamw_keeps_its_step_counters_on_the_gpu():
    loop = _plan(batch=1, context=8, target="cuda").breakdown_bytes["optimizer_state"]
    fused = _plan("fused", batch=1, context=8, target="cuda").breakdown_bytes["optimizer_state"]
    assert loop == 8 * N and fused == 8 * N + TENSORS * 512  # one smallest allocator block a counter


def test_bf16_with_fp32_masters_by_hand():
    # at the optimizer: bf16 weights 2N, the masters' fp32 gradients 4N, masters + Adam's moments 12N
    out = _plan(precision="bf16-master", batch=1, context=8, target="cuda")
    got = out.breakdown_bytes or {}
    assert (got["parameters"], got["gradients"], got["optimizer_state"]) == (2 * N, 4 * N, 12 * N)


def test_fp8_blocks_keep_no_weight_copies_and_the_head_keeps_its_own():
    # torchao's Float8Linear saves its bf16 input and the fp32 weight itself; the LM head stays a bf16 linear
    bf16 = _plan(precision="bf16-autocast", batch=1, context=8).activations_bytes
    fp8 = _plan(precision="fp8", batch=1, context=8).activations_bytes
    assert bf16["per_layer_weight_copies"] == (4 * D * D + 3 * D * F) * 2 and fp8["per_layer_weight_copies"] == 0
    assert fp8["final_norm_head_loss"] == bf16["final_norm_head_loss"]
    assert fp8["per_layer_attention"] == bf16["per_layer_attention"] and fp8["per_layer_mlp"] == bf16["per_layer_mlp"]


def test_every_stack_plans_the_largest_models():
    for spec in ("course", "modern", "sdpa+foreach", "modern+checkpoint"):
        for precision in ("bf16-autocast", "bf16-master", "fp8"):
            cfg = EstimateConfig(
                model="2.7B", precision=precision, batch=8, context=2048, **parse_stack(spec).setup_fields()
            )
            assert peak(cfg).total_bytes > 0


@pytest.mark.parametrize(
    "precision, spec, batch, context",
    [
        ("fp32", "sdpa", 2, 128),
        ("bf16-autocast", "sdpa+foreach", 2, 64),
        ("fp32", "fused", 1, 8),
        ("bf16-master", "foreach", 1, 8),
        ("bf16-master", "sdpa+fused", 2, 128),
        pytest.param("bf16-autocast", "modern", 2, 128, marks=pytest.mark.slow),  # compiled
    ],
)
def test_modern_stack_estimate_within_10_percent_on_cpu(precision, spec, batch, context):
    stack = parse_stack(spec)
    cfg = TrainMemoryConfig(model="tiny", precision=precision, batch=batch, context=context, **stack.setup_fields())
    measured = measure(cfg, "cpu")["peak_bytes"]
    estimated = plan(cfg.estimate_config("cpu")).peak_estimated_bytes
    assert abs(estimated - measured) <= 0.10 * measured


def _saved_by_partitioner(precision: str, attention: str, batch: int, context: int) -> int:
    """Bytes of every value the compiled forward graph saves for backward (the weights and token ids aside), as
    inductor's partitioner chooses them: its forward graph's outputs after the logits."""
    import functools

    import torch
    from torch._functorch.aot_autograd import aot_module_simplified
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    from core.transformer.model import build_model
    from core.transformer.presets import get_preset

    torch._dynamo.reset()  # a model compiled earlier in this process (another test's step) must not be reused
    saved: list[int] = []

    def forward_graph(graph, _inputs):
        (outputs,) = [n.args[0] for n in graph.graph.nodes if n.op == "output"]
        for node in outputs[1:]:
            if not node.name.startswith("primals"):
                saved.append(node.meta["val"].numel() * node.meta["val"].element_size())
        return graph

    def backend(graph, inputs):
        partition = functools.partial(min_cut_rematerialization_partition, compiler="inductor")
        return aot_module_simplified(
            graph, inputs, fw_compiler=forward_graph, bw_compiler=lambda g, _: g, partition_fn=partition
        )

    preset = get_preset("tiny")
    model = torch.compile(build_model(preset, context, attention=attention), backend=backend)
    tokens = torch.randint(0, preset.vocab_size, (batch, context))
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16-autocast"):
        model(tokens).float().sum().backward()
    return sum(saved)


@pytest.mark.slow
@pytest.mark.parametrize("precision, attention", [("fp32", "course"), ("bf16-autocast", "sdpa")])
def test_compiled_activations_are_what_the_partitioner_saves(precision, attention):
    b, s = 2, 128
    cfg = EstimateConfig(model="tiny", precision=precision, attention=attention, compile=True, batch=b, context=s)
    acts = plan(cfg).activations_bytes
    per_layer = acts["per_layer_attention"] + acts["per_layer_mlp"] + acts["per_layer_weight_copies"]
    log_probs = b * s * VOCAB * 4  # the loss runs outside the compiled model
    # the first block keeps output_proj's output (matmul dtype) where the others keep the fp32 residual sum
    first_layer = b * s * D * (4 - (2 if precision == "bf16-autocast" else 4))
    expected = LAYERS * per_layer - first_layer + acts["final_norm_head_loss"] - log_probs
    assert _saved_by_partitioner(precision, attention, b, s) == expected

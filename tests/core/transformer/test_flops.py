"""Model FLOPs against hand arithmetic and against torch's own FLOP counter."""

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from core.transformer.flops import count_step_flops
from core.transformer.model import build_model, random_batch
from core.transformer.presets import get_preset


def test_tiny_preset_by_hand():
    # tiny: d=64, d_ff=256, 2 layers, 4 heads, vocab 10,000
    model = build_model(get_preset("tiny"), context_length=16)
    flops = count_step_flops(model, batch=2, context=16)
    per_layer = 4 * 64 * 64 + 3 * 64 * 256  # q, k, v, o + w1, w2, w3
    n = 2 * per_layer + 64 * 10_000  # + LM head; the embedding is a look-up
    assert flops.matmul_params == n == 771_072
    tokens = 2 * 16
    assert flops.weight_forward + flops.weight_backward == 6 * n * tokens
    # scores (b, h, s, s) from (s × d/h)·(d/h × s) and the same again for P·V: 2·2·b·s²·d per layer
    assert flops.attention_forward == 2 * (2 * 2 * 2 * 16 * 16 * 64)
    assert flops.backward == 2 * flops.forward
    assert flops.softmax_forward_estimate == 5 * 2 * 4 * 16 * 16 * 2


def test_matches_torch_flop_counter():
    """torch.utils.flop_counter counts every mm/bmm the step actually dispatches, forward and backward."""
    torch.manual_seed(0)
    model = build_model(get_preset("tiny"), context_length=24)
    x, y = random_batch(3, 24, 10_000, "cpu")
    counter = FlopCounterMode(display=False)
    with counter:
        logits = model(x)
        forward = counter.get_total_flops()
        torch.nn.functional.cross_entropy(logits.flatten(0, 1), y.flatten()).backward()
    total = counter.get_total_flops()
    flops = count_step_flops(model, batch=3, context=24)
    assert flops.forward == forward
    assert flops.total == total


@pytest.mark.parametrize("spec", ["course", "sdpa", "sdpa+fused", "checkpoint", "sdpa+foreach+checkpoint"])
@pytest.mark.parametrize("precision", ["fp32", "bf16-autocast", "bf16-master"])
def test_every_stack_counts_what_torch_counts(spec, precision):
    """The model FLOPs of every stack against torch.utils.flop_counter over the whole step. The convention is the
    field's (nanoGPT, llm.c, torchtitan: 6·N + 12·L·s·d a token): the full s×s score matrix, causal or not, and no
    recomputation. So the fused attention runs on its math backend, whose matmuls the counter sees (it counts no
    CPU flash kernel, and its formula for the fused backward adds the recomputed scores); a checkpointed step's
    count is the model FLOPs plus the blocks' forward once more (the LM head is not checkpointed) but for each
    block's last matmul, w2, whose output no backward needs: torch's non-reentrant checkpoint stops recomputing
    once every saved tensor is back."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from core.transformer.planner import MeasuredStep
    from core.transformer.stack import parse_stack
    from core.transformer.training import build_step

    b, s = 2, 24
    preset = get_preset("custom:d_model=64,layers=2,heads=8,kv_heads=2,d_ff=96,vocab=500")
    stack = parse_stack(spec)
    setup = MeasuredStep(model=preset.name, precision=precision, batch=b, context=s, **stack.setup_fields())
    torch.manual_seed(0)
    step = build_step(setup, "cpu")
    x, y = random_batch(b, s, preset.vocab_size, "cpu")
    counter = FlopCounterMode(display=False)
    with counter, sdpa_kernel(SDPBackend.MATH):
        step.run(x, y)
    flops = count_step_flops(step.module, batch=b, context=s)
    head_forward = 2 * preset.vocab_size * preset.d_model * b * s
    w2_forward = preset.num_layers * 2 * preset.d_ff * preset.d_model * b * s
    recomputed = flops.forward - head_forward - w2_forward if stack.checkpointing else 0
    assert counter.get_total_flops() == flops.total + recomputed

"""Model FLOPs against hand arithmetic and against torch's own FLOP counter."""

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

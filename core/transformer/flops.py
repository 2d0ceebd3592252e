"""Model FLOPs of one training step, counted from the model's own modules.

The MFU convention: every weight that takes part in a matmul costs 2 FLOPs per token forward and
4 backward (grad of input + grad of weight), i.e. 6·N·tokens; the attention score (Q·Kᵀ) and value
(P·V) matmuls add 4·b·s²·d per layer forward and twice that backward. Embedding look-ups, norms and
element-wise ops are not model FLOPs. Causal attention counts the full s×s score matrix, as the field's
MFU does (nanoGPT's and llm.c's ``6·N + 12·L·s·d`` a token, torchtitan's the same): the written-out
attention computes it all before masking, and a fused kernel that skips the masked half still counts as
the same model. The same figure for every stack: a fused attention, a compiled graph or a fused optimizer
changes how fast, not how much; activation checkpointing's recomputed forward is not model FLOPs (MFU, not
hardware FLOPs utilisation). Softmax FLOPs are an *estimate* (a few
operations per score element) kept apart: they only serve to show how small softmax's FLOP share
is next to its time share.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Protocol, cast

from torch import nn

# Per score element: max, subtract, exp, sum, divide (forward); y·g, row sum, subtract, multiply (backward).
SOFTMAX_FORWARD_FLOPS_PER_ELEMENT = 5
SOFTMAX_BACKWARD_FLOPS_PER_ELEMENT = 4


@dataclass(frozen=True)
class StepFlops:
    tokens: int
    matmul_params: int  # N: weights of every nn.Linear (the LM head included, the embedding not)
    weight_forward: int  # 2·N·tokens
    weight_backward: int  # 4·N·tokens
    attention_forward: int  # Q·Kᵀ and P·V, all layers
    attention_backward: int
    softmax_forward_estimate: int
    softmax_backward_estimate: int

    @property
    def forward(self) -> int:
        return self.weight_forward + self.attention_forward

    @property
    def backward(self) -> int:
        return self.weight_backward + self.attention_backward

    @property
    def total(self) -> int:
        """Model FLOPs of one training step: the MFU numerator."""
        return self.forward + self.backward

    def to_dict(self) -> dict:
        return asdict(self) | {"forward": self.forward, "backward": self.backward, "total": self.total}


class _Attention(Protocol):
    num_heads: int
    q_proj: nn.Linear


def _attention_modules(model: nn.Module) -> list[_Attention]:
    """Modules that compute scores: they own a query projection and a head count."""
    return [
        cast(_Attention, m)
        for m in model.modules()
        if hasattr(m, "num_heads") and isinstance(getattr(m, "q_proj", None), nn.Linear)
    ]


def count_step_flops(model: nn.Module, batch: int, context: int) -> StepFlops:
    """FLOPs of one forward+backward of ``model`` on ``batch`` sequences of ``context`` tokens."""
    tokens = batch * context
    n = sum(m.weight.numel() for m in model.modules() if isinstance(m, nn.Linear))
    attention = softmax_elements = 0
    for m in _attention_modules(model):
        d = m.q_proj.out_features
        attention += 2 * (2 * batch * context * context * d)  # scores and weighted values
        softmax_elements += batch * m.num_heads * context * context
    return StepFlops(
        tokens=tokens,
        matmul_params=n,
        weight_forward=2 * n * tokens,
        weight_backward=4 * n * tokens,
        attention_forward=attention,
        attention_backward=2 * attention,
        softmax_forward_estimate=SOFTMAX_FORWARD_FLOPS_PER_ELEMENT * softmax_elements,
        softmax_backward_estimate=SOFTMAX_BACKWARD_FLOPS_PER_ELEMENT * softmax_elements,
    )

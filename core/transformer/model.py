"""The course's Transformer LM, built from a :class:`~core.transformer.presets.ModelPreset`.

Pre-norm decoder-only: RMSNorm, causal multi-head self-attention with RoPE, SwiGLU feed-forward,
no biases, untied embedding and LM head. The course's attention is written out (scores → mask → softmax
→ @V): the b·a·s² score tensors it saves are what the memory planner counts and what the profiler shows
as softmax time. The modern stack's (``attention="sdpa"``) is one ``scaled_dot_product_attention`` call with
``is_causal=True``, computing the same function with whichever fused kernel torch picks. A preset with fewer
key/value heads (grouped-query attention) projects k and v to those heads and repeats each for its
group of query heads; a preset with tied embeddings shares one matrix between embedding and LM head.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from core.transformer.presets import ModelPreset
from core.transformer.stack import AttentionImpl

ROPE_THETA = 10_000.0


class RMSNorm(nn.Module):
    def __init__(self, d_model: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.float()  # the norm is computed in fp32 and cast back, as in the course
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return (x * self.weight.float()).to(dtype)


class RotaryEmbedding(nn.Module):
    """RoPE tables as non-persistent buffers: no parameters, not in the state dict."""

    cos: torch.Tensor
    sin: torch.Tensor

    def __init__(self, head_dim: int, max_len: int, theta: float = ROPE_THETA) -> None:
        super().__init__()
        inv = theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
        angles = torch.outer(torch.arange(max_len, dtype=torch.float32), inv)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: (b, heads, s, head_dim)
        s = x.shape[-2]
        cos, sin = self.cos[:s].to(x.dtype), self.sin[:s].to(x.dtype)
        x1, x2 = x[..., 0::2], x[..., 1::2]
        out = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)
        return out.flatten(-2)


class CausalSelfAttention(nn.Module):
    def __init__(
        self,
        d_model: int,
        num_heads: int,
        rope: RotaryEmbedding,
        num_kv_heads: int | None = None,
        attention: AttentionImpl = "course",
    ) -> None:
        super().__init__()
        kv_heads = num_kv_heads or num_heads
        if d_model % num_heads:
            raise ValueError(f"d_model {d_model} is not divisible by num_heads {num_heads}")
        if num_heads % kv_heads:
            raise ValueError(f"num_heads {num_heads} is not a multiple of num_kv_heads {kv_heads}")
        self.num_heads, self.num_kv_heads = num_heads, kv_heads
        kv_dim = kv_heads * (d_model // num_heads)
        self.q_proj = nn.Linear(d_model, d_model, bias=False)
        self.k_proj = nn.Linear(d_model, kv_dim, bias=False)
        self.v_proj = nn.Linear(d_model, kv_dim, bias=False)
        self.output_proj = nn.Linear(d_model, d_model, bias=False)
        self.rope = rope
        self.fused = attention == "sdpa"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        h, group = self.num_heads, self.num_heads // self.num_kv_heads

        def heads(t: torch.Tensor, n: int) -> torch.Tensor:
            return t.view(b, s, n, d // h).transpose(1, 2)

        q, k, v = (
            heads(self.q_proj(x), h),
            heads(self.k_proj(x), self.num_kv_heads),
            heads(self.v_proj(x), self.num_kv_heads),
        )
        q, k = self.rope(q), self.rope(k)
        if self.fused:
            out = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=group > 1)
            return self.output_proj(out.transpose(1, 2).reshape(b, s, d))
        if group > 1:  # each key/value head serves `group` query heads
            k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(d // h)
        mask = torch.ones(s, s, dtype=torch.bool, device=x.device).triu(1)
        scores = scores.masked_fill(mask, float("-inf"))
        attn = torch.softmax(scores, dim=-1)
        out = (attn @ v).transpose(1, 2).reshape(b, s, d)
        return self.output_proj(out)


class SwiGLU(nn.Module):
    def __init__(self, d_model: int, d_ff: int) -> None:
        super().__init__()
        self.w1 = nn.Linear(d_model, d_ff, bias=False)
        self.w2 = nn.Linear(d_ff, d_model, bias=False)
        self.w3 = nn.Linear(d_model, d_ff, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(nn.functional.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    def __init__(
        self,
        d_model: int,
        d_ff: int,
        num_heads: int,
        rope: RotaryEmbedding,
        num_kv_heads: int | None = None,
        attention: AttentionImpl = "course",
    ) -> None:
        super().__init__()
        self.ln1 = RMSNorm(d_model)
        self.attn = CausalSelfAttention(d_model, num_heads, rope, num_kv_heads, attention)
        self.ln2 = RMSNorm(d_model)
        self.ffn = SwiGLU(d_model, d_ff)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.ffn(self.ln2(x))


class TransformerLM(nn.Module):
    def __init__(
        self,
        preset: ModelPreset,
        context_length: int,
        checkpointing: bool = False,
        attention: AttentionImpl = "course",
    ) -> None:
        super().__init__()
        self.preset = preset
        self.context_length = context_length
        self.checkpointing = checkpointing
        rope = RotaryEmbedding(preset.d_model // preset.num_heads, context_length)
        self.token_embeddings = nn.Embedding(preset.vocab_size, preset.d_model)
        self.layers = nn.ModuleList(
            TransformerBlock(preset.d_model, preset.d_ff, preset.num_heads, rope, preset.kv_heads, attention)
            for _ in range(preset.num_layers)
        )
        self.ln_final = RMSNorm(preset.d_model)
        self.lm_head = nn.Linear(preset.d_model, preset.vocab_size, bias=False)
        if preset.tied_embeddings:
            self.lm_head.weight = self.token_embeddings.weight

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        if tokens.shape[-1] > self.context_length:
            raise ValueError(f"sequence of {tokens.shape[-1]} tokens exceeds context length {self.context_length}")
        x = self.token_embeddings(tokens)
        for layer in self.layers:
            if self.checkpointing and self.training and torch.is_grad_enabled():
                x = checkpoint(layer, x, use_reentrant=False)
            else:
                x = layer(x)
        return self.lm_head(self.ln_final(x))


def build_model(
    preset: ModelPreset,
    context_length: int,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
    checkpointing: bool = False,
    attention: AttentionImpl = "course",
) -> TransformerLM:
    """Initialise on the target device directly (no CPU copy of a 2.7B model)."""
    with torch.device(device):
        model = TransformerLM(preset, context_length, checkpointing, attention)
    return model.to(dtype=dtype)


def random_batch(batch: int, context: int, vocab: int, device, generator: torch.Generator | None = None):
    """Random token ids (inputs, next-token targets): the lab measures speed and memory, not learning."""
    tokens = torch.randint(0, vocab, (batch, context + 1), device=device, generator=generator)
    return tokens[:, :-1], tokens[:, 1:]

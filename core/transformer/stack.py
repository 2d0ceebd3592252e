"""The software stack a training step runs on: the course's as the seeds write it, or today's.

Four switches, each its own choice, so a run can say which of them bought what: the attention (written out
as the course does, or ``scaled_dot_product_attention(is_causal=True)``, whose backend torch picks), the AdamW
implementation (the per-parameter loop, ``foreach`` or ``fused``), ``torch.compile`` and activation
checkpointing. A stack is named by its spec: ``course`` (every switch off), ``modern`` (fused attention, fused
AdamW, compiled) or the switches joined by ``+`` (``sdpa+foreach``, ``modern+checkpoint``). Torch-free, so the
planner and the CLI read it without importing torch.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal, get_args

from core.errors import ConfigError

AttentionImpl = Literal["course", "sdpa"]
OptimizerImpl = Literal["course", "foreach", "fused"]
ATTENTION_IMPLS: tuple[AttentionImpl, ...] = get_args(AttentionImpl)
OPTIMIZER_IMPLS: tuple[OptimizerImpl, ...] = get_args(OptimizerImpl)
ATTENTION_NOTES = {
    "course": "written out: scores, causal mask, softmax, @V (saves the b·h·s² scores)",
    "sdpa": "scaled_dot_product_attention(is_causal=True), the backend torch picks (flash, cuDNN, efficient, math)",
}
OPTIMIZER_NOTES = {
    "course": "a loop over the parameters (foreach=False), as a hand-written AdamW does",
    "foreach": "torch's multi-tensor kernels over every parameter at once (foreach=True)",
    "fused": "one fused kernel per parameter group (fused=True)",
}


@dataclass(frozen=True)
class Stack:
    attention: AttentionImpl = "course"
    optimizer_impl: OptimizerImpl = "course"
    compile: bool = False
    checkpointing: bool = False

    @property
    def name(self) -> str:
        """The spec that reads back as this stack (``course``, ``modern``, ``sdpa+foreach``, …)."""
        base = replace(self, checkpointing=False)
        words = ["course"] if base == COURSE else ["modern"] if base == MODERN else []
        if not words:
            words += ["sdpa"] * (self.attention == "sdpa")
            words += [self.optimizer_impl] * (self.optimizer_impl != "course")
            words += ["compile"] * self.compile
        return "+".join(words + ["checkpoint"] * self.checkpointing)

    def describe(self) -> str:
        """Every switch in words (the run's meta and the page's caption)."""
        return (
            f"attention {ATTENTION_NOTES[self.attention]}; AdamW {OPTIMIZER_NOTES[self.optimizer_impl]}; "
            f"torch.compile {'on' if self.compile else 'off'}; activation checkpointing "
            f"{'every layer' if self.checkpointing else 'off'}"
        )

    def setup_fields(self) -> dict:
        """The switches as a step setup's fields (``StepSetup`` and the configs built on it)."""
        return {
            "attention": self.attention,
            "optimizer_impl": self.optimizer_impl,
            "compile": self.compile,
            "checkpointing": self.checkpointing,
        }

    def to_dict(self) -> dict:
        return {"stack": self.name, **self.setup_fields()}


COURSE = Stack()
MODERN = Stack(attention="sdpa", optimizer_impl="fused", compile=True)
_WORDS = {
    "course": {},
    "modern": {"attention": "sdpa", "optimizer_impl": "fused", "compile": True},
    "sdpa": {"attention": "sdpa"},
    "foreach": {"optimizer_impl": "foreach"},
    "fused": {"optimizer_impl": "fused"},
    "compile": {"compile": True},
    "checkpoint": {"checkpointing": True},
}


def parse_stack(spec: str) -> Stack:
    """A stack from its spec; a word it does not know, or two that contradict, is refused in words."""
    chosen: dict[str, object] = {}
    words = [w.strip() for w in str(spec).split("+")]
    for word in words:
        if word not in _WORDS:
            raise ConfigError(f"stack {spec!r}: {word!r} is not one of {', '.join(_WORDS)} (joined by '+')")
        for key, value in _WORDS[word].items():
            if chosen.get(key, value) != value:
                raise ConfigError(f"stack {spec!r}: {word!r} contradicts another choice of {key}")
            chosen[key] = value
    return Stack(**chosen)  # pyright: ignore[reportArgumentType]

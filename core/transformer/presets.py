"""The course's Transformer presets (``../shared/seeds/README.md``), shared by every experiment.

Pre-norm decoder-only LM: RMSNorm, causal multi-head attention with RoPE, SwiGLU feed-forward of
width d_ff, no biases, untied embedding and output projection, vocabulary 10,000. ``tiny`` and
``mini`` are added so that CPU runs finish in seconds. The precision modes and optimizers that every
training experiment offers live here too: torch-free, so the planner answers without importing torch.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from core.experiment import ConfigError

PRECISIONS = ("fp32", "tf32", "bf16-autocast", "fp16-autocast", "bf16")
OPTIMIZERS = ("sgd", "sgd-momentum", "adamw")
VOCAB_SIZE = 10_000
DEFAULT_BATCH = 4
DEFAULT_CONTEXT = 256


@dataclass(frozen=True)
class ModelPreset:
    name: str
    d_model: int
    d_ff: int
    num_layers: int
    num_heads: int
    vocab_size: int = VOCAB_SIZE

    def param_count(self) -> int:
        """Parameters of the architecture above, counted from its weight shapes."""
        d, f, layers, v = self.d_model, self.d_ff, self.num_layers, self.vocab_size
        per_layer = 4 * d * d + 3 * d * f + 2 * d  # q,k,v,o; SwiGLU w1,w2,w3; two RMSNorm gains
        return 2 * v * d + layers * per_layer + d  # embedding + LM head (untied) + final norm

    def to_dict(self) -> dict:
        return asdict(self) | {"params": self.param_count()}


PRESETS: dict[str, ModelPreset] = {p.name: p for p in (
    ModelPreset("tiny", 64, 256, 2, 4),
    ModelPreset("mini", 128, 512, 4, 4),
    ModelPreset("small", 768, 3072, 12, 12),
    ModelPreset("medium", 1024, 4096, 24, 16),
    ModelPreset("large", 1280, 5120, 36, 20),
    ModelPreset("xl", 1600, 6400, 48, 25),
    ModelPreset("2.7B", 2560, 10240, 32, 32),
)}
PRESET_NAMES = tuple(PRESETS)


def get_preset(name: str) -> ModelPreset:
    try:
        return PRESETS[name]
    except KeyError:
        raise ConfigError(f"unknown model preset {name!r}; choose one of {', '.join(PRESETS)}") from None

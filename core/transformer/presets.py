"""The course's Transformer presets (``../shared/seeds/README.md``), shared by every experiment, and your own.

Pre-norm decoder-only LM: RMSNorm, causal multi-head attention with RoPE, SwiGLU feed-forward of
width d_ff, no biases, untied embedding and output projection, vocabulary 10,000. ``tiny`` and
``mini`` are added so that CPU runs finish in seconds. The precision modes and optimizers that every
training experiment offers live here too: torch-free, so the planner answers without importing torch.

The same family describes well-known open models exactly — grouped-query attention (fewer key/value
heads than query heads) and tied embeddings are the only additions — so :data:`ARCHITECTURES` holds a
few with their *published* parameter counts, and any other shape is a spec string
``custom:d_model=…,layers=…,heads=…,kv_heads=…,d_ff=…,vocab=…,tied=0|1`` that :func:`get_preset` reads.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal, get_args

from core.errors import ConfigError

# As types for config fields (their choices, which the CLI offers) and as tuples.
Precision = Literal["fp32", "tf32", "bf16-autocast", "fp16-autocast", "bf16-master", "bf16", "fp8"]
OptimizerName = Literal["sgd", "sgd-momentum", "adamw"]
PRECISIONS: tuple[Precision, ...] = get_args(Precision)
OPTIMIZERS: tuple[OptimizerName, ...] = get_args(OptimizerName)
# The dtype a precision mode's matmuls run in (its datasheet column and its colour across the lab).
DTYPE_FOR_PRECISION = {
    "fp32": "fp32",
    "tf32": "tf32",
    "bf16-autocast": "bf16",
    "fp16-autocast": "fp16",
    "bf16-master": "bf16",
    "bf16": "bf16",
    "fp8": "fp8",
}
# What each mode is, in a few words (the CLI's help, the pages' choices, the run's label).
PRECISION_NOTES = {
    "fp32": "fp32 weights and matmuls (TF32 off)",
    "tf32": "fp32 weights, matmuls on TF32 tensor cores",
    "bf16-autocast": "fp32 weights, bf16 matmuls under autocast",
    "fp16-autocast": "fp32 weights, fp16 matmuls under autocast, loss scaling",
    "bf16-master": "bf16 weights and gradients, fp32 master weights and optimizer state",
    "bf16": "everything in bf16, optimizer state too: not a training recipe (updates below bf16's spacing are lost)",
    "fp8": "fp8 matmuls (torchao Float8, tensorwise scaling) inside bf16 autocast; needs sm_89+ and torchao",
}
# The precision mode a page starts with for the dtype chosen in the sidebar: 16-bit types train under autocast.
PRECISION_FOR_DTYPE = {"fp32": "fp32", "tf32": "tf32", "bf16": "bf16-autocast", "fp16": "fp16-autocast"}
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
    num_kv_heads: int = 0  # key/value heads (grouped-query attention); 0: one per query head
    tied_embeddings: bool = False  # the LM head reuses the embedding matrix
    published_params: int | None = None  # the count the model's authors publish (ARCHITECTURES only)
    source: str = ""  # where that count is published

    @property
    def kv_heads(self) -> int:
        return self.num_kv_heads or self.num_heads

    @property
    def head_dim(self) -> int:
        return self.d_model // self.num_heads

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    def layer_matmul_params(self) -> int:
        """q and o are d×d, k and v d×kv_dim; SwiGLU's w1, w2, w3 are d×d_ff."""
        d = self.d_model
        return 2 * d * d + 2 * d * self.kv_dim + 3 * d * self.d_ff

    def param_count(self) -> int:
        """Parameters of the architecture above, counted from its weight shapes."""
        d, v = self.d_model, self.vocab_size
        per_layer = self.layer_matmul_params() + 2 * d  # two RMSNorm gains
        embeddings = v * d * (1 if self.tied_embeddings else 2)  # embedding (+ LM head when untied)
        return embeddings + self.num_layers * per_layer + d  # + final norm

    def param_tensors(self) -> int:
        """Parameter tensors: 7 matmul weights and 2 norms per layer, the embedding, the LM head if untied, the
        final norm (what a per-parameter optimizer keeps one step counter for)."""
        return 9 * self.num_layers + (2 if self.tied_embeddings else 3)

    def to_dict(self) -> dict:
        return asdict(self) | {"params": self.param_count()}


PRESETS: dict[str, ModelPreset] = {
    p.name: p
    for p in (
        ModelPreset("tiny", 64, 256, 2, 4),
        ModelPreset("mini", 128, 512, 4, 4),
        ModelPreset("small", 768, 3072, 12, 12),
        ModelPreset("medium", 1024, 4096, 24, 16),
        ModelPreset("large", 1280, 5120, 36, 20),
        ModelPreset("xl", 1600, 6400, 48, 25),
        ModelPreset("2.7B", 2560, 10240, 32, 32),
        # The course's current table keeps small, medium and large, calls the 2.7B shape "xl" and adds a 12.8B "10B".
        ModelPreset("10B", 4608, 12288, 50, 36),
    )
}
PRESET_NAMES = tuple(PRESETS)

# GPT-2's four sizes in this family, so a step compares with nanoGPT's and llm.c's: GPT-2's d_model, layers,
# heads, tied embeddings and its vocabulary padded to 50,304 (as both pad 50,257); SwiGLU's width is 8/3·d_model
# rounded up to a multiple of 64, so its three matrices hold what GPT-2's two 4·d_model ones do and the
# parameter count stays within 1% of GPT-2's published 124.4M, 354.8M, 774.0M and 1,557.6M.
GPT2_VOCAB = 50_304
GPT2_CONTEXT = 1024


def _gpt2(name: str, d_model: int, layers: int, heads: int) -> ModelPreset:
    d_ff = -(-8 * d_model // 3 // 64) * 64
    return ModelPreset(name, d_model, d_ff, layers, heads, GPT2_VOCAB, tied_embeddings=True)


GPT2_PRESETS: dict[str, ModelPreset] = {
    p.name: p
    for p in (
        _gpt2("gpt2-124m", 768, 12, 12),
        _gpt2("gpt2-350m", 1024, 24, 16),
        _gpt2("gpt2-774m", 1280, 36, 20),
        _gpt2("gpt2-1.5b", 1600, 48, 25),
    )
}

# Published architectures the family above represents exactly (RMSNorm, SwiGLU, RoPE, no biases). Shapes
# and counts from each model's config.json and the parameter count its Hugging Face model page publishes
# (safetensors metadata; the same number llama.cpp reports as general.parameter_count).
_HF = "Hugging Face model page, safetensors parameter count, and config.json of "
ARCHITECTURES: dict[str, ModelPreset] = {
    p.name: p
    for p in (
        ModelPreset(
            "llama-2-7b",
            4096,
            11008,
            32,
            32,
            32000,
            published_params=6_738_415_616,
            source=_HF + "meta-llama/Llama-2-7b-hf",
        ),
        ModelPreset(
            "llama-3-8b",
            4096,
            14336,
            32,
            32,
            128256,
            num_kv_heads=8,
            published_params=8_030_261_248,
            source=_HF + "meta-llama/Meta-Llama-3-8B",
        ),
        ModelPreset(
            "mistral-7b",
            4096,
            14336,
            32,
            32,
            32000,
            num_kv_heads=8,
            published_params=7_241_732_096,
            source=_HF + "mistralai/Mistral-7B-v0.1",
        ),
        ModelPreset(
            "llama-3.2-1b",
            2048,
            8192,
            16,
            32,
            128256,
            num_kv_heads=8,
            tied_embeddings=True,
            published_params=1_235_814_400,
            source=_HF + "meta-llama/Llama-3.2-1B",
        ),
        ModelPreset(
            "llama-3.2-3b",
            3072,
            8192,
            28,
            24,
            128256,
            num_kv_heads=8,
            tied_embeddings=True,
            published_params=3_212_749_824,
            source=_HF + "meta-llama/Llama-3.2-3B",
        ),
    )
}
ARCHITECTURE_NAMES = tuple(ARCHITECTURES)
# Every named model a training experiment offers: the course's presets, GPT-2's sizes, published architectures.
MODEL_NAMES = (*PRESET_NAMES, *GPT2_PRESETS, *ARCHITECTURE_NAMES)
# The sizes a size × precision grid climbs by default: GPT-2's ladder (comparable with nanoGPT and llm.c), then
# the course's 2.7B and published architectures, smallest first.
LADDER = ("gpt2-124m", "gpt2-350m", "gpt2-774m", "gpt2-1.5b", "2.7B", "llama-3.2-3b", "llama-3-8b")
CUSTOM_PREFIX = "custom:"
_CUSTOM_FIELDS = {
    "d_model": "d_model",
    "layers": "num_layers",
    "heads": "num_heads",
    "kv_heads": "num_kv_heads",
    "d_ff": "d_ff",
    "vocab": "vocab_size",
    "tied": "tied_embeddings",
}
_CUSTOM_LIMITS = {
    "d_model": (2, 131_072),
    "layers": (1, 1024),
    "heads": (1, 4096),
    "kv_heads": (1, 4096),
    "d_ff": (1, 1_048_576),
    "vocab": (1, 10_000_000),
    "tied": (0, 1),
}


def custom_spec(
    d_model: int,
    layers: int,
    heads: int,
    d_ff: int,
    vocab: int = VOCAB_SIZE,
    kv_heads: int | None = None,
    tied: bool = False,
) -> str:
    """The spec string of your own dimensions (what ``--model`` and the pages pass around)."""
    return (
        f"{CUSTOM_PREFIX}d_model={d_model},layers={layers},heads={heads},kv_heads={kv_heads or heads},"
        f"d_ff={d_ff},vocab={vocab},tied={int(bool(tied))}"
    )


def _parse_custom(spec: str) -> ModelPreset:
    values: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in spec[len(CUSTOM_PREFIX) :].split(","))):
        key, sep, raw = part.partition("=")
        key = key.strip()
        if not sep or key not in _CUSTOM_FIELDS:
            raise ConfigError(
                f"model: {part!r} in {spec!r} is not one of {', '.join(k + '=…' for k in _CUSTOM_FIELDS)}"
            )
        try:
            value = int(raw.strip())
        except ValueError:
            raise ConfigError(f"model: {key} must be a whole number, got {raw.strip()!r}") from None
        lo, hi = _CUSTOM_LIMITS[key]
        if not lo <= value <= hi:
            raise ConfigError(f"model: {key} must be between {lo:,} and {hi:,}, got {value:,}")
        values[key] = value
    missing = [k for k in ("d_model", "layers", "heads", "d_ff") if k not in values]
    if missing:
        raise ConfigError(
            f"model: the custom model needs {', '.join(missing)} (e.g. {custom_spec(1024, 16, 16, 2816, kv_heads=4)})"
        )
    d, heads, kv = values["d_model"], values["heads"], values.get("kv_heads", values["heads"])
    if d % heads:
        raise ConfigError(f"model: d_model {d} is not divisible by heads {heads}")
    if (d // heads) % 2:
        raise ConfigError(f"model: the head size d_model/heads = {d // heads} must be even (RoPE rotates pairs)")
    if heads % kv:
        raise ConfigError(f"model: heads {heads} is not a multiple of kv_heads {kv} (grouped-query attention)")
    canonical = custom_spec(
        d, values["layers"], heads, values["d_ff"], values.get("vocab", VOCAB_SIZE), kv, bool(values.get("tied", 0))
    )
    return ModelPreset(
        canonical,
        d,
        values["d_ff"],
        values["layers"],
        heads,
        values.get("vocab", VOCAB_SIZE),
        num_kv_heads=kv,
        tied_embeddings=bool(values.get("tied", 0)),
    )


def get_preset(name: str) -> ModelPreset:
    """A course preset, a published architecture, or a ``custom:…`` spec of your own dimensions."""
    if name in PRESETS:
        return PRESETS[name]
    if name in GPT2_PRESETS:
        return GPT2_PRESETS[name]
    if name in ARCHITECTURES:
        return ARCHITECTURES[name]
    if isinstance(name, str) and name.startswith(CUSTOM_PREFIX):
        return _parse_custom(name)
    raise ConfigError(
        f"unknown model preset {name!r}; choose one of {', '.join(PRESETS)}, GPT-2's sizes ({', '.join(GPT2_PRESETS)}), "
        f"an architecture "
        f"({', '.join(ARCHITECTURES)}) or {CUSTOM_PREFIX}d_model=…,layers=…,heads=…,kv_heads=…,"
        f"d_ff=…,vocab=…,tied=0|1"
    )

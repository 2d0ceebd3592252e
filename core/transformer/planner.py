"""The memory planner: where every byte of a training step of the course's model should go, without running it.

Pure arithmetic on the preset's shapes (no torch import), so a 2.7B plan answers instantly on a laptop.
Activations are counted tensor by tensor from what ``core/transformer/model.py`` actually saves for backward
(RMSNorm inputs in fp32, the per-linear autocast copies, the b·a·s² softmax output, SwiGLU's four
b·s·d_ff tensors, the fp32 log-probabilities of the cross-entropy). The step is then walked phase by
phase as a handful of *moments* (end of each layer's forward, start of backward, each layer's
backward, optimizer, zero_grad); the largest moment is the predicted peak, and its phase is the
predicted peak phase. Bytes are what the allocator is asked for (``max_memory_allocated`` on GPU,
the profiler's total on CPU); the CUDA context is not allocator memory and is a separate, labelled
allowance used only for "does it fit".
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, fields, replace
from typing import ClassVar, Literal

from core.errors import ConfigError
from core.rows.estimate import EstimatePlan
from core.transformer.presets import (
    ARCHITECTURE_NAMES,
    PRESET_NAMES,
    ModelPreset,
    OptimizerName,
    Precision,
    get_preset,
)
from core.transformer.stack import ATTENTION_NOTES, AttentionImpl, OptimizerImpl, Stack
from core.units import MIB, bytes_text

CATEGORIES = ("parameters", "gradients", "optimizer_state", "activations", "temporaries", "other")
# Allowances, not measurements: shown labelled as such and only used for "fits on the device".
CUDA_CONTEXT_ALLOWANCE_BYTES = 600 * MIB  # CUDA context + kernels outside the allocator (seed 001: ~0.7 GB)
CUBLAS_WORKSPACE_BYTES = 32 * MIB  # one cuBLAS workspace (per handle and stream), through the caching allocator
# cuBLAS handles are per thread: the forward pass runs on the caller's thread, backward on autograd's own
# device thread, so a training step holds two workspaces; a forward-only pass holds one.
CUBLAS_WORKSPACES_TRAINING = 2
FRAGMENTATION_ALLOWANCE = 0.05  # reserved-but-unused blocks of the caching allocator
# The CUDA caching allocator's smallest block (c10/cuda/CUDACachingAllocator.cpp, kMinBlockSize): a scalar tensor
# on the GPU, such as a fused optimizer's per-parameter step counter, takes this much.
CUDA_MIN_BLOCK_BYTES = 512


@dataclass(frozen=True)
class StepSetup:
    """The training step a plan or a measurement is about (shared by ``estimate`` and ``train-memory``)."""

    model: str = field(
        default="tiny",
        metadata={
            "help": f"model: a preset ({', '.join(PRESET_NAMES)}), an architecture ({', '.join(ARCHITECTURE_NAMES)}) or "
            f"custom:d_model=…,layers=…,heads=…,kv_heads=…,d_ff=…,vocab=…,tied=0|1"
        },
    )
    precision: Precision = field(default="fp32", metadata={"help": "precision mode"})
    optimizer: OptimizerName = field(default="adamw", metadata={"help": "optimizer"})
    batch: int = field(default=4, metadata={"help": "sequences per step"})
    context: int = field(default=256, metadata={"help": "tokens per sequence"})
    checkpointing: bool = field(default=False, metadata={"help": "activation checkpointing per layer"})
    attention: AttentionImpl = field(
        default="course", metadata={"help": "attention: course (written out) or sdpa (fused, is_causal=True)"}
    )
    optimizer_impl: OptimizerImpl = field(
        default="course", metadata={"help": "optimizer implementation: course (per-parameter loop), foreach or fused"}
    )
    compile: bool = field(default=False, metadata={"help": "torch.compile the model"})
    set_to_none: bool = field(default=True, metadata={"help": "zero_grad(set_to_none=...)"})
    forward_only: bool = field(default=False, metadata={"help": "forward pass under no_grad only"})

    # A plan is arithmetic and may be asked about anything; a measured run must fit a real machine.
    MAX_BATCH: ClassVar[int] = 1_000_000
    MAX_CONTEXT: ClassVar[int] = 1_048_576

    def __post_init__(self) -> None:
        get_preset(self.model)
        if not 1 <= self.batch <= self.MAX_BATCH:
            raise ConfigError(f"batch must be between 1 and {self.MAX_BATCH}, got {self.batch}")
        if not 1 <= self.context <= self.MAX_CONTEXT:
            raise ConfigError(f"context must be between 1 and {self.MAX_CONTEXT} tokens, got {self.context}")

    def setup(self) -> dict:
        """Just the step's fields, to build another config about the same step."""
        return {f.name: getattr(self, f.name) for f in fields(StepSetup)}

    @property
    def stack(self) -> Stack:
        return Stack(self.attention, self.optimizer_impl, self.compile, self.checkpointing)


@dataclass(frozen=True)
class MeasuredStep(StepSetup):
    """A step run for real (``train-memory``, ``max-batch``'s probes): bounded by what a machine can hold."""

    MAX_BATCH: ClassVar[int] = 65_536
    MAX_CONTEXT: ClassVar[int] = 65_536


@dataclass(frozen=True)
class EstimateConfig(StepSetup):
    target: Literal["cpu", "cuda"] = field(
        default="cuda", metadata={"help": "device kind the plan is for (autocast policies and cuBLAS workspace differ)"}
    )
    memory_gib: float = field(
        default=0.0, metadata={"help": "device memory for 'max batch that fits' (0: the run's device)"}
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0 <= self.memory_gib <= 100_000:
            raise ConfigError(f"memory_gib must be between 0 and 100000, got {self.memory_gib}")


@dataclass(frozen=True)
class Moment:
    """The predicted live bytes per category at one point of the step."""

    phase: str  # forward | backward | optimizer | zero_grad
    label: str
    bytes: dict

    @property
    def total_bytes(self) -> int:
        return int(sum(self.bytes.values()))


@dataclass(frozen=True)
class Shapes:
    """Byte sizes of one configuration's tensors, named after what they are."""

    preset: ModelPreset
    batch: int
    context: int
    precision: str
    target: str
    stack: Stack = Stack()

    @property
    def param_bytes_each(self) -> int:
        return 2 if self.precision in ("bf16", "bf16-master") else 4

    @property
    def autocast(self) -> bool:
        """fp32 weights with bf16/fp16 matmuls (fp8's linears cast their inputs to bf16 under autocast too)."""
        return self.precision.endswith("-autocast") or self.precision == "fp8"

    @property
    def compute_bytes(self) -> int:  # dtype of matmul outputs
        return 2 if self.autocast or self.param_bytes_each == 2 else 4

    @property
    def residual_bytes(self) -> int:  # embedding (fp32) + bf16 branch promotes back to fp32 under autocast
        return self.param_bytes_each

    @property
    def softmax_bytes(self) -> int:  # CUDA autocast runs softmax in fp32; CPU autocast keeps the low type
        return 4 if self.autocast and self.target == "cuda" else self.compute_bytes

    @property
    def bsd(self) -> int:
        return self.batch * self.context * self.preset.d_model

    @property
    def bsf(self) -> int:
        return self.batch * self.context * self.preset.d_ff

    @property
    def bas2(self) -> int:
        return self.batch * self.preset.num_heads * self.context**2

    @property
    def bs_kv(self) -> int:
        return self.batch * self.context * self.preset.kv_dim

    @property
    def bsv(self) -> int:
        return self.batch * self.context * self.preset.vocab_size


def param_count(preset: ModelPreset) -> int:
    return preset.param_count()


def layer_weight_elements(preset: ModelPreset) -> tuple[int, int]:
    """(matmul weight elements, norm weight elements) of one Transformer block."""
    return preset.layer_matmul_params(), 2 * preset.d_model


def norm_saved_bytes(sh: Shapes) -> int:
    """RMSNorm saves its input as fp32 (a copy under pure bf16), x·rsqrt (fp32) and rsqrt (b·s·4)."""
    return 2 * sh.bsd * 4 + sh.batch * sh.context * 4


def attention_core_saved_bytes(sh: Shapes) -> int:
    """What the attention between the projections saves. Written out: rotated q and k, v and the merged heads
    (each b·s·d; grouped k and v are repeated to every head first), the b·h·s² softmax output (and its bf16 copy
    for @V where autocast ran softmax in fp32) and the s×s causal mask. Fused (``sdpa``): q, k and v as given
    (k and v at their own heads), the output and the merged copy output_proj saves, and the b·h·s fp32
    log-sum-exp — no s² tensor."""
    c = sh.compute_bytes
    if sh.stack.attention == "sdpa":
        return 3 * sh.bsd * c + 2 * sh.bs_kv * c + sh.batch * sh.preset.num_heads * sh.context * 4
    if sh.stack.compile:  # the mask is recomputed, the softmax output kept once
        return 4 * sh.bsd * c + sh.bas2 * sh.softmax_bytes
    return (
        4 * sh.bsd * c
        + sh.bas2 * sh.softmax_bytes
        + (sh.bas2 * 2 if sh.softmax_bytes != c else 0)  # bf16 copy for @V
        + sh.context**2
    )  # causal mask (bool)


def compiled_layer_saved_bytes(sh: Shapes) -> tuple[int, int]:
    """(attention, MLP) bytes a compiled block saves. Inductor's partitioner (min-cut rematerialisation) keeps
    the block's input and each norm's rsqrt and recomputes the norms' fp32 work, keeps one copy of each norm's
    output in the matmuls' dtype, keeps the residual sum after attention, and keeps SwiGLU's w1 and w3 outputs and
    their product, recomputing silu (the forward graph's saved values, read on the CPU with torch 2.13)."""
    c, bs4 = sh.compute_bytes, sh.batch * sh.context * 4
    attention = (
        sh.bsd * sh.residual_bytes + bs4 + sh.bsd * c + attention_core_saved_bytes(sh) + sh.bsd * sh.residual_bytes
    )
    return attention, bs4 + sh.bsd * c + 3 * sh.bsf * c


def compiled_first_layer_saving(sh: Shapes) -> int:
    """Every compiled block but the first keeps the residual sum after attention (in the residual's dtype) where
    the first keeps output_proj's output (in the matmuls' dtype) — the partitioner's choice, read as above."""
    return sh.bsd * (sh.residual_bytes - sh.compute_bytes) if sh.stack.compile else 0


def layer_saved_bytes(sh: Shapes) -> dict[str, int]:
    """Saved-for-backward bytes of one block, split at the attention/MLP boundary."""
    c = sh.compute_bytes
    matmul_weights, _ = layer_weight_elements(sh.preset)
    # autocast's low-precision weight copies; torchao's Float8Linear (0.18) saves the fp32 weight itself and
    # casts it to fp8 afresh in forward and backward, so an fp8 block keeps none
    weight_copies = matmul_weights * 2 if sh.autocast and sh.precision != "fp8" else 0
    if sh.stack.compile:
        attention, mlp = compiled_layer_saved_bytes(sh)
        return {"attention": attention, "mlp": mlp, "weight_copies": weight_copies}
    ln_out_copies = 3 if sh.autocast else 1  # autocast casts the norm output once per linear (q, k, v)
    attention = (
        norm_saved_bytes(sh)
        + ln_out_copies * sh.bsd * (2 if sh.autocast else sh.residual_bytes)
        + attention_core_saved_bytes(sh)
    )
    mlp = (
        norm_saved_bytes(sh)
        + (2 if sh.autocast else 1) * sh.bsd * (2 if sh.autocast else sh.residual_bytes)
        + 4 * sh.bsf * c
    )  # w1 out (silu input), silu out, w3 out, their product (w2 input)
    return {"attention": attention, "mlp": mlp, "weight_copies": weight_copies}


def final_saved_bytes(sh: Shapes) -> int:
    """Final norm, its output (a low-precision copy under autocast), lm_head weight copy, fp32 log-probs (the
    loss runs outside the model, so compiled or not); compiled, the norm keeps its input and rsqrt only."""
    d, v = sh.preset.d_model, sh.preset.vocab_size
    head_input = sh.bsd * (2 if sh.autocast else sh.residual_bytes)
    weight_copy = v * d * 2 if sh.autocast else 0
    norm = sh.bsd * sh.residual_bytes + sh.batch * sh.context * 4 if sh.stack.compile else norm_saved_bytes(sh)
    return norm + head_input + weight_copy + sh.bsv * 4


def activation_breakdown(cfg: EstimateConfig) -> dict[str, int]:
    """Saved-for-backward bytes per part of the model (what the planner shows per layer)."""
    sh = _shapes(cfg)
    layer = layer_saved_bytes(sh)
    out = {
        "per_layer_attention": layer["attention"],
        "per_layer_mlp": layer["mlp"],
        "per_layer_weight_copies": layer["weight_copies"],
        "final_norm_head_loss": final_saved_bytes(sh),
        "per_layer_checkpoint_input": sh.bsd * sh.residual_bytes,
    }
    return out


def optimizer_state_bytes(
    preset: ModelPreset, optimizer: str, precision: str, target: str = "cuda", impl: str = "course"
) -> int:
    """Momentum (×1) or Adam's two moments (×2) in the dtype the optimizer steps, plus Adam's per-tensor step
    counters; with bf16 weights and fp32 masters, the fp32 master weights too (mixed-precision accounting counts
    them as optimizer state: 12 bytes a parameter with Adam).

    The step counters are float32 scalars that torch keeps on the *CPU* unless the optimizer is
    capturable or fused (torch/optim/adam.py, "Deliberately host `step` on CPU"): on a GPU the loop's and
    foreach's are no device memory at all, fused's one smallest allocator block each; a CPU run counts them.
    """
    n = param_count(preset)
    each = 2 if precision == "bf16" else 4
    masters = 4 * n if precision == "bf16-master" else 0
    tensors = preset.param_tensors()
    if optimizer == "sgd":
        return masters
    if optimizer == "sgd-momentum":
        return masters + n * each
    if target == "cpu":
        step_counters = tensors * 4
    else:
        step_counters = tensors * CUDA_MIN_BLOCK_BYTES if impl == "fused" else 0
    return masters + 2 * n * each + step_counters


def optimizer_temporary_bytes(preset: ModelPreset, optimizer: str, precision: str, impl: str = "course") -> int:
    """AdamW's temporaries (SGD updates in place): the per-parameter loop (foreach=False) builds sqrt(v) and
    sqrt(v)/c for the largest tensor, 2× it; foreach builds sqrt(v) for every tensor at once, 1× all of them
    (torch/optim/adam.py, ``_multi_tensor_adam``: ``exp_avg_sq_sqrt = torch._foreach_sqrt(...)``); fused none."""
    if optimizer != "adamw" or impl == "fused":
        return 0
    each = 2 if precision == "bf16" else 4
    if impl == "foreach":
        return param_count(preset) * each
    largest = max(preset.vocab_size * preset.d_model, preset.d_ff * preset.d_model)
    return 2 * largest * each


def _shapes(cfg: EstimateConfig) -> Shapes:
    return Shapes(get_preset(cfg.model), cfg.batch, cfg.context, cfg.precision, cfg.target, cfg.stack)


@dataclass(frozen=True)
class _Step:
    """What the moments of one training step share: the bytes held throughout and what each layer saves."""

    cfg: EstimateConfig
    sh: Shapes
    params: int  # also the gradients' bytes, once every gradient exists
    state: int  # optimizer state
    other: int  # inputs, RoPE tables, cuBLAS workspaces

    @classmethod
    def of(cls, cfg: EstimateConfig, sh: Shapes) -> _Step:
        p = sh.preset
        state = (
            0
            if cfg.forward_only
            else optimizer_state_bytes(p, cfg.optimizer, cfg.precision, cfg.target, cfg.optimizer_impl)
        )
        head_dim = p.d_model // p.num_heads
        workspaces = 1 if cfg.forward_only else CUBLAS_WORKSPACES_TRAINING
        other = (
            2 * cfg.batch * cfg.context * 8  # int64 inputs and targets
            + 2 * cfg.context * (head_dim // 2) * 4  # RoPE cos/sin tables
            + (workspaces * CUBLAS_WORKSPACE_BYTES if cfg.target == "cuda" else 0)
        )
        return cls(cfg, sh, param_count(p) * sh.param_bytes_each, state, other)

    @property
    def optimizer_grads(self) -> int:
        """The gradients the optimizer steps: the weights' own, or the fp32 masters' (bf16's freed as each is
        converted)."""
        return param_count(self.sh.preset) * 4 if self.cfg.precision == "bf16-master" else self.params

    @property
    def persistent_grads(self) -> int:
        """Gradients alive from the step before (zero_grad without set_to_none keeps them)."""
        return 0 if self.cfg.set_to_none or self.cfg.forward_only else self.params

    @functools.cached_property
    def layer(self) -> dict[str, int]:
        return layer_saved_bytes(self.sh)

    @property
    def layer_full(self) -> int:
        return self.layer["attention"] + self.layer["mlp"] + self.layer["weight_copies"]

    @property
    def layer_kept(self) -> int:
        """What a layer keeps for backward: with checkpointing only its input."""
        return self.sh.bsd * self.sh.residual_bytes if self.cfg.checkpointing else self.layer_full

    def kept_below(self, layer: int) -> int:
        """What the layers before ``layer`` keep for backward."""
        first = 0 if self.cfg.checkpointing or not layer else compiled_first_layer_saving(self.sh)
        return layer * self.layer_kept - first

    @property
    def all_acts(self) -> int:
        return self.kept_below(self.sh.preset.num_layers) + final_saved_bytes(self.sh)

    @property
    def scores_temp(self) -> int:
        """An attention's scores and their masked/softmaxed successor (a fused attention makes none)."""
        if self.sh.stack.attention == "sdpa":
            return 0
        return 2 * self.sh.bas2 * max(self.sh.compute_bytes, self.sh.softmax_bytes)

    @property
    def attention_backward_temp(self) -> int:
        """The gradient of the scores and of their softmax input; a fused attention's backward makes the
        gradients of q, k and v and takes its output's."""
        if self.sh.stack.attention == "sdpa":
            return 4 * self.sh.bsd * self.sh.compute_bytes
        return self.scores_temp

    @property
    def logits_temp(self) -> int:
        """The logits (+ the fp32 copy for the loss)."""
        c = self.sh.compute_bytes
        return self.sh.bsv * c + (self.sh.bsv * 4 if c != 4 else 0)

    def moment(self, phase: str, label: str, grads_live: int, acts: int, temps: int) -> Moment:
        return Moment(
            phase,
            label,
            {
                "parameters": self.params,
                "gradients": grads_live,
                "optimizer_state": self.state,
                "activations": acts,
                "temporaries": temps,
                "other": self.other,
            },
        )


def moments(cfg: EstimateConfig) -> list[Moment]:
    """The step as a sequence of predicted moments; the largest is the predicted peak."""
    sh = _shapes(cfg)
    step = _Step.of(cfg, sh)
    if cfg.forward_only:
        layer_temp = 3 * sh.bsd * max(sh.compute_bytes, sh.residual_bytes) + step.scores_temp
        return [
            step.moment("forward", "attention scores (no_grad)", 0, 0, layer_temp + sh.bsd * sh.residual_bytes),
            step.moment("forward", "logits and log-probs (no_grad)", 0, 0, step.logits_temp + sh.bsv * 4),
        ]
    return [
        *_forward(step),
        *_backward(step),
        step.moment(
            "optimizer",
            f"{cfg.optimizer} step",
            step.optimizer_grads,
            0,
            optimizer_temporary_bytes(sh.preset, cfg.optimizer, cfg.precision, cfg.optimizer_impl),
        ),
        step.moment("zero_grad", "after zero_grad", step.persistent_grads, 0, 0),
    ]


def _forward(step: _Step) -> list[Moment]:
    """Each layer's attention, then the logits."""
    checkpointing, layer = step.cfg.checkpointing, step.layer
    out = []
    for i in range(step.sh.preset.num_layers):
        acts = step.kept_below(i) + (step.layer_full if checkpointing else 0)
        acts += layer["attention"] + (0 if checkpointing else layer["weight_copies"])
        out.append(step.moment("forward", f"layer {i} attention", step.persistent_grads, acts, step.scores_temp))
    out.append(step.moment("forward", "logits and log-probs", step.persistent_grads, step.all_acts, step.logits_temp))
    return out


def _backward(step: _Step) -> list[Moment]:
    """The loss, the LM head and each layer from the last, their gradients appearing as they go."""
    sh, p, e = step.sh, step.sh.preset, step.sh.param_bytes_each
    persistent = step.persistent_grads
    out = [
        step.moment(
            "backward",
            "cross-entropy backward (grad of log-probs and logits)",
            persistent,
            step.all_acts,
            2 * sh.bsv * 4,
        )
    ]
    d, v = p.d_model, p.vocab_size
    matmul_w, norm_w = layer_weight_elements(p)
    grads_done = (v * d + d) * e  # lm_head and final norm
    head_temp = sh.bsv * sh.compute_bytes + (v * d * 2 if sh.autocast else 0)
    out.append(
        step.moment("backward", "lm_head backward", max(persistent, grads_done), step.all_acts - sh.bsv * 4, head_temp)
    )
    mlp_w = (3 * d * p.d_ff + d) * e
    for i in reversed(range(p.num_layers)):
        below = step.kept_below(i)
        # Checkpointing recomputes the whole layer before its backward; otherwise its MLP part is freed by now.
        if step.cfg.checkpointing:
            acts = below + step.layer_kept + step.layer_full
        else:
            acts = below + step.layer_full - step.layer["mlp"]
        grads = max(persistent, grads_done + mlp_w)
        out.append(step.moment("backward", f"layer {i} attention backward", grads, acts, step.attention_backward_temp))
        grads_done += (matmul_w + norm_w) * e
    out.append(step.moment("backward", "embedding backward", step.params, 0, 0))
    return out


def peak(cfg: EstimateConfig) -> Moment:
    return max(moments(cfg), key=lambda m: m.total_bytes)


def device_total_bytes(peak_bytes: int, target: str) -> int:
    """What the device must hold: allocator peak + fragmentation + CUDA context (allowances)."""
    if target != "cuda":
        return peak_bytes
    return int(peak_bytes * (1 + FRAGMENTATION_ALLOWANCE)) + CUDA_CONTEXT_ALLOWANCE_BYTES


def need_bytes(cfg: EstimateConfig) -> int:
    """What a run of this step must still get from its device (``Context.check_fits``): the device
    total without the CUDA context allowance, because the context exists when free memory is read."""
    return int(
        device_total_bytes(peak(cfg).total_bytes, cfg.target)
        - (CUDA_CONTEXT_ALLOWANCE_BYTES if cfg.target == "cuda" else 0)
    )


def max_batch(cfg: EstimateConfig, memory_bytes: int, limit: int = 1_000_000) -> int:
    """Largest batch whose estimated device total fits in ``memory_bytes`` (0 if not even batch 1)."""

    def fits(b: int) -> bool:
        return device_total_bytes(peak(replace(cfg, batch=b)).total_bytes, cfg.target) <= memory_bytes

    if not fits(1):
        return 0
    lo, hi = 1, 2
    while hi <= limit and fits(hi):
        lo, hi = hi, hi * 2
    hi = min(hi, limit + 1)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def plan(cfg: EstimateConfig, memory_bytes: int | None = None) -> EstimatePlan:
    """The planner's answer: counts, bytes per category at the predicted peak, peak phase, max batch."""
    top = peak(cfg)
    device_total = device_total_bytes(top.total_bytes, cfg.target)
    best = max_batch(cfg, memory_bytes) if memory_bytes else None
    return EstimatePlan(
        model=cfg.model,
        params=param_count(get_preset(cfg.model)),
        precision=cfg.precision,
        optimizer=cfg.optimizer,
        batch=cfg.batch,
        context=cfg.context,
        target=cfg.target,
        peak_estimated_bytes=top.total_bytes,
        peak_phase=top.phase,
        peak_moment=top.label,
        breakdown_bytes=dict(top.bytes),
        activations_bytes=activation_breakdown(cfg),
        cuda_context_allowance_bytes=CUDA_CONTEXT_ALLOWANCE_BYTES if cfg.target == "cuda" else 0,
        device_total_estimated_bytes=device_total,
        label="estimate (analytical)",
        stack=cfg.stack.name,
        attention_note=ATTENTION_NOTES[cfg.attention],
        attention_scores_bytes=scores_saved_bytes(cfg),
        memory_bytes=memory_bytes or None,
        max_batch_estimated=best,
        fits=device_total <= memory_bytes if memory_bytes else None,
        batch_1_device_total_estimated_bytes=(
            device_total_bytes(peak(replace(cfg, batch=1)).total_bytes, cfg.target)
            if memory_bytes and not best
            else None
        ),
    )


def fit_text(plan: EstimatePlan) -> str:
    """Whether a plan fits the memory it was given, in words (a largest batch of 0 is no answer by itself)."""
    memory = bytes_text(plan.memory_bytes or 0)
    best = plan.max_batch_estimated
    if not best:
        need = bytes_text(plan.batch_1_device_total_estimated_bytes or 0)
        return f"Does not fit in {memory}, not even batch 1: it needs {need} (estimate)."
    fits = "fits" if plan.fits else f"does not fit at batch {plan.batch}"
    return f"In {memory} it {fits}: the largest batch that fits is {best:,} (estimate)."


def scores_saved_bytes(cfg: EstimateConfig) -> int:
    """What the written-out attention's b·h·s² softmax outputs (and their bf16 copies) hold for backward over
    every layer: none with a fused attention or checkpointing."""
    if cfg.attention == "sdpa" or cfg.checkpointing or cfg.forward_only:
        return 0
    sh = _shapes(cfg)
    each = sh.softmax_bytes + (2 if sh.softmax_bytes != sh.compute_bytes else 0)
    return sh.preset.num_layers * sh.bas2 * each

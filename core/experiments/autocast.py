"""``autocast``: which dtype every module really sees and produces under ``torch.autocast``.

Runs the course note's toy model (Linear → ReLU → LayerNorm → Linear) and one Transformer block
of the lab's model (:mod:`core.transformer.model`) forward and backward under autocast — fp16 and bf16 on
CUDA, bf16 on CPU — plus once without autocast as the baseline. Forward hooks record each
module's input, output and parameter dtypes; full backward hooks record the dtype of the
gradient flowing out of each module; after ``backward()`` the parameters' ``.grad`` dtypes are
read. Nothing here is a table: every dtype is what the hooks saw on this device.
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from core.errors import ConfigError
from core.experiment import Context, Experiment, Output, Progress
from core.hardware import dtypes
from core.hardware.device import cuda_bf16_supported
from core.rows.autocast import ModuleDtypes

if TYPE_CHECKING:
    import torch
    from torch import nn

MODELS = ("toy", "block")
SHORT = {"float64": "fp64", "float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}  # torch's name → the lab's
AUTOCAST = ("fp16", "bf16")


@functools.cache
def _toy_model() -> type[nn.Module]:
    """The note's model class, defined once torch is imported."""
    from torch import nn

    class ToyModel(nn.Module):
        """The note's model: Linear → ReLU → LayerNorm → Linear (no biases in the Linears, as in the note)."""

        def __init__(self, in_features: int = 10, hidden: int = 10, out_features: int = 10) -> None:
            super().__init__()
            self.fc1 = nn.Linear(in_features, hidden, bias=False)
            self.relu = nn.ReLU()
            self.ln = nn.LayerNorm(hidden)
            self.fc2 = nn.Linear(hidden, out_features, bias=False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc2(self.ln(self.relu(self.fc1(x))))

    return ToyModel


@dataclass(frozen=True)
class AutocastConfig:
    models: tuple[str, ...] = field(default=MODELS, metadata={"help": "toy and/or block"})
    d_model: int = field(default=64, metadata={"help": "width of the Transformer block"})
    seq_len: int = field(default=16, metadata={"help": "tokens per sequence for the block"})

    def __post_init__(self) -> None:
        bad = [m for m in self.models if m not in MODELS]
        if bad or not self.models:
            raise ConfigError(f"models must be a non-empty list of {', '.join(MODELS)}; got {', '.join(bad)}")
        if not 8 <= self.d_model <= 4096 or self.d_model % 4:
            raise ConfigError(f"d_model must be a multiple of 4 between 8 and 4096, got {self.d_model}")
        if not 1 <= self.seq_len <= 1024:
            raise ConfigError(f"seq_len must be between 1 and 1024, got {self.seq_len}")


def _name(dtype: torch.dtype | None) -> str:
    if dtype is None:
        return ""
    name = str(dtype).removeprefix("torch.")
    return SHORT.get(name, name)


def _dtypes(values) -> str:
    """Dtypes of the tensors among ``values`` (nested tuples allowed), comma-separated, in order."""
    import torch

    found = []
    stack = list(values) if isinstance(values, (tuple, list)) else [values]
    for v in stack:
        if isinstance(v, torch.Tensor):
            found.append(_name(v.dtype))
        elif isinstance(v, (tuple, list)):
            found.extend(filter(None, _dtypes(v).split(", ")))
    return ", ".join(found)


def build(model: str, cfg: AutocastConfig, device: str) -> tuple[nn.Module, torch.Tensor]:
    import torch

    from core.transformer.model import RotaryEmbedding, TransformerBlock

    gen = torch.Generator(device=device).manual_seed(0)
    if model == "toy":
        return _toy_model()().to(device), torch.randn(10, 10, device=device, generator=gen)
    heads = 4
    rope = RotaryEmbedding(cfg.d_model // heads, cfg.seq_len)
    block = TransformerBlock(cfg.d_model, 4 * cfg.d_model, heads, rope).to(device)
    return block, torch.randn(2, cfg.seq_len, cfg.d_model, device=device, generator=gen)


def dtype_map(model: str, cfg: AutocastConfig, device: str, autocast: str) -> list[ModuleDtypes]:
    """Forward + backward of ``model`` under ``autocast`` ("none", "fp16", "bf16"); one row per module."""
    import torch

    torch.manual_seed(0)
    net, x = build(model, cfg, device)
    seen: dict[str, dict] = {}
    handles = []
    for name, module in net.named_modules():
        label = name or "(model)"

        def forward_hook(mod, args, out, label=label):
            row = seen.setdefault(label, {"calls": 0})
            row["calls"] += 1
            if row["calls"] == 1:  # a shared module (RoPE) is called twice: keep the first call
                row |= {"input_dtypes": _dtypes(args), "output_dtype": _dtypes(out)}

        def backward_hook(mod, grad_in, grad_out, label=label):
            seen.setdefault(label, {"calls": 0}).setdefault("grad_output_dtypes", _dtypes(grad_out))

        handles.append(module.register_forward_hook(forward_hook))
        handles.append(module.register_full_backward_hook(backward_hook))
    device_type = "cuda" if device.startswith("cuda") else "cpu"
    try:
        dtype = dtypes.torch_dtype(autocast) if autocast in AUTOCAST else torch.float32
        with torch.autocast(device_type, dtype=dtype, enabled=autocast != "none"):
            out = net(x)
            loss = out.float().pow(2).mean()
        with warnings.catch_warnings():  # the input needs no grad: hooks then fire on outputs, as wanted
            warnings.filterwarnings("ignore", message="Full backward hook is firing")
            loss.backward()
    finally:
        for h in handles:
            h.remove()
    rows = []
    for name, module in net.named_modules():
        label = name or "(model)"
        params = list(module.parameters(recurse=False))
        info = seen.get(label, {})
        rows.append(
            ModuleDtypes(
                model,
                autocast,
                label,
                type(module).__name__,
                input_dtypes=info.get("input_dtypes", ""),
                output_dtype=info.get("output_dtype", ""),
                param_dtypes=", ".join(_name(p.dtype) for p in params),
                grad_dtypes=", ".join(_name(p.grad.dtype) if p.grad is not None else "none" for p in params),
                grad_output_dtypes=info.get("grad_output_dtypes", ""),
                model_output_dtype=_name(out.dtype),
            )
        )
    return rows


def modes(ctx: Context) -> list[tuple[str, str | None]]:
    """(autocast mode, reason it cannot run or None): none always; fp16+bf16 on CUDA, bf16 on CPU."""
    if not ctx.is_cuda:
        return [("none", None), ("bf16", None)]
    bf16 = None if cuda_bf16_supported(ctx.device) else "torch.cuda.is_bf16_supported() is False"
    return [("none", None), ("fp16", None), ("bf16", bf16)]


def run(cfg: AutocastConfig, ctx: Context):
    jobs = [(m, mode, problem) for m in cfg.models for mode, problem in modes(ctx)]
    rows = []
    for i, (model, mode, problem) in enumerate(jobs):
        if problem:
            new = [ModuleDtypes(model, mode, "(model)", status="unsupported", reason=problem).to_row()]
        else:
            new = [r.to_row() for r in dtype_map(model, cfg, ctx.device, mode)]
        rows += new
        yield Progress(i + 1, len(jobs), f"{model} under autocast {mode}", rows=tuple(new))
    return Output(
        rows=rows,
        meta={
            "autocast_modes": [m for m, _ in modes(ctx)],
            "note": "a module called twice (the block's shared RoPE) shows its first call",
        },
    )


EXPERIMENTS = [
    Experiment(
        name="autocast",
        title="Autocast dtype map (forward hooks)",
        config_type=AutocastConfig,
        run=run,
        description=(__doc__ or "").partition("\n")[0],
    )
]

"""One training step of the course's model, phase by phase, for every precision mode and optimizer.

Shared by the training-memory and step-benchmark experiments so that both measure the same step.
``TrainStep.run(x, y, mark)`` calls ``mark(phase)`` at the start of each phase ("forward",
"backward", "optimizer", "zero_grad") and ``mark("end")`` after the last; callers synchronise,
read clocks or memory counters there.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import torch
from torch import nn

from core.errors import ConfigError
from core.experiment import Context
from core.transformer.presets import OPTIMIZERS, PRECISIONS

PHASES = ("forward", "backward", "optimizer", "zero_grad")


def check_precision(precision: str, ctx: Context, bf16_supported: bool = True) -> None:
    """Raise the device's "unsupported" for modes it cannot run (never silently fall back)."""
    if precision not in PRECISIONS:
        raise ConfigError(f"precision {precision!r} is not one of {', '.join(PRECISIONS)}")
    if precision == "tf32" and not ctx.is_cuda:
        raise ctx.unsupported("TF32 applies to CUDA tensor cores only")
    if precision in ("bf16-autocast", "bf16") and ctx.is_cuda and not bf16_supported:
        raise ctx.unsupported("torch.cuda.is_bf16_supported() is False")


def param_dtype(precision: str) -> torch.dtype:
    """Pure bf16 keeps weights (and so grads and optimizer state) in bf16; autocast keeps fp32 weights."""
    return torch.bfloat16 if precision == "bf16" else torch.float32


@contextlib.contextmanager
def matmul_precision(precision: str) -> Iterator[None]:
    """TF32 on for mode "tf32", off otherwise; the process's previous flags are restored after."""
    saved = (
        torch.backends.cuda.matmul.allow_tf32,
        torch.backends.cudnn.allow_tf32,
        torch.get_float32_matmul_precision(),
    )
    tf32 = precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.set_float32_matmul_precision("high" if tf32 else "highest")
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved[0], saved[1]
        torch.set_float32_matmul_precision(saved[2])


def autocast(precision: str, device: str):
    device_type = "cuda" if device.startswith("cuda") else "cpu"
    if precision == "bf16-autocast":
        return torch.autocast(device_type, dtype=torch.bfloat16)
    if precision == "fp16-autocast":
        return torch.autocast(device_type, dtype=torch.float16)
    return contextlib.nullcontext()


def make_optimizer(name: str, params, lr: float = 1e-4) -> torch.optim.Optimizer:
    """foreach=False: the per-parameter update keeps the optimizer's temporaries small and predictable."""
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr, foreach=False)
    if name == "sgd-momentum":
        return torch.optim.SGD(params, lr=lr, momentum=0.9, foreach=False)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=lr, foreach=False)
    raise ConfigError(f"optimizer {name!r} is not one of {', '.join(OPTIMIZERS)}")


class TrainStep:
    """forward → backward → optimizer.step → zero_grad, with a GradScaler for fp16 autocast."""

    def __init__(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer | None,
        precision: str,
        device: str,
        set_to_none: bool = True,
    ) -> None:
        self.model = model
        self.optimizer = optimizer
        self.precision = precision
        self.device = device
        self.set_to_none = set_to_none
        use_scaler = precision == "fp16-autocast" and device.startswith("cuda")
        self.scaler = torch.amp.GradScaler("cuda") if use_scaler else None

    def run(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        mark: Callable[[str], None] = lambda phase: None,
        forward_only: bool = False,
    ) -> torch.Tensor:
        """One step; returns the detached loss (no sync forced). ``forward_only`` runs the forward pass under no_grad."""
        with matmul_precision(self.precision):
            mark("forward")
            with torch.set_grad_enabled(not forward_only), autocast(self.precision, self.device):
                logits = self.model(x)
                loss = nn.functional.cross_entropy(logits.flatten(0, 1).float(), y.flatten())
            if forward_only:
                mark("end")
                return loss.detach()
            del logits
            mark("backward")
            (self.scaler.scale(loss) if self.scaler else loss).backward()
            mark("optimizer")
            if self.optimizer is not None:
                if self.scaler:
                    self.scaler.step(self.optimizer)
                    self.scaler.update()
                else:
                    self.optimizer.step()
            mark("zero_grad")
            if self.optimizer is not None:
                self.optimizer.zero_grad(set_to_none=self.set_to_none)
            else:
                self.model.zero_grad(set_to_none=self.set_to_none)
            mark("end")
            return loss.detach()

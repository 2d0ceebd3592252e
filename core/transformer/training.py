"""One training step of the course's model, phase by phase, for every precision mode, optimizer and stack.

Shared by the training-memory, max-batch and step-benchmark experiments so that all measure the same step
(:func:`build_step` makes it from a :class:`~core.transformer.planner.StepSetup`, the same description the
planner reads).
``TrainStep.run(x, y, mark)`` calls ``mark(phase)`` at the start of each phase ("forward",
"backward", "optimizer", "zero_grad") and ``mark("end")`` after the last; callers synchronise,
read clocks or memory counters there.
"""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, cast

import torch
from torch import nn

from core.errors import ConfigError
from core.experiment import Context
from core.transformer.presets import OPTIMIZERS, PRECISIONS, get_preset
from core.transformer.stack import OPTIMIZER_IMPLS

if TYPE_CHECKING:
    from core.transformer.planner import StepSetup

PHASES = ("forward", "backward", "optimizer", "zero_grad")


def check_precision(precision: str, ctx: Context, bf16_supported: bool = True) -> None:
    """Raise the device's "unsupported" for modes it cannot run (never silently fall back)."""
    if precision not in PRECISIONS:
        raise ConfigError(f"precision {precision!r} is not one of {', '.join(PRECISIONS)}")
    if precision == "tf32" and not ctx.is_cuda:
        raise ctx.unsupported("TF32 applies to CUDA tensor cores only")
    if precision in ("bf16-autocast", "bf16-master", "bf16", "fp8") and ctx.is_cuda and not bf16_supported:
        raise ctx.unsupported("torch.cuda.is_bf16_supported() is False")
    if precision == "fp8":
        check_fp8(ctx)


FP8_MIN_CAPABILITY = (8, 9)  # Ada and Hopper: the first tensor cores with fp8 inputs


def check_fp8(ctx: Context) -> None:
    """FP8 training runs torchao's Float8 linears on fp8 tensor cores: a CUDA GPU of sm_89 or newer and torchao,
    an optional extra the GPU box installs (never needed by the dashboard or CI)."""
    if not ctx.is_cuda:
        raise ctx.unsupported("FP8 training needs fp8 tensor cores (a CUDA GPU of compute capability 8.9 or newer)")
    capability = torch.cuda.get_device_capability(ctx.device)
    if capability < FP8_MIN_CAPABILITY:
        raise ctx.unsupported(
            f"FP8 training needs compute capability 8.9 or newer; this GPU has {capability[0]}.{capability[1]}"
        )
    if importlib.util.find_spec("torchao") is None:
        raise ctx.unsupported("torchao is not installed (an optional extra for FP8 training: pip install torchao)")


def param_dtype(precision: str) -> torch.dtype:
    """Pure bf16 and bf16 with fp32 master weights keep the model's weights (and grads) in bf16; autocast and
    fp8 keep fp32 weights."""
    return torch.bfloat16 if precision in ("bf16", "bf16-master") else torch.float32


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
    if precision in ("bf16-autocast", "fp8"):
        return torch.autocast(device_type, dtype=torch.bfloat16)
    if precision == "fp16-autocast":
        return torch.autocast(device_type, dtype=torch.float16)
    return contextlib.nullcontext()


def make_optimizer(name: str, params, impl: str = "course", lr: float = 1e-4) -> torch.optim.Optimizer:
    """The course's implementation is the per-parameter loop (foreach=False), whose temporaries are small and
    predictable; ``foreach`` runs multi-tensor kernels over every parameter, ``fused`` one kernel per group."""
    if impl not in OPTIMIZER_IMPLS:
        raise ConfigError(f"optimizer_impl {impl!r} is not one of {', '.join(OPTIMIZER_IMPLS)}")
    foreach, fused = impl == "foreach", (True if impl == "fused" else None)
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr, foreach=foreach, fused=fused)
    if name == "sgd-momentum":
        return torch.optim.SGD(params, lr=lr, momentum=0.9, foreach=foreach, fused=fused)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=lr, foreach=foreach, fused=fused)
    raise ConfigError(f"optimizer {name!r} is not one of {', '.join(OPTIMIZERS)}")


class MasterWeights:
    """fp32 master copies of a bf16 model's weights, which the optimizer updates (mixed-precision training as
    Megatron and DeepSpeed keep it): after backward each bf16 gradient becomes the master's fp32 gradient (the bf16
    one freed as it goes), the optimizer steps the masters, and the bf16 weights are copied back from them."""

    def __init__(self, model: nn.Module) -> None:
        self.params: list[torch.Tensor] = [p for p in model.parameters() if p.requires_grad]
        self.masters = [p.detach().float().requires_grad_(True) for p in self.params]

    def grads_to_masters(self) -> None:
        for p, m in zip(self.params, self.masters):
            m.grad = None if p.grad is None else p.grad.float()
            p.grad = None

    @torch.no_grad()
    def copy_back(self) -> None:
        for p, m in zip(self.params, self.masters):
            p.copy_(m)

    def zero_grad(self, set_to_none: bool) -> None:
        for m in self.masters:
            if set_to_none:
                m.grad = None
            elif m.grad is not None:
                m.grad.zero_()


def to_float8(model: nn.Module) -> nn.Module:
    """torchao's Float8 training (tensorwise scaling) on every linear but the LM head, as torchtitan leaves its
    output layer in bf16; the import happens only where :func:`check_fp8` passed."""
    from torchao.float8 import convert_to_float8_training  # pyright: ignore[reportMissingImports]

    return convert_to_float8_training(model, module_filter_fn=lambda _module, name: name != "lm_head")


def build_step(setup: StepSetup, device: str) -> TrainStep:
    """The step a setup describes, on ``device``: the model in its precision and attention, checkpointed and
    compiled as its stack says, and its optimizer (none for a forward-only pass)."""
    from core.transformer.model import build_model

    stack = setup.stack
    model = build_model(
        get_preset(setup.model),
        setup.context,
        device,
        param_dtype(setup.precision),
        stack.checkpointing,
        stack.attention,
    )
    if setup.precision == "fp8":
        model = to_float8(model)
    master = MasterWeights(model) if setup.precision == "bf16-master" and not setup.forward_only else None
    optimizer = None
    if not setup.forward_only:
        params = master.masters if master else model.parameters()
        optimizer = make_optimizer(setup.optimizer, params, stack.optimizer_impl)
    compiled = cast(nn.Module, torch.compile(model)) if stack.compile else model
    return TrainStep(compiled, optimizer, setup.precision, device, setup.set_to_none, master, model)


class TrainStep:
    """forward → backward → optimizer.step → zero_grad, with a GradScaler for fp16 autocast."""

    def __init__(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer | None,
        precision: str,
        device: str,
        set_to_none: bool = True,
        master: MasterWeights | None = None,
        module: nn.Module | None = None,
    ) -> None:
        self.model = model  # what the step calls (a compiled wrapper where the stack compiles)
        self.module = module or model  # the model's own module: its parameters, gradients and FLOPs
        self.optimizer = optimizer
        self.master = master
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
            if self.master:
                self.master.grads_to_masters()
            if self.optimizer is not None:
                if self.scaler:
                    self.scaler.step(self.optimizer)
                    self.scaler.update()
                else:
                    self.optimizer.step()
            if self.master:
                self.master.copy_back()
            mark("zero_grad")
            if self.master:
                self.master.zero_grad(self.set_to_none)
            elif self.optimizer is not None:
                self.optimizer.zero_grad(set_to_none=self.set_to_none)
            else:
                self.module.zero_grad(set_to_none=self.set_to_none)
            mark("end")
            return loss.detach()

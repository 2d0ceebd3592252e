"""``rounding``: how far one large matmul lands from an fp64 reference, per precision mode.

The same random fp32 inputs are multiplied in fp32 with TF32 not allowed, fp32 with TF32 allowed
(CUDA tensor cores only: on CPU, or a GPU before compute capability 8.0, that row is
``status: "unsupported"`` instead of a second fp32 number), bf16 and fp16. Errors are relative
Frobenius norms, ``‖C − C_ref‖ / ‖C_ref‖`` with ``C_ref = A.double() @ B.double()``, plus the
worst element. ``rel_error_vs_rounded_inputs`` compares with the fp64 product of the *already
rounded* inputs, isolating what the matmul's own accumulation adds to the input rounding.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from core.errors import ConfigError
from core.experiment import Context, Experiment, Output, Progress
from core.hardware import dtypes
from core.hardware.device import cuda_bf16_supported
from core.rows.rounding import RoundingMode

if TYPE_CHECKING:
    import torch

MODES = ("fp32", "tf32", "bf16", "fp16")


@dataclass(frozen=True)
class RoundingConfig:
    size: int = field(default=1024, metadata={"help": "n for the n×n @ n×n matmul (16..8192)"})
    seed: int = field(default=0, metadata={"help": "random seed for the inputs"})

    def __post_init__(self) -> None:
        if not 16 <= self.size <= 8192:
            raise ConfigError(f"size must be between 16 and 8192, got {self.size}")


def tf32_problem(ctx: Context) -> str | None:
    """Why TF32 cannot run here, or None."""
    if not ctx.is_cuda:
        return "TF32 applies to CUDA tensor cores only"
    import torch

    major, minor = torch.cuda.get_device_capability(ctx.device)
    if major < 8:
        return f"TF32 needs compute capability 8.0 or newer (this GPU is {major}.{minor})"
    return None


def relative_error(c: torch.Tensor, ref: torch.Tensor) -> tuple[float, float]:
    """(‖c − ref‖_F / ‖ref‖_F, max |c − ref| / max |ref|), computed in fp64."""
    diff = c.double() - ref
    return (diff.norm() / ref.norm()).item(), (diff.abs().max() / ref.abs().max()).item()


# Bytes per element of the n×n inputs at the peak: A, B (fp32), the fp64 reference and its fp64 operands,
# then per mode the rounded inputs, C, its fp64 copy and difference, and the rounded-input reference.
PEAK_BYTES_PER_ELEMENT = 64


def run(cfg: RoundingConfig, ctx: Context):
    import torch

    n = cfg.size
    ctx.check_fits(PEAK_BYTES_PER_ELEMENT * n * n, f"rounding at size {n} (n×n matmuls and fp64 references)")
    gen = torch.Generator(device=ctx.device).manual_seed(cfg.seed)
    a = torch.randn(n, n, device=ctx.device, generator=gen)
    b = torch.randn(n, n, device=ctx.device, generator=gen)
    ref = a.double() @ b.double()
    rows = []
    for i, mode in enumerate(MODES):
        row = _mode(mode, a, b, ref, ctx).to_row()
        rows.append(row)
        yield Progress(i + 1, len(MODES), mode, rows=(row,))
    meta: dict[str, object] = {
        "reference": "A.double() @ B.double() of the same fp32 inputs",
        "inputs": "torch.randn, fp32",
    }
    if ctx.is_cuda:  # cuBLAS may reduce bf16/fp16 partial sums in reduced precision when these are True
        m = torch.backends.cuda.matmul
        meta["allow_fp16_reduced_precision_reduction"] = m.allow_fp16_reduced_precision_reduction
        meta["allow_bf16_reduced_precision_reduction"] = m.allow_bf16_reduced_precision_reduction
    return Output(rows=rows, meta=meta)


def _mode(mode: str, a: torch.Tensor, b: torch.Tensor, ref: torch.Tensor, ctx: Context) -> RoundingMode:
    """``a @ b`` in ``mode`` against ``ref``, or the reason the mode cannot run on this device."""
    import torch

    from core.transformer.training import matmul_precision

    compute = "fp32 (TF32 tensor cores)" if mode == "tf32" else mode
    here = RoundingMode(mode=mode, size=a.shape[0], input_dtype="fp32", compute_dtype=compute)
    problem = tf32_problem(ctx) if mode == "tf32" else None
    if mode == "bf16" and ctx.is_cuda and not cuda_bf16_supported(ctx.device):
        problem = "torch.cuda.is_bf16_supported() is False"
    if problem:
        return dataclasses.replace(here, status="unsupported", reason=problem)
    dtype = dtypes.torch_dtype(mode)
    x, y = a.to(dtype), b.to(dtype)
    with matmul_precision("tf32" if mode == "tf32" else "fp32"):
        c = x @ y
    rel, worst = relative_error(c, ref)
    rel_rounded, _ = relative_error(c, x.double() @ y.double())
    return dataclasses.replace(
        here,
        rel_error=rel,
        max_rel_error=worst,
        rel_error_vs_rounded_inputs=rel_rounded,
        unit_roundoff=torch.finfo(dtype).eps / 2 if mode != "tf32" else 2.0**-11,
    )


EXPERIMENTS = [
    Experiment(
        name="rounding",
        title="Matmul rounding against an fp64 reference",
        config_type=RoundingConfig,
        run=run,
        description=(__doc__ or "").partition("\n")[0],
    )
]

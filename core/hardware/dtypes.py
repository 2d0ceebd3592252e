"""The lab's matmul dtypes: one table that the matmul experiments (and so their CLI options), the health
check, the pages and the sidebar read, so that no list of them drifts from another.

Torch-free facts: a dtype's name, what it is, the torch dtype its operands are stored in (by name:
:func:`torch_dtype` looks it up where tensors run), its element sizes and the datasheet column it is
measured against.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class Dtype:
    name: str  # the lab's name: the CLI's value, a row's ``dtype``, a chart's colour key
    label: str  # the format's own name
    what: str  # how the lab runs it, in one line
    torch_name: str  # the torch dtype the operands are stored in (``getattr(torch, torch_name)``)
    in_bytes: int  # per input element
    out_bytes: int  # per output element: fp8 writes bf16, int8 writes int32
    column: str  # the datasheet column it is measured against (core.hardware.specs)
    integer: bool = False  # counted in OPS (TOPS), not FLOPS
    gpu_only: bool = False  # a mode of NVIDIA tensor cores: a CPU cannot run it
    fast_accum: bool | None = None  # fp8 only: torch._scaled_mm's use_fast_accum

    @property
    def fp8(self) -> bool:
        return self.fast_accum is not None


MATMUL: tuple[Dtype, ...] = (
    Dtype("fp64", "float64", "IEEE double precision", "float64", 8, 8, "fp64"),
    Dtype("fp32", "float32", "IEEE single precision, TF32 off", "float32", 4, 4, "fp32"),
    Dtype(
        "tf32",
        "TensorFloat-32",
        "fp32 operands rounded to a 10-bit mantissa by the tensor cores",
        "float32",
        4,
        4,
        "tf32",
        gpu_only=True,
    ),
    Dtype("bf16", "bfloat16", "fp32's exponent with a 7-bit mantissa", "bfloat16", 2, 2, "bf16"),
    Dtype("fp16", "float16", "IEEE half precision", "float16", 2, 2, "fp16"),
    # torch._scaled_mm(..., use_fast_accum=False) is torch's default (and mamf-finder's): the tensor cores
    # promote partial sums to fp32 more often, which costs speed. The datasheet's fp8 peak assumes the fast
    # path, so both are measured, each under its own name, against the same fp8 column.
    Dtype(
        "fp8",
        "float8_e4m3fn",
        "torch._scaled_mm, bf16 out, use_fast_accum=False (torch's default)",
        "float8_e4m3fn",
        1,
        2,
        "fp8",
        gpu_only=True,
        fast_accum=False,
    ),
    Dtype(
        "fp8-fast-accum",
        "float8_e4m3fn",
        "torch._scaled_mm, bf16 out, use_fast_accum=True (what the datasheet's fp8 peak assumes)",
        "float8_e4m3fn",
        1,
        2,
        "fp8",
        gpu_only=True,
        fast_accum=True,
    ),
    Dtype("int8", "int8", "torch._int_mm, int32 out, counted in OPS", "int8", 1, 4, "int8", integer=True),
)
NAMES: tuple[str, ...] = tuple(d.name for d in MATMUL)
_BY_NAME = {d.name: d for d in MATMUL}


def get(name: str) -> Dtype:
    """The table's entry for ``name`` (a KeyError for a name the table lacks: callers validate first)."""
    return _BY_NAME[name]


def torch_dtype(name: str) -> torch.dtype:
    """The torch dtype ``name``'s operands are stored in; it imports torch, so only code that runs tensors calls it."""
    import torch

    return getattr(torch, get(name).torch_name)

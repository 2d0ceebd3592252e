"""The one dtype table: its facts against torch's own, and every reader of it (matmul, the health check, the
sidebar's colours) taking its names from it."""

import pytest
import torch

from core.hardware import dtypes
from core.hardware.health_reference import MATMUL_DTYPES
from core.measure.gemm import dtype_support


def test_the_table_is_the_matmul_experiments_dtypes_in_order():
    assert dtypes.NAMES == ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "fp8-fast-accum", "int8")


@pytest.mark.parametrize("dtype", dtypes.MATMUL, ids=lambda d: d.name)
def test_input_sizes_are_torchs(dtype):
    assert getattr(torch, dtype.torch_name).itemsize == dtype.in_bytes


def test_outputs_widen_where_the_kernels_write_a_wider_type():
    """fp8 matmuls write bf16 (torch._scaled_mm's out_dtype), int8 ones int32 (torch._int_mm)."""
    out = {d.name: d.out_bytes for d in dtypes.MATMUL}
    assert out == {"fp64": 8, "fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8": 2, "fp8-fast-accum": 2, "int8": 4}


def test_what_a_cpu_cannot_run_is_what_the_table_calls_gpu_only():
    refused = {d for d in dtypes.NAMES if dtype_support(d, {"kind": "cpu"})}
    assert refused == {d.name for d in dtypes.MATMUL if d.gpu_only} == {"tf32", "fp8", "fp8-fast-accum"}


def test_the_health_check_holds_one_flops_dtype_per_datasheet_column():
    """fp8-fast-accum shares fp8's column and the published tables run fp8 without it; int8 counts OPS."""
    assert MATMUL_DTYPES == ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8")


def test_every_dtype_has_a_colour_of_its_own():
    pytest.importorskip("plotly")
    from render.style import DTYPE_COLORS

    colours = [DTYPE_COLORS.get(d) for d in dtypes.NAMES]
    assert None not in colours and len(set(colours)) == len(colours)

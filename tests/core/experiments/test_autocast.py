"""Autocast dtype map read by hooks: CPU bf16 autocast casts Linear outputs, keeps fp32 weights and grads."""

import pytest

from core.errors import ConfigError
from core.experiment import Context, drive
from core.experiments.autocast import AutocastConfig, dtype_map, run


def rows_by_module(model, autocast, device="cpu"):
    return {r.module: r.to_row() for r in dtype_map(model, AutocastConfig(), device, autocast)}


def test_toy_model_under_cpu_bf16():
    rows = rows_by_module("toy", "bf16")
    assert rows["fc1"]["input_dtypes"] == "fp32" and rows["fc1"]["output_dtype"] == "bf16"
    assert rows["fc1"]["param_dtypes"] == "fp32" and rows["fc1"]["grad_dtypes"] == "fp32"
    assert rows["ln"]["param_dtypes"] == "fp32, fp32" and rows["fc2"]["output_dtype"] == "bf16"
    assert rows["fc2"]["grad_output_dtypes"] == "bf16"


def test_without_autocast_everything_is_fp32():
    for model in ("toy", "block"):
        for row in rows_by_module(model, "none").values():
            for field in ("input_dtypes", "output_dtype", "param_dtypes", "grad_dtypes"):
                assert set(filter(None, row[field].split(", "))) <= {"fp32"}, (model, row)


def test_block_rmsnorm_stays_fp32_and_linears_go_bf16():
    rows = rows_by_module("block", "bf16")
    assert rows["ln1"]["output_dtype"] == "fp32"  # RMSNorm computes in fp32 on fp32 input
    assert rows["attn.q_proj"]["output_dtype"] == "bf16" and rows["ffn.w2"]["output_dtype"] == "bf16"
    assert all(r["grad_dtypes"] in ("", "fp32") for r in rows.values())


def test_cpu_run_modes():
    out, _ = drive(run(AutocastConfig(models=("toy",)), Context("cpu", "CPU")))
    assert out.meta["autocast_modes"] == ["none", "bf16"]
    assert {r["autocast"] for r in out.rows} == {"none", "bf16"}


def test_config_limits():
    with pytest.raises(ConfigError, match="models"):
        AutocastConfig(models=("mlp",))


@pytest.mark.gpu
def test_cuda_fp16_layernorm_runs_in_fp32_as_the_note_says():
    rows = rows_by_module("toy", "fp16", "cuda")
    assert rows["fc1"]["output_dtype"] == "fp16" and rows["ln"]["output_dtype"] == "fp32"
    assert rows["fc2"]["output_dtype"] == "fp16"

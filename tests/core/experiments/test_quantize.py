"""Quantize → dequantize against hand arithmetic and torch's own quantized tensors."""

import pytest
import torch

from core.errors import ConfigError
from core.experiment import Context, drive
from core.experiments.quantize import QuantizeConfig, quantize, run


def test_symmetric_int8_by_hand():
    rt = quantize(torch.tensor([-1.0, 0.0, 0.5, 1.0]), 8, "symmetric")
    assert rt.scale == pytest.approx(1 / 127) and rt.zero_point == 0
    assert rt.codes.tolist() == [-127, 0, 64, 127]  # 0.5 × 127 = 63.5 → 64 (half to even)


def test_asymmetric_int8_on_the_notes_example():
    """Range [0, 1.2] onto 0..255: codes = round(x × 255 / 1.2) = 21.25, 106.25, 191.25, 255 (not the note's 13, 64, 115, 153)."""
    rt = quantize(torch.tensor([0.1, 0.5, 0.9, 1.2], dtype=torch.float64), 8, "asymmetric")
    assert rt.codes.tolist() == [21, 106, 191, 255] and rt.zero_point == 0


def test_int4_by_hand():
    rt = quantize(torch.tensor([-7.0, -1.0, 3.0, 7.0]), 4, "symmetric")
    assert rt.scale == 1.0 and rt.codes.tolist() == [-7, -1, 3, 7]
    rt = quantize(torch.tensor([-1.0, 2.0]), 4, "asymmetric")  # scale 3/15 = 0.2, zero point 5
    assert rt.scale == pytest.approx(0.2) and rt.zero_point == 5 and rt.codes.tolist() == [0, 15]


@pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor")
def test_asymmetric_matches_torch_quantize_per_tensor():
    x = torch.randn(20_000, generator=torch.Generator().manual_seed(1))
    rt = quantize(x, 8, "asymmetric")
    ref = torch.quantize_per_tensor(x, rt.scale, rt.zero_point, torch.quint8).int_repr().to(torch.int64)
    diff = (rt.codes - ref).abs()
    assert diff.max() <= 1 and (diff > 0).float().mean() < 1e-3  # torch multiplies by 1/scale in fp32


def test_round_trip_error_is_at_most_half_a_step():
    x = torch.rand(10_000, generator=torch.Generator().manual_seed(2)) * 2 - 1
    for bits in (8, 4):
        for scheme in ("symmetric", "asymmetric"):
            rt = quantize(x, bits, scheme)
            assert (rt.dequantized - x.double()).abs().max() <= rt.scale / 2 + 1e-12


def test_outliers_hurt_the_bulk():
    ctx = Context("cpu", "CPU")
    normal = {r["quantization"]: r for r in drive(run(QuantizeConfig(distribution="normal", size=20_000), ctx))[0].rows}
    spiky = {
        r["quantization"]: r for r in drive(run(QuantizeConfig(distribution="outliers", size=20_000), ctx))[0].rows
    }
    for name in ("int8 symmetric", "int8 asymmetric"):
        assert spiky[name]["rmse_bulk"] > 5 * normal[name]["rmse_bulk"]
        assert spiky[name]["levels_used"] < normal[name]["levels_used"] / 3


def test_custom_tensor_lists_every_code():
    out = drive(run(QuantizeConfig(distribution="custom"), Context("cpu", "CPU")))[0]
    codes = [r["code"] for r in out.meta["round_trip"] if r["quantization"] == "int8 asymmetric"]
    assert codes == [21, 106, 191, 255]
    assert sum(out.meta["values_hist"]["counts"]) == 4


def test_config_limits():
    with pytest.raises(ConfigError, match="size"):
        QuantizeConfig(size=1)
    with pytest.raises(ConfigError, match="finite"):
        QuantizeConfig(values=(1.0, float("inf")))

"""The inspector and format table against independent expectations: struct, numpy.float16, hand rounding."""

import json
import math
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

from core.errors import ConfigError
from core.experiments.formats import FormatsConfig, format_table, inspect, spacing
from tests.conftest import ROOT

LISTED = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8_e4m3fn", "fp8_e5m2", "int8", "int4")
VALUES = (3.14159265, 1 / 3, -2.5, 65536.0, 1e-8, 6e-8, 1e-45, 123456.789, 0.1, -0.0)


def by_format(value):
    return {r.format: r for r in inspect(value)}


def bits_of(row):
    return int(row.bits.replace("|", ""), 2)


def test_every_listed_format_has_a_table_row_and_an_inspector_row():
    table = {r.format for r in format_table()}
    rows = by_format(-2.0)  # exact in every listed format, ints included
    for name in LISTED:
        assert name in table and name in rows
        assert rows[name].status == "exact" and rows[name].stored == -2.0


@pytest.mark.parametrize("value", VALUES)
def test_fp32_and_fp64_bits_match_struct(value):
    rows = by_format(value)
    fp32 = struct.unpack(">I", struct.pack(">f", value))[0]
    fp64 = struct.unpack(">Q", struct.pack(">d", value))[0]
    assert bits_of(rows["fp32"]) == fp32
    assert rows["fp32"].stored == struct.unpack(">f", struct.pack(">f", value))[0]
    assert bits_of(rows["fp64"]) == fp64 and rows["fp64"].stored == value
    assert rows["fp32"].sign + rows["fp32"].exponent + rows["fp32"].mantissa == f"{fp32:032b}"
    assert (len(rows["fp32"].exponent), len(rows["fp32"].mantissa)) == (8, 23)


@pytest.mark.parametrize("value", VALUES + (65504.0, 65520.0, 1e5))
def test_fp16_matches_numpy(value):
    row = by_format(value)["fp16"]
    with np.errstate(over="ignore"):  # 65536 → inf is the point
        expected = np.array([value]).astype(np.float16)
    assert row.stored == float(expected[0]) or (math.isnan(row.stored) and math.isnan(expected[0]))
    assert bits_of(row) == int(expected.view(np.uint16)[0])


@pytest.mark.parametrize(
    "value, stored, pattern",
    [
        (3.14159265, 3.140625, 0x4049),  # 1.1001001|0000111… → round down
        (1 / 3, 0.333984375, 0x3EAB),  # 1.0101010|1010101… → round up
        (1 + 2**-8, 1.0, 0x3F80),  # exact tie → even (mantissa 0000000)
        (1 + 3 * 2**-8, 1.015625, 0x3F82),  # exact tie → even (0000010, not 0000001)
        (1e-8, 1.0011717677116394e-08, 0x322C),  # bf16 keeps fp32's exponent range: no underflow
        (65536.0, 65536.0, 0x4780),
    ],
)
def test_bf16_hand_rounded(value, stored, pattern):
    row = by_format(value)["bf16"]
    assert row.stored == stored and bits_of(row) == pattern
    assert row.status in ("rounded", "exact") and not row.underflow


@pytest.mark.parametrize(
    "value, stored",
    [
        (3.14159265, 3.140625),  # low 13 bits 0x0FDB < half: round down
        (1 + 2**-11, 1.0),  # tie → even
        (1 + 3 * 2**-11, 1 + 2**-9),  # tie → even (rounds up to mantissa …10)
        (1 + 2**-11 + 2**-20, 1 + 2**-10),  # just above the tie: up
    ],
)
def test_tf32_round_to_nearest_even(value, stored):
    row = by_format(value)["tf32"]
    assert row.stored == stored
    assert (len(row.sign), len(row.exponent), len(row.mantissa)) == (1, 8, 10)


def test_tf32_carry_out_of_the_largest_binade_overflows():
    fp32_max = struct.unpack(">f", struct.pack(">I", 0x7F7FFFFF))[0]
    row = by_format(fp32_max)["tf32"]
    assert row.stored == math.inf and row.status == "overflow" and row.overflow


def test_seed_examples():
    assert by_format(3.14159265)["bf16"].stored == 3.140625
    fp16 = by_format(65536.0)["fp16"]
    assert fp16.stored == math.inf and fp16.status == "overflow" and fp16.overflow
    assert by_format(65536.0)["bf16"].stored == 65536.0
    tiny = by_format(1e-8)["fp16"]
    assert tiny.stored == 0.0 and tiny.status == "underflow" and tiny.underflow
    assert tiny.rel_error == 1.0


def test_fp8_and_int_by_hand():
    rows = by_format(3.14159265)
    assert rows["fp8_e4m3fn"].stored == 3.25  # spacing 0.25 in [2, 4)
    assert rows["fp8_e5m2"].stored == 3.0  # spacing 0.5 in [2, 4)
    assert rows["int8"].stored == 3.0 and rows["int8"].bits == "00000011"
    assert by_format(2.5)["int8"].stored == 2.0 and by_format(3.5)["int8"].stored == 4.0  # half to even
    assert by_format(-200.0)["int8"].stored == -128 and by_format(-200.0)["int8"].status == "saturated"
    assert by_format(-2.0)["int4"].bits == "1110"
    assert by_format(7.6)["int4"].stored == 7 and by_format(7.6)["int4"].status == "saturated"


def test_errors_are_against_the_typed_decimal():
    row = by_format(0.1)["fp64"]
    assert row.status == "rounded"
    assert row.abs_error == pytest.approx(5.551115123125783e-18, rel=1e-12)  # 0.1000000000000000055511151…
    fp32 = by_format(0.1)["fp32"]
    assert fp32.abs_error == pytest.approx(abs(struct.unpack(">f", struct.pack(">f", 0.1))[0] - 0.1), rel=1e-6)


def test_nan_and_subnormal_flags():
    rows = by_format(float("nan"))
    assert all(rows[f].is_nan for f in ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8_e5m2"))
    assert rows["int8"].status == "unsupported" and "no NaN" in rows["int8"].reason
    sub = by_format(1e-45)["fp32"]
    assert sub.status == "subnormal" and sub.stored == 2.0**-149


def test_table_against_hand_values():
    t = {r.format: r for r in format_table()}
    assert t["fp32"].max == struct.unpack(">f", struct.pack(">I", 0x7F7FFFFF))[0]
    assert (t["fp16"].max, t["fp16"].smallest_normal, t["fp16"].smallest_subnormal, t["fp16"].eps) == (
        65504.0,
        2.0**-14,
        2.0**-24,
        2.0**-10,
    )
    assert t["bf16"].eps == 2.0**-7 and t["bf16"].exponent_bits == 8 and t["bf16"].mantissa_bits == 7
    assert t["tf32"].max == (2 - 2.0**-10) * 2.0**127 and t["tf32"].smallest_subnormal == 2.0**-136
    assert "definition" in t["tf32"].source and t["tf32"].bits == 19
    assert t["fp8_e4m3fn"].max == 448.0 and t["fp8_e5m2"].max == 57344.0
    assert (t["int8"].min, t["int8"].max, t["int4"].min, t["int4"].max) == (-128, 127, -8, 7)
    for row in t.values():
        if row.bits and row.is_float and row.bits != 19:
            assert row.sign_bits + row.exponent_bits + row.mantissa_bits == row.bits


def test_spacing_matches_numpy():
    ulps = list(spacing(format_table(), 60))
    for fmt, np_type in (("fp16", np.float16), ("fp32", np.float32), ("fp64", np.float64)):
        points = [r for r in ulps if r.format == fmt]
        assert len(points) > 20
        for r in points:
            assert r.ulp == float(np.spacing(np_type(r.magnitude)))


def test_config_limits():
    with pytest.raises(ConfigError, match="spacing_points"):
        FormatsConfig(spacing_points=5)


def test_cli_json(tmp_path):
    env = dict(os.environ, GPULAB_DATA_DIR=str(tmp_path / "d"), GPULAB_LOCK_DIR=str(tmp_path / "l"))
    out = subprocess.run(
        [sys.executable, "-m", "core", "formats", "--value", "3.14159265", "--device", "cpu", "--json", "--no-save"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    run = json.loads(out.stdout)
    rows = {r["format"]: r for r in run["rows"]}
    assert rows["bf16"]["stored"] == 3.140625
    for row in rows.values():
        assert {"format", "stored", "abs_error", "rel_error", "bits", "status"} <= set(row)


@pytest.mark.gpu
def test_cuda_casts_agree_with_cpu_for_ieee_formats():
    for value in VALUES + (65536.0, 1e6):
        cpu, cuda = by_format(value), {r.format: r for r in inspect(value, device="cuda")}
        for f in ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8_e5m2"):
            assert cpu[f].bits == cuda[f].bits, (value, f)

"""core.units: the one place bytes, durations, rates, throughput and timestamps become text (expectations by hand)."""

import pytest

from core.units import (
    GIB,
    KIB,
    MIB,
    bytes_text,
    duration_text,
    exact_size_text,
    parse_size,
    rate_text,
    size_text,
    throughput_unit,
    timestamp_text,
)


def test_constants():
    assert (KIB, MIB, GIB) == (1024, 1048576, 1073741824)


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (0, "0 B"),
        (512, "512 B"),
        (1023, "1,023 B"),
        (1024, "1.0 KiB"),
        (1536, "1.5 KiB"),
        (-1536, "-1.5 KiB"),
        (1048524, "1,023.9 KiB"),
        (1048575, "1.0 MiB"),  # 1023.999 KiB rounds to 1024.0: written in the next unit
        (6656, "6.5 KiB"),
        (3 * 2**20, "3.0 MiB"),
        (514523136, "490.7 MiB"),
        (1610612736, "1.5 GiB"),
        (-(2**31), "-2.0 GiB"),
        (80 * 2**30, "80.0 GiB"),
        (1024 * 2**30, "1.0 TiB"),
        (5 * 2**40, "5.0 TiB"),
        (2**50, "1,024.0 TiB"),
        (12.7, "13 B"),
    ],
)
def test_bytes_text_one_decimal_in_the_largest_unit_reached(n, text):
    assert bytes_text(n) == text


def test_bytes_text_digits():
    assert bytes_text(1536, digits=2) == "1.50 KiB"
    assert bytes_text(256 * 2**20, digits=0) == "256 MiB"
    assert bytes_text(1610612736, digits=0) == "2 GiB"
    assert bytes_text(700, digits=3) == "700 B"


@pytest.mark.parametrize(
    ("nbytes", "text"),
    [
        (1, "1 B"),
        (1000, "1000 B"),
        (1536, "1536 B"),
        (1024, "1 KiB"),
        (3 * 2**20, "3 MiB"),
        (1536 * 2**20, "1536 MiB"),
        (2**30, "1 GiB"),
        (16 * 2**30, "16 GiB"),
    ],
)
def test_exact_size_text_round_trips_through_parse_size(nbytes, text):
    assert exact_size_text(nbytes) == text
    assert parse_size(text) == nbytes
    assert parse_size(text.replace(" ", "")) == nbytes


def test_parse_size():
    assert [parse_size(s) for s in ("1KiB", "16MiB", "1GiB", "4k", "2M", "1048576", "1.5KiB", " 3 g ")] == [
        1024,
        16777216,
        1073741824,
        4096,
        2097152,
        1048576,
        1536,
        3221225472,
    ]
    for bad in ("1KB", "lots", "0.3B", "-1MiB", "", "1 TiB"):
        with pytest.raises(ValueError):
            parse_size(bad)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0 s"),  # nothing: not "0.0 s" beside µs and ms
        (3.5e-7, "350 ns"),  # under a µs: whole ns
        (-4e-8, "-40 ns"),
        (1e-6, "1.0 µs"),
        (2.5e-5, "25.0 µs"),
        (0.0125, "12.5 ms"),
        (1, "1.0 s"),
        (59.94, "59.9 s"),
        (90, "1.5 min"),
        (-0.002, "-2.0 ms"),
    ],
)
def test_duration_text(seconds, text):
    assert duration_text(seconds) == text


def test_duration_text_digits():
    assert duration_text(42.4, digits=0) == "42 s"


def test_rate_text():
    assert rate_text(912.34, "GB/s") == "912.3 GB/s"
    assert rate_text(1234.5, "GB/s", digits=0) == "1,234 GB/s"  # round half to even


def test_throughput_is_tflops_on_a_gpu_and_gflops_on_a_cpu():
    assert throughput_unit(True) == ("TFLOPS", 1.0)
    assert throughput_unit(False) == ("GFLOPS", 1e3)
    assert throughput_unit(False, ops=True) == ("GOPS", 1e3)


@pytest.mark.parametrize(
    ("iso", "minutes", "text"),
    [
        ("2026-03-01T12:34:56.789012+00:00", False, "2026-03-01 12:34:56"),
        ("2026-03-01T12:34:56.789012+00:00", True, "2026-03-01 12:34"),
        ("2026-03-01T12:34:56", False, "2026-03-01 12:34:56"),
        ("2026-03-01 12:34:56", False, "2026-03-01 12:34:56"),
        ("2026-03-01T12:34", False, "2026-03-01 12:34"),
        ("2026-03-01", True, "2026-03-01"),
        ("", False, ""),
        (None, False, ""),
    ],
)
def test_timestamp_text(iso, minutes, text):
    assert timestamp_text(iso, minutes=minutes) == text


@pytest.mark.parametrize(
    ("nbytes", "text"),
    [
        (8 * 2**20, "8 MiB"),  # a unit divides it: exactly that
        (1000, "1000 B"),  # under 1 KiB: the bytes alone
        (402_176, "402,176 B (392.8 KiB)"),  # 402176 / 1024 = 392.75
        (3 * 2**30 + 1, "3,221,225,473 B (3.0 GiB)"),
        (30_764 * 1024, "31,502,336 B (30.0 MiB)"),  # the A100 trace's all-reduce: not "30764 KiB"
        (2048 * 2**30, "2048 GiB"),  # the largest unit: exact
    ],
)
def test_size_text_is_exact_and_readable(nbytes, text):
    assert size_text(nbytes) == text


def test_counts_read_as_english():
    from core.units import count_text

    assert [count_text(n, "row") for n in (0, 1, 2, 1200)] == ["0 rows", "1 row", "2 rows", "1,200 rows"]
    assert count_text(1, "step or check", "steps or checks") == "1 step or check"
    assert count_text(3, "step or check", "steps or checks") == "3 steps or checks"


@pytest.mark.parametrize(
    ("values", "digits", "text"),
    [
        # a format table's max column: fp64's max beside fp16's 65504, in one notation
        ([1.7976931348623157e308, 65504.0, 448.0, None], 6, ["1.79769×10³⁰⁸", "6.5504×10⁴", "4.48×10²", "—"]),
        ([606_519.0, 91.0, 0.5, 0.0066, float("nan")], 4, ["606,519", "91", "0.5", "0.0066", "—"]),
        ([2.2250738585072014e-308, 0.015625, 0.0], 4, ["2.225×10⁻³⁰⁸", "1.562×10⁻²", "0"]),
        ([3.14159265, 3.25, 3], 10, ["3.14159265", "3.25", "3"]),
    ],
)
def test_a_column_of_numbers_is_in_one_notation(values, digits, text):
    from core.units import numbers_text

    assert numbers_text(values, digits) == text

"""A collective's sizes and figures: nccl-tests' size notation, algbw = bytes / time, and busbw = algbw × the
nccl-tests factor (2(n−1)/n all_reduce; (n−1)/n all_gather, reduce_scatter, all_to_all; 1 broadcast)."""

import pytest
import torch

from core.distributed.collectives import (
    COLLECTIVES,
    Measured,
    buffer_bytes,
    make_point,
    not_measured_row,
    point_rows,
    resolve_backend,
)
from core.measure.nccl_tests import busbw_factor
from core.rows.interconnect import CollectivePoint
from core.units import exact_size_text, parse_size


def test_sizes_parse_as_nccl_tests_writes_them():
    assert [parse_size(s) for s in ("1KiB", "16MiB", "1GiB", "4k", "2M", "1048576", "1.5KiB")] == [
        1024,
        16 * 2**20,
        2**30,
        4096,
        2 * 2**20,
        1048576,
        1536,
    ]
    assert exact_size_text(2**30) == "1 GiB" and exact_size_text(1536) == "1536 B"
    for bad in ("1KB", "lots", "0.3B", "-1MiB"):
        with pytest.raises(ValueError):
            parse_size(bad)


def test_busbw_factors_are_nccl_tests():
    assert [busbw_factor(c, 2) for c in COLLECTIVES] == [1.0, 0.5, 0.5, 1.0, 0.5]
    assert [busbw_factor(c, 4) for c in COLLECTIVES] == [1.5, 0.75, 0.75, 1.0, 0.75]
    assert busbw_factor("all_reduce", 8) == 2 * 7 / 8
    with pytest.raises(ValueError):
        busbw_factor("all_scatter", 2)


def test_auto_backend_is_nccl_on_gpus_and_gloo_on_cpus():
    assert resolve_backend("auto", True) == "nccl" and resolve_backend("auto", False) == "gloo"
    assert resolve_backend("gloo", True) == "gloo"


def test_a_point_is_whole_float32_chunks_per_rank():
    p = make_point("all_gather", 1000, 3)  # 1000 B = 250 floats → 249, a multiple of 3
    assert (p.elements, p.nbytes, p.chunk, p.world) == (249, 996, 83, 3)
    assert make_point("all_reduce", 1, 4).elements == 4  # never less than one element per rank
    assert make_point("broadcast", 2**20, 2).label == "broadcast 1 MiB"
    # a rank's buffers (plus the expectation and a regenerated input): 1 MiB over 4 ranks, 256 KiB parts
    mib, part = 2**20, 2**18
    assert buffer_bytes("all_reduce", mib, 4) == 4 * mib
    assert buffer_bytes("all_gather", mib, 4) == 2 * mib + 2 * part
    assert buffer_bytes("broadcast", mib, 4) == 2 * mib


@pytest.mark.parametrize(
    ("collective", "factor"),
    [
        ("all_reduce", 2 * 3 / 4),
        ("all_gather", 3 / 4),
        ("reduce_scatter", 3 / 4),
        ("all_to_all", 3 / 4),
        ("broadcast", 1),
    ],
)
def test_rows_carry_algbw_and_busbw_of_the_slowest_rank(collective, factor):
    world, nbytes = 4, 64 * 2**20
    point = make_point(collective, nbytes, world)
    assert point.nbytes == nbytes
    # rank medians 2, 4, 8, 3 ms: rank 2 is the slowest; its samples 6, 8, 10, 12 ms (p20 7.2, p80 10.8)
    samples = torch.tensor(
        [[1.0, 2.0, 2.0, 3.0], [4.0, 4.0, 4.0, 4.0], [6.0, 8.0, 12.0, 10.0], [3.0, 3.0, 3.0, 3.0]], dtype=torch.float64
    )
    rows = point_rows(Measured(point, samples, [0] * world, [0.0] * world), "gloo", [{"group_rank": 0}] * world)
    row = rows[0]
    assert row["slowest_rank"] == 2 and row["median_ms"] == pytest.approx(9.0)
    algbw = nbytes / 9e-3 / 1e9  # 64 MiB in 9 ms: 7.456… GB/s
    assert row["algbw_gbs"] == pytest.approx(algbw)
    assert row["busbw_gbs"] == pytest.approx(algbw * factor)
    assert row["busbw_factor"] == pytest.approx(factor)
    # the rate's p20 from the time's p80 (10.8 ms), its p80 from the time's p20 (7.2 ms)
    assert row["algbw_gbs_p20"] == pytest.approx(nbytes / 10.8e-3 / 1e9)
    assert row["busbw_gbs_p80"] == pytest.approx(nbytes / 7.2e-3 / 1e9 * factor)
    # per call, the slowest of the ranks: 6, 8, 12, 10 → median 9
    assert row["call_max_median_ms"] == pytest.approx(9.0)
    assert row["status"] == "ok" and row["nodes"] == 1
    assert [r["median_ms"] for r in rows[1:]] == pytest.approx([2.0, 4.0, 9.0, 3.0])
    assert CollectivePoint.from_row(row).text() == f"{collective} 64 MiB: 9.000 ms, busbw {algbw * factor:.2f} GB/s"


def test_a_wrong_value_on_one_rank_is_an_error_row_that_names_it():
    point = make_point("all_reduce", 64, 2)  # 16 elements
    samples = torch.ones(2, 3, dtype=torch.float64)
    row = point_rows(Measured(point, samples, [0, 3], [0.0, 2.0]), "gloo", [])[0]
    assert row["status"] == "error" and row["check"] == "mismatch"
    assert row["reason"] == "wrong values on rank 1 (3 of 16 elements, largest difference 2)"


def test_a_point_not_measured_says_why():
    row = not_measured_row(make_point("broadcast", 2**30, 2), "nccl", "unsupported", "no NCCL on this box")
    assert row["median_ms"] is None and row["busbw_factor"] == 1.0
    assert CollectivePoint.from_row(row).text() == "broadcast 1 GiB: unsupported"
    assert CollectivePoint.from_row(row).text(full=True) == "broadcast 1 GiB: unsupported: no NCCL on this box"

"""Thinning a long series keeps every bin's maximum (and minimum for an envelope), its ends and the global peak."""

import numpy as np
import pytest

from core.memory.series import thin_indices


def bins(n: int, count: int) -> list[tuple[int, int]]:
    """The test's own split of range(n) into ``count`` bins of (nearly) equal width, as [start, end) pairs."""
    edges = [i * n // count for i in range(count + 1)]
    return [(a, b) for a, b in zip(edges, edges[1:]) if a < b]


def test_short_series_are_kept_whole():
    assert thin_indices([3, 1, 2], 10).tolist() == [0, 1, 2]
    assert thin_indices(list(range(10)), 10).tolist() == list(range(10))


@pytest.mark.parametrize("n", [10_000, 10_007])  # equal bins, and bins of two widths
def test_one_spike_survives_any_thinning(n):
    values = np.random.default_rng(0).uniform(0, 1, n)
    values[4321] = 50.0  # one event, far above everything
    kept = thin_indices(values, 103)
    assert len(kept) <= 103
    assert 4321 in kept and 0 in kept and n - 1 in kept
    assert kept.tolist() == sorted(set(kept.tolist()))


@pytest.mark.parametrize("n", [1_000, 1_013])
def test_every_bins_maximum_is_kept(n):
    values = np.random.default_rng(n).integers(0, 10**9, n)  # distinct enough: ties are not the point here
    max_points = 53
    kept = set(thin_indices(values, max_points).tolist())
    for a, b in bins(n, max_points - 3):
        assert values[a:b].max() in {values[i] for i in kept if a <= i < b}, (a, b)


def test_an_envelope_keeps_each_bins_minimum_too():
    n, max_points = 2_000, 43
    values = np.random.default_rng(5).normal(0, 1, n)
    kept = thin_indices(values, max_points, envelope=True)
    assert len(kept) <= max_points
    kept_set = set(kept.tolist())
    for a, b in bins(n, (max_points - 3) // 2):
        inside = {values[i] for i in kept_set if a <= i < b}
        assert values[a:b].max() in inside and values[a:b].min() in inside
    assert int(np.argmin(values)) in kept_set and int(np.argmax(values)) in kept_set

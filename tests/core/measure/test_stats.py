"""Summary statistics against NumPy's, and GB/s by hand."""

import numpy as np
import pytest

from core.measure.stats import gbs, gbs_summary, percentile, summarize


@pytest.mark.parametrize("n", [1, 2, 5, 10, 101])
def test_percentile_is_numpys_linear_percentile(n):
    values = sorted(np.random.default_rng(n).exponential(3.0, n).tolist())
    for q in (0, 5, 20, 50, 80, 99, 100):
        assert percentile(values, q) == pytest.approx(np.percentile(values, q), rel=1e-12)


def test_percentile_of_four_values_by_hand():
    # position (4 − 1)·20/100 = 0.6: 10 + 0.6·(20 − 10) = 16; position 2.4 for p80: 30 + 0.4·(40 − 30) = 34
    assert percentile([10.0, 20.0, 30.0, 40.0], 20) == pytest.approx(16.0)
    assert percentile([10.0, 20.0, 30.0, 40.0], 80) == pytest.approx(34.0)
    with pytest.raises(ValueError):
        percentile([], 50)


def test_summarize_matches_numpy_and_prefixes_its_keys():
    samples = np.random.default_rng(3).normal(5.0, 1.0, 37).tolist()
    got = summarize(samples, prefix="ms_")
    assert got["ms_median"] == pytest.approx(np.median(samples))
    assert got["ms_mean"] == pytest.approx(np.mean(samples))
    assert got["ms_std"] == pytest.approx(np.std(samples, ddof=1))  # the sample standard deviation
    assert got["ms_min"] == min(samples) and got["ms_max"] == max(samples)
    assert got["ms_p20"] == pytest.approx(np.percentile(samples, 20))
    assert got["ms_p80"] == pytest.approx(np.percentile(samples, 80))
    assert got["ms_count"] == 37
    assert set(got) == {f"ms_{k}" for k in ("median", "mean", "std", "min", "max", "p20", "p80", "count")}


def test_summarize_sorts_unsorted_samples_and_one_sample_has_no_spread():
    got = summarize([3, 1, 2])
    assert (got["median"], got["min"], got["max"], got["p20"]) == (2, 1, 3, pytest.approx(1.4))
    assert summarize([7.5])["std"] == 0.0


def test_gbs_is_decimal_gigabytes_per_second():
    assert gbs(1e9, 1000.0) == pytest.approx(1.0)  # 10⁹ bytes in one second
    assert gbs(2**30, 1.0) == pytest.approx(1073.741824)  # 1 GiB in 1 ms
    # the rate's p20 comes from the time's p80 (the slower calls) and its p80 from the time's p20
    got = gbs_summary(4e6, {"median": 2.0, "p20": 1.0, "p80": 4.0})
    assert got == pytest.approx({"gbs": 2.0, "gbs_p20": 1.0, "gbs_p80": 4.0})

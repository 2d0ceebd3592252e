"""core.arrays: numpy's own unique, percentile, median and isin, to the bit, without importing numpy.ma (which
numpy 2.4 imports for a plain np.unique, np.percentile, np.median or np.isin: 10-15 ms of every import's worker)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from core.arrays import distinct, isin, median, percentiles
from tests.conftest import ROOT


def _samples(seed: int, count: int = 400):
    rng = np.random.default_rng(seed)
    for trial in range(count):
        n = int(rng.integers(1, 200))
        yield [
            rng.random(n) * 10.0 ** int(rng.integers(-3, 7)),
            rng.integers(0, 30, n).astype(float),  # ties
            rng.exponential(3.0, n),
            np.round(rng.normal(100, 30, n), 3),
        ][trial % 4]


def _bits(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float64).view(np.int64)


def test_percentiles_are_numpys_to_the_bit():
    for q in ([50, 90, 99], [0, 100, 25, 75, 33.3, 12.5]):
        for v in _samples(1):
            assert np.array_equal(_bits(percentiles(v, q)), _bits(np.percentile(v, q))), (v, q)


def test_the_median_is_numpys_to_the_bit_for_floats_and_integers():
    for v in _samples(2):
        assert _bits(median(v)) == _bits(np.median(v))
        assert _bits(median(list(v.astype(np.int64)))) == _bits(np.median(v.astype(np.int64)))
    assert np.isnan(median([1.0, float("nan"), 3.0])) and np.isnan(median([]))


def test_distinct_and_isin_are_numpys():
    rng = np.random.default_rng(3)
    for _ in range(400):
        v = rng.integers(-5, 40, int(rng.integers(0, 200)))
        wanted = list(rng.integers(0, 30, int(rng.integers(0, 20))))
        assert np.array_equal(distinct(v), np.unique(v))
        assert np.array_equal(isin(v, wanted), np.isin(v, wanted))
        assert np.array_equal(isin(v.astype(float), np.array(wanted, float)), np.isin(v, wanted))
    v = np.array([1.0, np.nan, 2.0])
    assert np.array_equal(isin(v, [np.nan, 2.0]), np.isin(v, [np.nan, 2.0]))
    nans = np.array([2.0, np.nan, 2.0, np.nan])
    assert np.array_equal(distinct(nans), np.unique(nans), equal_nan=True) and len(distinct(nans)) == 2


@pytest.mark.parametrize("trace", ["tracelens_b200_vllm_moe_kernels.json.gz", "hta_a100_backward_excerpt.json"])
def test_reading_a_trace_never_imports_numpy_ma(trace):
    probe = (
        "import sys\n"
        "from core.workload.trace.analysis import analyse\n"
        "from core.workload.trace.timeline import read_trace\n"
        f"analyse(read_trace('tests/data/workload/{trace}'), 20)\n"
        "print('numpy.ma' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "False"

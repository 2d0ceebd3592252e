"""Array helpers the numpy analyses share."""

from __future__ import annotations

import numpy as np


def distinct(values: np.ndarray) -> np.ndarray:
    """``np.unique(values)``: the sorted distinct values (NaNs as one). Asked with the counts, which are dropped: a
    plain ``np.unique`` asks, on numpy 2.4, whether the array is masked, and that imports ``numpy.ma`` — about 10 ms
    of every import's worker, which never meets a masked array."""
    return np.unique(values, return_counts=True)[0]


def percentiles(values: np.ndarray, q: list[float]) -> np.ndarray:
    """``np.percentile(values, q)`` of finite values, by the same linear rule and arithmetic: the ``q``/100 × (n − 1)th
    of the sorted values, between its two neighbours as numpy's ``_lerp`` weighs them (from the upper one where the
    weight is ½ or more). Not ``np.percentile`` itself: on numpy 2.4 it sorts its indices with a plain ``np.unique``
    and so imports ``numpy.ma`` (see :func:`distinct`)."""
    ordered = np.sort(values)
    at = (len(ordered) - 1) * (np.asarray(q, dtype=np.float64) / 100)
    below = np.floor(at)
    weight = at - below
    index = below.astype(np.intp)
    lower = ordered[index]
    upper = ordered[np.minimum(index + 1, len(ordered) - 1)]
    step = upper - lower
    out = lower + step * weight
    np.subtract(upper, step * (1 - weight), out=out, where=weight >= 0.5)
    return out


def median(values) -> float:
    """``float(np.median(values))``, by the same arithmetic: the middle of the sorted values, or the mean of the two
    middle ones (their sum halved); NaN where a value is. Not ``np.median`` itself: on numpy 2.4 its check for NaN
    asks whether the result is masked and so imports ``numpy.ma`` (see :func:`distinct`)."""
    ordered = np.sort(np.asarray(values, dtype=np.float64))
    if not len(ordered) or np.isnan(ordered[-1]):
        return float("nan")
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return float(ordered[middle])
    return float((ordered[middle - 1] + ordered[middle]) / 2)


def isin(values: np.ndarray, wanted) -> np.ndarray:
    """``np.isin(values, wanted)``: where each value is one of ``wanted`` (a value equal to none, NaN included, is
    not). Looked up in the sorted distinct ``wanted``: ``np.isin`` takes them distinct with a plain ``np.unique`` on
    numpy 2.4, which imports ``numpy.ma`` (see :func:`distinct`)."""
    values = np.asarray(values)
    known = distinct(np.asarray(wanted))
    if not len(known):
        return np.zeros(values.shape, dtype=bool)
    at = np.minimum(np.searchsorted(known, values), len(known) - 1)
    return known[at] == values

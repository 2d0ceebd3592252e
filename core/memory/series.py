"""Long memory series drawn with a bounded number of points, without losing a spike.

A chart gets at most a few thousand points (a browser handles ~20k per chart); a recorded series can
have millions. Each bin keeps its highest point — and, for an envelope, its lowest — so a peak or a
dip of a single event still shows at any zoom, and the global peak is always kept.
"""

from __future__ import annotations

import numpy as np

from core.arrays import distinct


def thin_indices(values, max_points: int, envelope: bool = False) -> np.ndarray:
    """Sorted indices of at most ``max_points`` points of ``values``: per bin the maximum (and the minimum
    with ``envelope``), the first and last point, and the global maximum."""
    values = np.asarray(values)
    n = len(values)
    if n <= max_points:
        return np.arange(n)
    bins = max(1, (max_points - 3) // (2 if envelope else 1))
    edges = np.linspace(0, n, bins + 1).astype(np.int64)
    starts, ends = edges[:-1], edges[1:]
    keep = starts < ends
    starts, ends = starts[keep], ends[keep]
    picks = [_reduce_at(values, starts, ends, np.argmax)]
    if envelope:
        picks.append(_reduce_at(values, starts, ends, np.argmin))
    picks.append(np.array([0, n - 1, int(np.argmax(values))]))
    return distinct(np.concatenate(picks))


def _reduce_at(values: np.ndarray, starts: np.ndarray, ends: np.ndarray, arg) -> np.ndarray:
    """Index of the max (or min) of every bin [start, end): bins of equal width are reshaped, the rest looped."""
    widths = ends - starts
    if len(widths) and (widths == widths[0]).all():
        w = int(widths[0])
        block = values[starts[0] : starts[0] + w * len(starts)].reshape(len(starts), w)
        return starts + arg(block, axis=1)
    return np.array([s + int(arg(values[s:e])) for s, e in zip(starts, ends)], dtype=np.int64)

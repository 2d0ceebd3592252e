"""Summary statistics derived from raw timing samples (the samples themselves are kept in results)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (q in 0..100) of already sorted values, as numpy's default."""
    if not sorted_values:
        raise ValueError("no samples")
    pos = (len(sorted_values) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def summarize(samples: Sequence[float], prefix: str = "") -> dict[str, float]:
    """median, mean, std, min, max, p20, p80 and count of ``samples``; keys get ``prefix`` (e.g. ``ms_``)."""
    values = sorted(float(v) for v in samples)
    out = {
        "median": statistics.median(values),
        "mean": statistics.fmean(values),
        "std": statistics.stdev(values) if len(values) > 1 else 0.0,
        "min": values[0],
        "max": values[-1],
        "p20": percentile(values, 20),
        "p80": percentile(values, 80),
        "count": len(values),
    }
    return {f"{prefix}{k}": v for k, v in out.items()}


def time_fields(stats: dict[str, float]) -> dict[str, float]:
    """:func:`summarize`'s figures of times in ms as a result row names them: ``median_ms`` … ``p80_ms``, ``reps``."""
    return {
        **{f"{k}_ms": stats[k] for k in ("median", "mean", "std", "min", "max", "p20", "p80")},
        "reps": stats["count"],
    }


def gbs(nbytes: float, ms: float) -> float:
    """``nbytes`` moved in ``ms`` milliseconds, in GB/s (1 GB = 10⁹ bytes)."""
    return nbytes / (ms * 1e-3) / 1e9


def copy_bandwidth(nbytes_copied: float, stats: dict[str, float]) -> dict[str, float]:
    """The lab's one copy-bandwidth definition: the bytes copied, counted **once**, per second, in GB/s
    (1 GB = 10⁹ bytes) at the median time, with p20 and p80 (:func:`gbs_summary`).

    This is nccl-tests' and CUDA's ``bandwidthTest``/``p2pBandwidthLatencyTest`` convention: copying
    1 GB in 1 s is 1 GB/s, whether the copy goes host↔GPU, GPU→GPU or within one memory. A copy within
    one memory (matmul's roofline copy) reads and writes every byte, so its memory *traffic* is twice
    this number; code that needs traffic (the roofline) multiplies by :data:`COPY_TRAFFIC_PER_BYTE`
    where it uses it, never by counting the bytes twice here.
    """
    return gbs_summary(nbytes_copied, stats)


COPY_TRAFFIC_PER_BYTE = 2  # a copy within one memory: each byte copied is read once and written once


def gbs_summary(nbytes: float, stats: dict[str, float]) -> dict[str, float]:
    """GB/s at the median time of :func:`summarize`'s ``stats``, with its p20 and p80: a rate's p20 comes
    from the time's p80 and its p80 from the time's p20."""
    return {
        "gbs": gbs(nbytes, stats["median"]),
        "gbs_p20": gbs(nbytes, stats["p80"]),
        "gbs_p80": gbs(nbytes, stats["p20"]),
    }

"""A soak's sample and summary as the engine stores them: one second of throughput, and burst vs sustained.

The engine builds a :class:`SoakSample` per second (whole calls × the FLOP of one ÷ the sample's own length,
with NVML's readings where there are any) and stores ``to_row()``; the run's :class:`SoakSummary` is derived
from the samples once and stored in its meta (``to_meta()``). Renderers and pages read them back with
``from_row``/``from_meta`` and derive nothing. Every field has been stored since the soak's first version, so
no run needs an upgrade. Torch-free.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from core.hardware.clocks import SLOWDOWNS
from core.measure.soak import Interval
from core.result import RunResult
from core.rows.matmul import CLOCKS, TFLOPS


@dataclass(frozen=True)
class SoakSample:
    dtype: str = ""
    size: int = 0  # M = N = K
    second: int = 0  # 1, 2, …
    t_s: float = 0.0  # when the sample closed, since sampling began
    t_start_s: float = 0.0
    interval_s: float = 0.0  # its own measured length: a second and at most one call more
    calls: int = 0
    tflops: float = 0.0  # TOPS for int8
    clocks: Mapping[str, Any] = field(default_factory=dict)  # NVML's summary over the sample (GPU), CLOCKS' keys
    extra: Mapping[str, Any] = field(default_factory=dict)  # keys others add (the fan-out's GPU)

    @classmethod
    def of(cls, interval: Interval, dtype: str, size: int, flops_per_call: int) -> SoakSample:
        """The sample of one interval: its throughput from whole calls over its measured length."""
        tflops = interval.calls * flops_per_call / interval.seconds / 1e12
        return cls(
            dtype, size, interval.second, interval.t_end_s, interval.t_start_s, interval.seconds, interval.calls, tflops
        )

    @property
    def sm_clock_mhz(self) -> float | None:
        return self.clocks.get("sm_clock_mhz")

    @property
    def throttle_reasons(self) -> list[str]:
        return list(self.clocks.get("throttle_reasons") or ())

    @property
    def throttled(self) -> bool:
        return bool(self.clocks.get("throttled"))

    @property
    def device(self) -> str | None:
        """The GPU the fan-out tagged the sample with (an all-GPU run); None on a run of one device."""
        device = self.extra.get("device")
        return str(device) if device else None

    def to_row(self) -> dict:
        """The stored row: the keys and order runs have always had."""
        row = {name: getattr(self, name) for name in _SAMPLE}
        return row | {"gflops": self.tflops * 1e3, **self.clocks, **self.extra}

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> SoakSample:
        """A stored row as a sample; keys it lacks take their defaults, keys it does not name stay in ``extra``."""
        return cls(
            **{k: row[k] for k in _SAMPLE if k in row},
            clocks={k: row[k] for k in CLOCKS if k in row},
            extra={k: v for k, v in row.items() if k not in {*_SAMPLE, *CLOCKS, "gflops"}},
        )


def samples(rows: Sequence[Mapping[str, Any]]) -> list[SoakSample]:
    """A run's samples, in order: its rows with a throughput (a row without one is no sample)."""
    return [SoakSample.from_row(r) for r in rows if isinstance(r.get(TFLOPS), int | float)]


# the sample's own fields, stored on every row, in the order runs have always had
_SAMPLE = ("dtype", "size", "second", "t_s", "t_start_s", "interval_s", "calls", TFLOPS)


@dataclass(frozen=True)
class SoakSummary:
    """Burst, sustained and the drop between them (docs/methods/matmul.md), stored in the run's meta in this
    order (each GPU's meta of an all-GPU run)."""

    burst_tflops: float = 0.0  # the best sample begun within the first burst_s seconds
    sustained_tflops: float = 0.0  # the median of the last half of the samples
    drop_pct: float = 0.0  # 100 × (burst − sustained) / burst
    drop_threshold_pct: float = 0.0
    drop_flagged: bool = False  # drop_pct above drop_threshold_pct
    burst_s: float = 0.0
    burst_second: int = 0
    sustained_from_second: int = 0
    samples: int = 0
    burst_sm_clock_mhz: float | None = None
    sustained_sm_clock_mhz: float | None = None  # the median over the last half, where NVML read it
    sustained_slowdown_reasons: list[str] | None = None  # None where NVML gave no reasons: nothing claimed
    drop_reason: str = ""  # the verdict in plain words

    @classmethod
    def of(
        cls, samples: Sequence[SoakSample], burst_s: float, threshold_pct: float, unit: tuple[str, float]
    ) -> SoakSummary | None:
        """The summary of a run's samples (None without one); ``unit`` is (name, factor) of the reason text."""
        if not samples:
            return None
        late = samples[len(samples) // 2 :]
        best = max([s for s in samples if s.t_start_s < burst_s] or samples[:1], key=lambda s: s.tflops)
        sustained = statistics.median(s.tflops for s in late)
        drop = 100.0 * (best.tflops - sustained) / best.tflops if best.tflops > 0 else 0.0
        clocks = [c for s in late if isinstance(c := s.sm_clock_mhz, (int, float))]
        seen = sorted({x for s in late for x in s.throttle_reasons} & SLOWDOWNS)
        summary = cls(
            burst_tflops=best.tflops,
            sustained_tflops=sustained,
            drop_pct=drop,
            drop_threshold_pct=threshold_pct,
            drop_flagged=drop > threshold_pct,
            burst_s=burst_s,
            burst_second=best.second,
            sustained_from_second=late[0].second,
            samples=len(samples),
            burst_sm_clock_mhz=best.sm_clock_mhz,
            sustained_sm_clock_mhz=statistics.median(clocks) if clocks else None,
            sustained_slowdown_reasons=seen if any("throttle_reasons" in s.clocks for s in late) else None,
        )
        return dataclasses.replace(summary, drop_reason=summary.reason(unit))

    def reason(self, unit: tuple[str, float]) -> str:
        """The verdict in plain words, e.g. "sustained 82.0% of burst (812 → 666 TFLOPS): a 18.0% drop, over
        the 10% threshold; SM clock 1965 → 1580 MHz; NVML slowdown reasons: sw_power_cap"."""
        name, scale = unit
        head = (
            f"sustained {100.0 - self.drop_pct:.1f}% of burst ({self.burst_tflops * scale:,.1f} → "
            f"{self.sustained_tflops * scale:,.1f} {name})"
        )
        if self.drop_flagged:
            head += f": a {self.drop_pct:.1f}% drop, over the {self.drop_threshold_pct:g}% threshold"
        elif self.drop_pct < 0:
            head += ": throughput rose after the burst window (clocks still ramping, or another load ended)"
        else:
            head += f": within the {self.drop_threshold_pct:g}% threshold"
        said = []
        before, after = self.burst_sm_clock_mhz, self.sustained_sm_clock_mhz
        if before is not None and after is not None:
            said.append(f"SM clock {before:.0f} → {after:.0f} MHz")
        reasons = self.sustained_slowdown_reasons
        if reasons:
            said.append("NVML slowdown reasons: " + ", ".join(reasons))
        elif reasons is not None and not self.drop_flagged and self.drop_pct >= 0:
            said.append("no throttling seen")
        return "; ".join([head, *said])

    def to_meta(self) -> dict:
        """The stored meta keys, in the order runs have always had."""
        return dataclasses.asdict(self)

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any]) -> SoakSummary | None:
        """The summary a meta holds; None for a run that ended before its last sample (no burst figure)."""
        if "burst_tflops" not in meta:
            return None
        return cls(**{f.name: meta[f.name] for f in dataclasses.fields(cls) if f.name in meta})


SOAK_NOTES = ("clocks_note", "cpu_load_note", "dtype_note")  # what a soak's meta (each GPU's) says beside its figures


@dataclass(frozen=True)
class SoakMeta:
    """A soak run's meta as its views read it: its dtype, each device's summary (one, or one per GPU of an all-GPU
    run, from that GPU's meta) and what any of its metas noted, each once."""

    dtype: str | None = None
    summaries: Mapping[str, SoakSummary] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    @classmethod
    def from_run(cls, run: RunResult, all_gpus: bool) -> SoakMeta:
        devices = run.meta.get("devices")
        devices = devices if isinstance(devices, Mapping) else {}
        metas = devices if all_gpus else {run.device_info.torch_device or "device": run.meta}
        found = {device: SoakSummary.from_meta(meta) for device, meta in metas.items() if isinstance(meta, Mapping)}
        every = [run.meta, *(m for m in devices.values() if isinstance(m, Mapping))]
        dtype = run.meta.get("dtype")
        return cls(
            dtype=dtype if isinstance(dtype, str) else None,
            summaries={device: s for device, s in found.items() if s},
            notes=tuple(dict.fromkeys(str(m[k]) for m in every for k in SOAK_NOTES if m.get(k))),
        )

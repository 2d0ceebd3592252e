"""The figures a run is judged by: one number each, named, with the device it was measured on.

One reader per experiment (``FIGURES``), so the health verdict, the box's history and the Compare page's
trend chart read the same numbers from a stored run. Higher is better for every figure but the soak's
burst→sustained drop, which has a ceiling (the soak's own threshold) instead of a reference. A matmul figure
carries its shape, whether it is the best of a search, and what NVML read while it was measured (the SM clock,
the power drawn, the card's power limit and boost ceiling, the slowdown reasons): the verdict needs all of them.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

from core.hardware.clocks import SLOWDOWNS, ClockReading
from core.hardware.health_reference import ALL_REDUCE_FIGURE, PEER_FIGURE
from core.result import DeviceInfo, RunResult
from core.rows.interconnect import CollectivePoint, InterconnectTables, PeerCopy
from core.rows.matmul import TFLOPS

SOAK = "matmul-soak"


@dataclass(frozen=True)
class Figure:
    figure: str  # what is shown: "matmul bf16 sustained"
    where: str  # the device it was measured on ("cuda:1", "cpu", "node": every GPU of the box)
    value: float
    unit: str
    device: dict  # the device description its reference is looked up by
    reference_figure: str | None = None  # its row of the reference table ("matmul bf16")
    ceiling: float | None = None  # a figure that must stay at or below this (the soak's drop threshold)
    flagged: bool = False  # the experiment itself flagged it (the soak's drop)
    note: str = ""
    slowdown: str = ""  # the card's own account of running slower while measured (clocks, NVML reasons)
    shape: tuple[int, int, int] | None = None  # a matmul figure's M×N×K
    searched: bool = False  # the best of a shape search (comparable with a published maximum)
    clocks: ClockReading = field(default_factory=ClockReading)  # what NVML read while it was measured

    @property
    def device_info(self) -> DeviceInfo:
        return DeviceInfo.of(self.device)

    @property
    def key(self) -> str:
        """What identifies the figure across runs of one box: its name and the device."""
        return f"{self.figure} @ {self.where}"


def _num(value) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _where(device: DeviceInfo) -> str:
    return str(device.torch_device or device.kind or "?")


def soak_figures(run: RunResult) -> list[Figure]:
    """Burst and sustained matmul throughput of a soak run, and the drop between them."""
    meta, dtype, where = run.meta, run.config.get("dtype", "?"), _where(run.device_info)
    out, slowdown = [], _soak_slowdown(meta)
    size = int(meta.get("size") or 0)
    shape = (size, size, size) if size else None
    for phase in ("burst", "sustained"):
        value = _num(meta.get(f"{phase}_tflops"))
        if value is not None:
            out.append(
                Figure(
                    f"matmul {dtype} {phase}",
                    where,
                    value,
                    "TFLOPS",
                    run.device,
                    f"matmul {dtype}",
                    slowdown=slowdown,
                    shape=shape,
                    clocks=_soak_clocks(run, phase),
                )
            )
    drop, limit = _num(meta.get("drop_pct")), _num(meta.get("drop_threshold_pct"))
    if drop is not None:
        out.append(
            Figure(
                f"matmul {dtype} burst→sustained drop",
                where,
                drop,
                "%",
                run.device,
                ceiling=limit,
                flagged=bool(meta.get("drop_flagged")),
                note=f"the soak flags a drop above {limit:g}%" if limit is not None else "",
            )
        )
    return out


def _soak_slowdown(meta: dict) -> str:
    """The SM clock and NVML's slowdown reasons of a soak that saw any (a card at its power cap, hot or braked):
    a throughput below its reference then says why in the card's own words. Empty where NVML named none."""
    reasons = meta.get("sustained_slowdown_reasons") or []
    if not reasons:
        return ""
    clocks = [f"{v:.0f}" for k in ("burst_sm_clock_mhz", "sustained_sm_clock_mhz") if (v := _num(meta.get(k)))]
    clock = f"SM clock {' → '.join(clocks)} MHz; " if clocks else ""
    return f"{clock}NVML slowdown reasons: {', '.join(reasons)}"


def reading(rows: list[dict], meta: dict, clock: float | None = None) -> ClockReading:
    """NVML's reading over ``rows`` (the samples or points a figure was measured in): the SM clock (``clock`` where
    the run states it, else their median), the mean power, the slowdown reasons any of them saw (None where none
    was read), and the run's power limit and boost ceiling."""
    clocks = [v for r in rows if (v := _num(r.get("sm_clock_mhz"))) is not None]
    powers = [v for r in rows if (v := _num(r.get("power_w"))) is not None]
    read = [r["throttle_reasons"] for r in rows if isinstance(r.get("throttle_reasons"), list)]
    return ClockReading(
        clock if clock is not None else (statistics.median(clocks) if clocks else None),
        statistics.fmean(powers) if powers else None,
        _num(meta.get("power_limit_w")),
        _num(meta.get("max_sm_clock_mhz")),
        tuple(sorted({x for rs in read for x in rs} & SLOWDOWNS)) if read else None,
    )


def _soak_clocks(run: RunResult, phase: str) -> ClockReading:
    """The burst's sample, or the sustained figure's samples (the second half), as NVML read them."""
    meta = run.meta
    if phase == "burst":
        rows = [r for r in run.rows if r.get("second") == meta.get("burst_second")]
    else:
        rows = [r for r in run.rows if (r.get("second") or 0) >= (meta.get("sustained_from_second") or 0)]
    return reading(rows, meta, _num(meta.get(f"{phase}_sm_clock_mhz")))


def _gpu_device(run: RunResult, index) -> dict:
    """The description of GPU ``index`` of an interconnect run (it runs on cuda:0 and uses every GPU)."""
    if index == run.device_info.index:
        return run.device
    return run.device | {"index": index, "torch_device": f"cuda:{index}", "uuid": None}


def interconnect_figures(run: RunResult) -> list[Figure]:
    """Pinned host copies at the largest size per GPU and direction, the slowest peer copy from each GPU,
    and all_reduce's bus bandwidth at the largest message."""
    tables = InterconnectTables.from_run(run)
    return [*_pinned_figures(run, tables), *_peer_figures(run, tables), *_all_reduce_figure(run, tables)]


def _pinned_figures(run: RunResult, tables: InterconnectTables) -> list[Figure]:
    largest: dict[tuple[int, str], tuple[int, float]] = {}  # (GPU, direction) → (bytes, GB/s), the first largest
    for r in tables.host_copies:
        if r.ok and r.memory == "pinned" and r.gpu is not None and r.gbs is not None:
            key = (r.gpu, r.direction)
            if key not in largest or r.nbytes > largest[key][0]:
                largest[key] = (r.nbytes, r.gbs)
    return [
        Figure(f"{direction} pinned", f"cuda:{gpu}", largest[gpu, direction][1], "GB/s", _gpu_device(run, gpu),
               f"{direction} pinned")
        for gpu in sorted({gpu for gpu, _ in largest})
        for direction in ("h2d", "d2h")
        if (gpu, direction) in largest
    ]  # fmt: skip


def _peer_figures(run: RunResult, tables: InterconnectTables) -> list[Figure]:
    slowest: dict[int, tuple[float, PeerCopy]] = {}  # source GPU → its slowest copy (the first of equals)
    for r in tables.peers:
        if r.ok and r.src is not None and r.src != r.dst and r.gbs is not None:
            if r.src not in slowest or r.gbs < slowest[r.src][0]:
                slowest[r.src] = (r.gbs, r)
    return [
        Figure(
            PEER_FIGURE,
            f"cuda:{src}",
            gbs,
            "GB/s",
            _gpu_device(run, src),
            PEER_FIGURE,
            note=f"slowest pair: cuda:{src} → cuda:{r.dst} ({r.path})",
        )
        for src, (gbs, r) in sorted(slowest.items())
    ]


def _all_reduce_figure(run: RunResult, tables: InterconnectTables) -> list[Figure]:
    best: tuple[float, CollectivePoint] | None = None  # the largest message's bus bandwidth (the first of equals)
    for p in tables.collectives:
        busbw = _num(p.busbw_gbs)
        if p.collective == "all_reduce" and busbw and (best is None or p.nbytes > best[1].nbytes):
            best = (busbw, p)
    if best is None:
        return []
    busbw, p = best
    note = f"{p.size} over {p.world_size} ranks ({p.backend})"
    return [Figure(ALL_REDUCE_FIGURE, "node", busbw, "GB/s", run.device, ALL_REDUCE_FIGURE, note=note)]


def matmul_figures(run: RunResult) -> list[Figure]:
    """The best throughput per dtype of a matmul run (its ``meta.best``): the best of a search where the run was
    a bounded mamf-style search (``--mamf``), else the best point of its sweep, a fixed shape."""
    where, searched = _where(run.device_info), bool(run.config.get("mamf"))
    out = []
    for dtype, best in (run.meta.get("best") or {}).items():
        if not _num(best.get(TFLOPS)):
            continue
        shape = (int(best["m"]), int(best["n"]), int(best["k"]))
        rows = [r for r in run.rows if r.get("dtype") == dtype and (r.get("m"), r.get("n"), r.get("k")) == shape]
        search = (run.meta.get("search") or {}).get(dtype) or {}
        note = (
            f"best of {search.get('started')} shapes in {search.get('spent_s', 0):.0f} s (budget "
            f"{search.get('budget_s', 0):g} s) from {search.get('start_from', '?')}, at {'×'.join(map(str, shape))}"
            if searched
            else ""
        )
        out.append(
            Figure(
                f"matmul {dtype} {'searched' if searched else 'best'}",
                where,
                best[TFLOPS],
                "TFLOPS",
                run.device,
                f"matmul {dtype}",
                note=note,
                shape=shape,
                searched=searched,
                clocks=reading(rows[:1], run.meta),
            )
        )
    return out


FIGURES: dict[str, Callable[[RunResult], list[Figure]]] = {
    SOAK: soak_figures,
    "interconnect": interconnect_figures,
    "matmul": matmul_figures,
}


def figures_of(run: RunResult) -> list[Figure]:
    """The figures of a finished run (none for an experiment without a reader, or a failed run)."""
    reader = FIGURES.get(run.experiment)
    return reader(run) if reader and run.status == "ok" else []

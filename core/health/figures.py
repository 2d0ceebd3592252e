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
    out = []
    host = [r for r in run.rows if r.get("kind") == "host_copy" and r.get("status") == "ok" and r["memory"] == "pinned"]
    for gpu in sorted({r["gpu"] for r in host}):
        for direction in ("h2d", "d2h"):
            rows = [r for r in host if r["gpu"] == gpu and r["direction"] == direction]
            if rows:
                best = max(rows, key=lambda r: r["bytes"])
                figure = f"{direction} pinned"
                out.append(Figure(figure, f"cuda:{gpu}", best["gbs"], "GB/s", _gpu_device(run, gpu), figure))
    peers = [r for r in run.rows if r.get("kind") == "peer" and r.get("status") == "ok" and r["src"] != r["dst"]]
    for src in sorted({r["src"] for r in peers}):
        slowest = min((r for r in peers if r["src"] == src), key=lambda r: r["gbs"])
        out.append(
            Figure(
                PEER_FIGURE,
                f"cuda:{src}",
                slowest["gbs"],
                "GB/s",
                _gpu_device(run, src),
                PEER_FIGURE,
                note=f"slowest pair: cuda:{src} → cuda:{slowest['dst']} ({slowest['path']})",
            )
        )
    reduce = [
        r
        for r in run.rows
        if r.get("kind") == "collective" and r.get("collective") == "all_reduce" and _num(r.get("busbw_gbs"))
    ]
    if reduce:
        best = max(reduce, key=lambda r: r["bytes"])
        out.append(
            Figure(
                ALL_REDUCE_FIGURE,
                "node",
                best["busbw_gbs"],
                "GB/s",
                run.device,
                ALL_REDUCE_FIGURE,
                note=f"{best['size']} over {best['world_size']} ranks ({best['backend']})",
            )
        )
    return out


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

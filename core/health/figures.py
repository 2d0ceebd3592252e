"""The figures a run is judged by: one number each, named, with the device it was measured on.

One reader per experiment (``FIGURES``), so the health verdict, the box's history and the Compare page's
trend chart read the same numbers from a stored run. Higher is better for every figure but the soak's
burst→sustained drop, which has a ceiling (the soak's own threshold) instead of a reference.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from core.hardware.health_reference import ALL_REDUCE_FIGURE, PEER_FIGURE
from core.result import RunResult
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

    @property
    def key(self) -> str:
        """What identifies the figure across runs of one box: its name and the device."""
        return f"{self.figure} @ {self.where}"


def _num(value) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _where(device: dict) -> str:
    return str(device.get("torch_device") or device.get("kind") or "?")


def soak_figures(run: RunResult) -> list[Figure]:
    """Burst and sustained matmul throughput of a soak run, and the drop between them."""
    meta, dtype, where = run.meta, run.config.get("dtype", "?"), _where(run.device)
    out, slowdown = [], _soak_slowdown(meta)
    for phase in ("burst", "sustained"):
        value = _num(meta.get(f"{phase}_tflops"))
        if value is not None:
            name = f"matmul {dtype} {phase}"
            out.append(Figure(name, where, value, "TFLOPS", run.device, f"matmul {dtype}", slowdown=slowdown))
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


def _gpu_device(run: RunResult, index) -> dict:
    """The description of GPU ``index`` of an interconnect run (it runs on cuda:0 and uses every GPU)."""
    if index == run.device.get("index"):
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
    """The best throughput per dtype of a matmul sweep (its ``meta.best``)."""
    where = _where(run.device)
    return [
        Figure(f"matmul {dtype} best", where, best[TFLOPS], "TFLOPS", run.device, f"matmul {dtype}")
        for dtype, best in (run.meta.get("best") or {}).items()
        if _num(best.get(TFLOPS))
    ]


FIGURES: dict[str, Callable[[RunResult], list[Figure]]] = {
    SOAK: soak_figures,
    "interconnect": interconnect_figures,
    "matmul": matmul_figures,
}


def figures_of(run: RunResult) -> list[Figure]:
    """The figures of a finished run (none for an experiment without a reader, or a failed run)."""
    reader = FIGURES.get(run.experiment)
    return reader(run) if reader and run.status == "ok" else []

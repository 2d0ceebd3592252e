"""MFU as the field counts it, and the two figures a reader asks for next.

The headline is the model's FLOPs per second over the card's **bf16 dense datasheet peak**, whatever the
precision (nanoGPT's ``estimate_mfu``, llm.c and torchtitan all divide by it), so an fp32 step and a bf16 step
of the same model read on one scale. Beside it: the same over the **best bf16 matmul measured on this card** (a
matmul run in the store, named), which says how much of what the card really reaches the step gets, and over the
**precision's own unit** (an fp32 step over the fp32 peak), labelled as such because it reads an fp32 step as
"efficient" when it is only slow. Torch-free: it reads the datasheet and the store.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.hardware.identity import box_key
from core.hardware.specs import above_peak_error, device_peak
from core.result import RunResult
from core.transformer.presets import DTYPE_FOR_PRECISION

HEADLINE_UNIT = "bf16"
CEILING_EXPERIMENTS = ("matmul", "matmul-soak")  # runs whose rows are bf16 matmul points with a TFLOPS figure
CEILING_RUNS_READ = 200  # the newest runs of each looked at
HOST_BOUND_BUSY = 0.8  # a GPU busy less of the step than this waits for the host
HOST_BOUND_WARNING = (
    "host-bound — these times compare launch overhead, not dtypes; raise the batch, use the modern stack or compile"
)


@dataclass(frozen=True)
class Ceiling:
    """The best bf16 matmul measured on this device: a stored run's point, named."""

    tflops: float
    run_id: str
    experiment: str
    shape: str
    started_at: str

    @property
    def text(self) -> str:
        return (
            f"the best bf16 matmul measured on this device: {self.tflops:,.1f} TFLOPS at {self.shape} "
            f"({self.experiment} run {self.run_id[:8]}, {self.started_at[:10]})"
        )


def best_bf16_point(run: RunResult) -> tuple[float, str] | None:
    """The fastest bf16 point of a matmul run: (TFLOPS, "M×N×K"), or None."""
    points = [
        (float(r["tflops"]), f"{r.get('m')}×{r.get('n')}×{r.get('k')}")
        for r in run.rows
        if r.get("dtype") == "bf16" and r.get("status", "ok") == "ok" and isinstance(r.get("tflops"), (int, float))
    ]
    return max(points) if points else None


def measured_ceiling(device: dict, store) -> Ceiling | None:
    """The best bf16 matmul any stored run measured on this same device (host and GPU), or None."""
    key = box_key(device)
    if key is None or store is None:
        return None
    best: Ceiling | None = None
    for experiment in CEILING_EXPERIMENTS:
        for run in store.list(experiment=experiment, status="ok", limit=CEILING_RUNS_READ):
            point = best_bf16_point(run) if box_key(run.device) == key else None
            if point and (best is None or point[0] > best.tflops):
                best = Ceiling(point[0], run.id, experiment, point[1], run.started_at)
    return best


def mfu_figures(achieved_tflops: float, device: dict, precision: str, ceiling: Ceiling | None, what: str) -> dict:
    """The three MFUs of a step's achieved TFLOPS, each with its denominator, and whether the figure is above the
    precision's own peak (a measurement error, never a result)."""
    peak, why = device_peak(device, HEADLINE_UNIT)
    unit = DTYPE_FOR_PRECISION[precision]
    unit_peak, unit_why = device_peak(device, unit)
    error = above_peak_error(achieved_tflops, unit_peak, what)
    return {
        "mfu": achieved_tflops / peak if peak else None,
        "peak_tflops": peak,
        "peak_unit": HEADLINE_UNIT,
        "mfu_note": f"{why}, so no MFU" if why else None,
        "mfu_measured": achieved_tflops / ceiling.tflops if ceiling else None,
        "measured_ceiling_tflops": ceiling.tflops if ceiling else None,
        "measured_ceiling": ceiling.text
        if ceiling
        else "no bf16 matmul measured on this device yet: run Matmul throughput with bf16",
        "mfu_unit": achieved_tflops / unit_peak if unit_peak else None,
        "unit_peak_tflops": unit_peak,
        "unit_peak_name": unit,
        "unit_peak_note": unit_why,
        "above_peak": error is not None,
        "measurement_error": error,
    }


def host_bound(busy: float | None) -> bool | None:
    """Whether a step's device was idle long enough that its time is the host's (None: not profiled)."""
    return None if busy is None else busy < HOST_BOUND_BUSY

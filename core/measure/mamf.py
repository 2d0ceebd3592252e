"""The bounded shape search a published maximum is compared with: which shapes, in which order, for how long.

A published maximum (:mod:`core.hardware.published`) is the best shape of mamf-finder's brute-force search over
M, N and K (its suggested H100 range: 0…20480 in steps of 256 on each axis, hours of GPU time). The lab's search
is that search cut to a budget: the card's published best shape first (where the source measured one), then the
grid around it, :data:`RADIUS` steps each way on each axis, nearest first, until the budget is spent. A shape begun
before the budget ends runs to its end; the search never starts one after. Torch-free: the plan only.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from core.hardware import dtypes, published
from core.measure.gemm import MAX_DIM, Shape

GPU_STEP, CPU_STEP = 256, 64  # mamf-finder's suggested H100 range steps by 256; a CPU's shapes are small
RADIUS = 2  # steps each way on each axis: 5³ = 125 shapes at most
GPU_BUDGET_S, CPU_BUDGET_S = 30.0, 3.0  # seconds per dtype
GPU_START, CPU_START = (8192, 8192, 8192), (256, 256, 256)  # where the source measured no best shape
LABEL = "mamf search"


@dataclass(frozen=True)
class Plan:
    """One dtype's search: where it starts and why there, its grid (start first) and its budget."""

    dtype: str
    start: tuple[int, int, int]
    start_from: str  # why it starts there, in words
    step: int
    budget_s: float
    shapes: tuple[Shape, ...]

    def summary(self) -> dict:
        return {
            "start": list(self.start),
            "start_from": self.start_from,
            "step": self.step,
            "radius": RADIUS,
            "grid": len(self.shapes),
            "budget_s": self.budget_s,
        }


def grid(start: tuple[int, int, int], step: int, radius: int = RADIUS) -> list[Shape]:
    """``start`` first, then every shape within ``radius`` steps on each axis, fewest steps in all first (ties in
    the order of their offsets); dimensions under 1 or over the lab's limit are left out."""
    offsets = sorted(itertools.product(range(-radius, radius + 1), repeat=3), key=lambda o: (sum(map(abs, o)), o))
    shapes = []
    for offset in offsets:
        m, n, k = (d + step * o for d, o in zip(start, offset))
        if 1 <= min(m, n, k) and max(m, n, k) <= MAX_DIM:
            shapes.append(Shape(m, n, k, LABEL))
    return shapes


def plan(
    dtype: str,
    device: dict,
    is_cuda: bool,
    start: tuple[int, ...] = (),
    step: int = 0,
    budget_s: float = 0.0,
) -> Plan:
    """The search of ``dtype`` on ``device``: from ``start`` where given, else the published best shape of the
    card for the dtype's datasheet column, else the device's default; the device's step and budget where 0."""
    entry = published.figure(published.for_device(device), dtypes.get(dtype).column)
    if len(start) == 3:
        origin, why = (start[0], start[1], start[2]), "the start given"
    elif entry is not None:
        origin = entry.best_mnk
        why = f"the published best shape ({entry.accelerator} {entry.dtype}, {entry.card_words()}, {entry.date})"
    else:
        origin = GPU_START if is_cuda else CPU_START
        why = "no published best shape for this device: the lab's default start"
    step = step or (GPU_STEP if is_cuda else CPU_STEP)
    budget = budget_s or (GPU_BUDGET_S if is_cuda else CPU_BUDGET_S)
    return Plan(dtype, origin, why, step, budget, tuple(grid(origin, step)))


@dataclass
class Walk:
    """One plan walked under its budget: the shapes handed out (start first), then why it stopped and how long
    it took. ``clock`` is ``time.perf_counter`` unless a test hands in its own."""

    plan: Plan
    clock: Callable[[], float] = time.perf_counter
    started: int = 0
    spent_s: float = 0.0
    stopped: str = ""

    def shapes(self) -> Iterator[Shape]:
        began = self.clock()
        for shape in self.plan.shapes:
            if self.started and self.clock() - began >= self.plan.budget_s:
                self.stopped = f"budget spent: {self.started} of {len(self.plan.shapes)} shapes begun"
                break
            self.started += 1
            yield shape
        else:
            self.stopped = f"grid done: all {len(self.plan.shapes)} shapes"
        self.spent_s = self.clock() - began

    def summary(self) -> dict:
        return self.plan.summary() | {"started": self.started, "spent_s": self.spent_s, "stopped": self.stopped}

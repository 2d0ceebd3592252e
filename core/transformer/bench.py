"""A training step ready to time: built from a step setup, fed rotated random batches, warmed up until its time
is steady, then timed phase by phase.

Why warm up until steady rather than a fixed count: a step's first calls pay for set-up (cuBLAS handles, lazy
kernel loading, the allocator's first segments, the optimizer's state, a compiled graph's compilation), and how
many steps that takes depends on the stack — a fixed three left the sweep and a single run of the same
configuration 37 % apart on an H200. The rule is stated in every run (:data:`STEADY_RULE`).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from core.transformer.presets import get_preset

if TYPE_CHECKING:
    import torch

    from core.measure.step_timer import PhaseTimer
    from core.transformer.flops import StepFlops
    from core.transformer.planner import StepSetup
    from core.transformer.training import TrainStep

ROTATED_BATCHES = 4
STEADY_WINDOW = 3  # warm-up steps compared at a time
STEADY_TOLERANCE = 0.03  # a window's median within this of the previous window's: steady
STEADY_RULE = (
    f"warm-up steps timed in windows of {STEADY_WINDOW}; steady once a window's median step time is within "
    f"{STEADY_TOLERANCE:.0%} of the window before it (at least the warm-up steps asked for, at most the maximum)"
)


@dataclass
class Bench:
    """A model, its optimizer and step, and rotated random batches, ready to time."""

    step: TrainStep
    batches: list[tuple[torch.Tensor, torch.Tensor]]
    flops: StepFlops
    i: int = 0

    @classmethod
    def build(cls, setup: StepSetup, device: str, seed: int = 0) -> Bench:
        import torch

        from core.transformer.flops import count_step_flops
        from core.transformer.model import random_batch
        from core.transformer.training import build_step

        preset = get_preset(setup.model)
        torch.manual_seed(seed)
        step = build_step(setup, device)
        gen = torch.Generator(device=device).manual_seed(seed + 1)
        batches = [
            random_batch(setup.batch, setup.context, preset.vocab_size, device, gen) for _ in range(ROTATED_BATCHES)
        ]
        return cls(step, batches, count_step_flops(step.module, setup.batch, setup.context))

    def next_batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        self.i += 1
        return self.batches[self.i % len(self.batches)]

    def timed(self, timer: PhaseTimer, steps: int) -> list[dict[str, float]]:
        """``steps`` synchronised steps: milliseconds per phase and for the whole step, each."""
        return [timer.time_step(self.step, *self.next_batch()) for _ in range(steps)]


@dataclass
class WarmUp:
    """How a warm-up went: every warm-up step's time, and whether the rule found the time steady."""

    step_ms: list[float] = field(default_factory=list)
    steady: bool = False

    def to_dict(self) -> dict:
        return {"warmup_steps_run": len(self.step_ms), "steady": self.steady, "warmup_step_ms": self.step_ms}


def is_steady(step_ms: list[float]) -> bool:
    """Whether the last window's median is within the tolerance of the window before it."""
    if len(step_ms) < 2 * STEADY_WINDOW:
        return False
    last = statistics.median(step_ms[-STEADY_WINDOW:])
    before = statistics.median(step_ms[-2 * STEADY_WINDOW : -STEADY_WINDOW])
    return abs(last - before) <= STEADY_TOLERANCE * before


def warm_up(bench: Bench, timer: PhaseTimer, least: int, most: int) -> WarmUp:
    """Warm-up steps until :func:`is_steady` (at least ``least``, at most ``most``; none when ``most`` is 0)."""
    done = WarmUp()
    while len(done.step_ms) < most:
        done.step_ms.append(bench.timed(timer, 1)[0]["step"])
        if len(done.step_ms) >= least and is_steady(done.step_ms):
            done.steady = True
            break
    return done

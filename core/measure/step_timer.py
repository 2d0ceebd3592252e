"""Timing one training step phase by phase: a clock read at each phase boundary the step marks — CUDA
events on a GPU (one synchronize per step, like a loop that logs its loss), ``perf_counter`` on a CPU, whose
ops are synchronous."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

import torch


class MarkedStep(Protocol):
    """A step that calls ``mark(phase)`` at each phase boundary and ``mark("end")`` after the last
    (:class:`core.transformer.training.TrainStep`)."""

    def run(self, x: torch.Tensor, y: torch.Tensor, mark: Callable[[str], None]) -> object: ...


class PhaseTimer:
    """Reads a clock at each of TrainStep's phase marks: CUDA events on a GPU, perf_counter on a CPU."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.cuda = device.startswith("cuda")
        self._marks: list[tuple[str, torch.cuda.Event | float]] = []

    def mark(self, phase: str) -> None:
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record(torch.cuda.current_stream(self.device))
            self._marks.append((phase, event))
        else:
            self._marks.append((phase, time.perf_counter()))

    def _ms(self, a, b) -> float:
        return a.elapsed_time(b) if self.cuda else (b - a) * 1e3

    def time_step(self, step: MarkedStep, x: torch.Tensor, y: torch.Tensor) -> dict[str, float]:
        """One synchronised step: milliseconds per phase and for the whole step."""
        self._marks = []
        if self.cuda:
            torch.cuda.synchronize(self.device)  # start from an idle device, as a loop that reads its loss does
        step.run(x, y, self.mark)
        if self.cuda:
            end = self._marks[-1][1]
            assert isinstance(end, torch.cuda.Event)  # a CUDA timer marks with events
            end.synchronize()
        out = {phase: self._ms(a, b) for (phase, a), (_, b) in zip(self._marks, self._marks[1:])}
        out["step"] = self._ms(self._marks[0][1], self._marks[-1][1])
        return out


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)

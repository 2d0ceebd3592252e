"""Attributing ``torch.profiler`` events to the step benchmark's own ranges: which scope (a forward-only pass
or the full step) and which phase (forward, backward, optimizer …) each kernel (GPU) or each op's self CPU
time (CPU) belongs to. :class:`PhaseRanges` opens those ranges while a step runs; :func:`attribute` reads
them back from the profiler's events. The names are :data:`core.measure.kernels.ANNOTATION`-prefixed."""

from __future__ import annotations

import bisect

import torch

from core.measure.kernels import ANNOTATION, HOST_GAP_NAME


class Ranges:
    """Our record_function ranges (scopes and phases) as sorted intervals, to place an event in time."""

    def __init__(self, events, kind: str) -> None:
        prefix = f"{ANNOTATION}{kind}:"
        spans = sorted(
            (e.time_range.start, e.time_range.end, e.name[len(prefix) :])
            for e in events
            if e.name.startswith(prefix) and _is_cpu(e)
        )
        self.starts = [s[0] for s in spans]
        self.spans = spans

    def at(self, t: float) -> str | None:
        i = bisect.bisect_right(self.starts, t) - 1
        if i >= 0 and t <= self.spans[i][1]:
            return self.spans[i][2]
        return None

    def total_us(self, name: str) -> float:
        return sum(end - start for start, end, n in self.spans if n == name)


def _is_cpu(event) -> bool:
    return getattr(event.device_type, "name", str(event.device_type)) == "CPU"


def device_activity(events) -> list[tuple[float, float]]:
    """(start, end) in µs of every kernel, copy and memset the GPU ran, on the clock of the CPU events (the
    profiler puts both on one)."""
    return [
        (e.time_range.start, e.time_range.end)
        for e in events
        if getattr(e.device_type, "name", str(e.device_type)) == "CUDA"
    ]


def attribute(events, cuda: bool) -> list[tuple[str, str | None, str, float]]:
    """(scope, phase, name, µs) for every kernel (GPU) or every op's self CPU time (CPU) in our scopes.

    GPU: each kernel hangs on exactly one CPU op (the launch's correlation), so nothing is counted
    twice; it is placed by its launching op's start. CPU: self times partition a range's duration,
    so the groups add up to the profiled wall time; our own ranges' self time is the host time
    between ops.
    """
    scopes, phases = Ranges(events, "scope"), Ranges(events, "phase")
    items = []
    for e in events:
        if not _is_cpu(e):
            continue
        scope = scopes.at(e.time_range.start)
        if scope is None:
            continue
        phase = phases.at(e.time_range.start)
        if cuda:
            if not e.name.startswith(ANNOTATION):
                items.extend((scope, phase, k.name, float(k.duration)) for k in e.kernels)
        else:
            name = HOST_GAP_NAME if e.name.startswith(ANNOTATION) else e.name
            items.append((scope, phase, name, float(e.self_cpu_time_total)))
    return items


class PhaseRanges:
    """A ``mark`` callback that opens one record_function range per phase (visible in the trace)."""

    def __init__(self) -> None:
        self._open = None

    def __call__(self, phase: str) -> None:
        self.close()
        if phase != "end":
            self._open = torch.profiler.record_function(f"{ANNOTATION}phase:{phase}")
            self._open.__enter__()

    def close(self) -> None:
        if self._open is not None:
            self._open.__exit__(None, None, None)
            self._open = None

"""Two profiler traces side by side: what got slower, by kernel group, by CPU operator and by kernel.

Works on what an imported trace stores (its ``group`` and ``kernel`` rows, :mod:`core.workload.trace.timeline`), so a
file and a stored run compare alike. Groups are the lab's vendor-neutral kernel groups (a cuBLAS GEMM on
one side and a hipBLASLt ``Cijk_`` GEMM on the other are both *matmul*); kernels are matched by a
normalised name (call arguments dropped, every number folded to ``#``), so a kernel whose tile sizes or
unroll factors changed still meets itself while kernels of different templates stay apart; operators
(``aten::mm``) are matched by name, which is the same on any GPU, so two vendors' kernels meet through them.
A kernel outside one side's listed top kernels counts as absent there: the group rows are complete, the
kernel rows are as complete as the imports' lists.

GPU time alone can mislead: a diff also compares the whole trace (span, busy, idle, exposed communication: a
faster GPU half-idle is no win), the steps' medians, and says first where the two files are not alike (other
GPUs, world sizes or step counts), where matching kernels by name says little.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from core.rows.trace import HOST_CAUSES, Kernel, KernelGroup, TraceStep, TraceTables
from core.rows.trace_diff import (
    CauseChange,
    DiffTables,
    GroupChange,
    KernelChange,
    OpChange,
    StepChange,
    WholeChange,
)
from core.units import us_text
from core.workload.trace.gpu_name import named_gpu

_ARGS = re.compile(r"\([^()]*\)")
_NUMBER = re.compile(r"\d+")
_SPACE = re.compile(r"\s+")


def normalised(name: str) -> str:
    """A kernel name without its call arguments and with every number folded to ``#``."""
    previous = None
    while previous != name:  # nested (…) from the inside out
        previous, name = name, _ARGS.sub("", name)
    name = _NUMBER.sub("#", name.removeprefix("void "))
    return _SPACE.sub(" ", name).strip()


def _side(rows: Sequence[KernelGroup | Kernel], key: Callable[[Any], str]) -> dict[str, list]:
    """key → [count, µs, group] summed over the rows."""
    out: dict[str, list] = {}
    for r in rows:
        entry = out.setdefault(key(r), [0, 0.0, r.group])
        entry[0] += int(r.count or 0)
        entry[1] += float(r.total_us or 0.0)
    return out


def diff(base: TraceTables, new: TraceTables) -> tuple[list[GroupChange], list[KernelChange]]:
    """The group changes (every group either side has) and the kernel changes (matched by normalised name), each
    with ``base_us``, ``new_us``, ``delta_us`` (new − base), counts and ``delta_pct`` (of base; None from 0),
    the largest slow-down first."""
    by_group, by_name = (lambda r: str(r.group)), (lambda r: normalised(str(r.name)))
    groups = _changes(_side(base.groups, by_group), _side(new.groups, by_group), None)
    kernels = _changes(_side(base.kernels, by_name), _side(new.kernels, by_name), "kernel")
    return [GroupChange.of(r) for r in groups], [KernelChange.of(r) for r in kernels]


def _changes(base: dict[str, list], new: dict[str, list], kernel: str | None) -> list[dict]:
    """Each name either side has, base → new, the largest slow-down first; a kernel's named ``kernel`` with its
    group, a group's by itself (one neither side has left out)."""
    rows = []
    for name in sorted(set(base) | set(new)):
        b = base.get(name, [0, 0.0, None])
        n = new.get(name, [0, 0.0, None])
        if kernel is None and not (b[0] or n[0]):
            continue  # a group neither trace has
        row = {"group": n[2] or b[2], kernel: name} if kernel else {"group": name}
        rows.append(
            row
            | {
                "base_us": b[1],
                "new_us": n[1],
                "delta_us": n[1] - b[1],
                "base_count": b[0],
                "new_count": n[0],
                "delta_pct": 100.0 * (n[1] - b[1]) / b[1] if b[1] else None,
            }
        )
    return sorted(rows, key=lambda r: -r["delta_us"])


def operators(base_meta: dict, new_meta: dict) -> list[OpChange]:
    """Rows of kind ``op``: GPU time per CPU operator (``aten::mm``…: the import's ``op_totals``), base → new,
    with the operator's calls as the counts, the largest slow-down first. An operator's name is the same on
    any GPU, so this matches what kernel names cannot (cuBLAS against hipBLASLt, cuDNN against MIOpen); none
    when a side has no operator figures (an import of an older lab, or a trace without CPU operators)."""
    sides = [{str(r["op"]): r for r in m.get("op_totals") or []} for m in (base_meta, new_meta)]
    if not all(sides):
        return []
    rows = []
    for name in set(sides[0]) | set(sides[1]):
        b, n = (side.get(name, {}) for side in sides)
        rows.append(
            {"op": name}
            | _delta(float(b.get("gpu_time_us") or 0.0), float(n.get("gpu_time_us") or 0.0))
            | {"base_count": int(b.get("calls") or 0), "new_count": int(n.get("calls") or 0)}
        )
    return [OpChange.of(r) for r in sorted(rows, key=lambda r: (-r["delta_us"], r["op"]))]


def kernel_names_shared(kernels: Sequence[KernelChange]) -> tuple[float, float] | None:
    """Of each side's listed kernel time, the share in kernels the other side has too (matched by normalised
    name, :func:`diff`'s kernel changes); None when a side lists no kernel."""
    shared = [r for r in kernels if r.base_us and r.new_us]
    base_total, new_total = sum(r.base_us for r in kernels), sum(r.new_us for r in kernels)
    if not (base_total and new_total):
        return None
    return sum(r.base_us for r in shared) / base_total, sum(r.new_us for r in shared) / new_total


# the whole trace's figures a diff compares: (row name, the import's meta key(s), summed)
WHOLE = (
    ("span", ("span_us",)),
    ("GPU busy (union of activity)", ("busy_us",)),
    ("GPU idle", ("idle_us",)),
    ("kernel time", ("kernel_time_us",)),
    ("copies and memsets", ("memcpy_time_us", "memset_time_us")),
    ("exposed communication", ("exposed_communication_us",)),
)
# below this share of each side's listed kernel time in kernels both sides have, the kernel rows say little
KERNELS_SHARED = 0.5
# a step's figures, compared by their median over each side's steps
STEP = (
    ("step wall time (median)", "wall_us"),
    ("step GPU busy (median)", "busy_us"),
    ("step GPU idle (median)", "idle_us"),
    ("host before the first kernel (median)", "host_before_first_kernel_us"),
)
CAUSE_SHARE = 0.05  # a cause the headline names moved by at least this share of the base step's wall


def _delta(base: float, new: float) -> dict:
    return {
        "base_us": base,
        "new_us": new,
        "delta_us": new - base,
        "delta_pct": 100.0 * (new - base) / base if base else None,
    }


def _change(figure: str, base: float, new: float) -> dict:
    return {"figure": figure, **_delta(base, new)}


def whole(base_meta: dict, new_meta: dict) -> list[WholeChange]:
    """Each of :data:`WHOLE` both imports have, base → new."""
    rows = []
    for figure, keys in WHOLE:
        sides = [_summed(m, keys) for m in (base_meta, new_meta)]
        if sides[0] is not None and sides[1] is not None:
            rows.append(WholeChange.of(_change(figure, sides[0], sides[1])))
    return rows


def _summed(meta: dict, keys: tuple[str, ...]) -> float | None:
    values = [meta.get(k) for k in keys]
    numbers = [float(v) for v in values if isinstance(v, (int, float))]
    return sum(numbers) if len(numbers) == len(values) else None


def steps(base: Sequence[TraceStep], new: Sequence[TraceStep]) -> list[StepChange]:
    """The median over each side's profiled steps of :data:`STEP`'s figures (a field of each step), with the
    number of steps as the counts; none when a side has no step."""
    if not (base and new):
        return []
    out = []
    for figure, name in STEP:
        if name == "host_before_first_kernel_us" and any(r.host_before_first_kernel_us is None for r in (*base, *new)):
            continue  # GPU-side steps (or a run stored before) have no host time before their kernels
        medians = [statistics.median(float(getattr(r, name) or 0.0) for r in side) for side in (base, new)]
        counts = {"base_count": len(base), "new_count": len(new)}
        out.append(StepChange.of(_change(figure, *medians) | counts))
    return out


def causes(base: Sequence[TraceStep], new: Sequence[TraceStep]) -> list[CauseChange]:
    """For each of the host's causes (:data:`core.rows.trace.HOST_CAUSES`), the median over
    each side's steps of the device's idle inside the step that the host spent in it — the step as the host lived
    it (its ``wall_causes``; a side whose steps lack it, a run stored before or GPU-side steps, by the idle of its
    steps' GPU windows, ``window_causes``), with the number of steps as the counts; the largest change either
    way first, causes neither side has left out; none when a side has no step."""
    if not (base and new):
        return []
    out = []
    for cause in HOST_CAUSES:
        walls = [all(cause in r.wall_causes for r in side) for side in (base, new)]
        medians = [
            statistics.median(float((r.wall_causes if wall else r.window_causes).get(cause) or 0.0) for r in side)
            for wall, side in zip(walls, (base, new))
        ]
        if any(medians):
            counts = {"base_count": len(base), "new_count": len(new), "basis": "step" if walls[0] else "window"}
            out.append(_change(cause, *medians) | counts)
    return [CauseChange.of(r) for r in sorted(out, key=lambda r: -abs(r["delta_us"]))]


def headline(base: Sequence[TraceStep], new: Sequence[TraceStep], total: GpuTime, top: int = 2) -> str:
    """What changed, first: the median step's wall with the causes that moved most per step (each ≥
    :data:`CAUSE_SHARE` of the base step's wall), where both sides have steps; else the GPU time."""
    step = next((r for r in steps(base, new) if r.figure == STEP[0][0]), None)
    if step is None:
        pct = f" ({total.delta_pct:+.1f}%)" if total.delta_pct is not None else ""
        return f"GPU time (kernels, copies and memsets) {us_text(total.base_us)} → {us_text(total.new_us)}{pct}"
    pct = f" ({step.delta_pct:+.1f}%)" if step.delta_pct is not None else ""
    text = f"step wall (median) {us_text(step.base_us)} → {us_text(step.new_us)}{pct}"
    moved = [r for r in causes(base, new) if abs(r.delta_us) >= CAUSE_SHARE * step.base_us][:top]
    if moved:
        text += (
            "; per step, the host's "
            + ", ".join(f"{r.figure} {us_text(r.base_us)} → {us_text(r.new_us)}" for r in moved)
            + " (the GPU idle in it)"
        )
    return text


def mismatches(base_meta: dict, new_meta: dict, kernels: Sequence[KernelChange]) -> list[str]:
    """Where the two traces are not alike, in words: what a reader must know before trusting the deltas
    (``kernels``: their kernel changes, :func:`diff`); the windows compared first."""
    said = []
    counts = [m.get("steps", 0) for m in (base_meta, new_meta)]
    if counts[0] != counts[1]:
        said.append(
            f"the windows differ: {counts[0]:,} → {counts[1]:,} profiled steps, so totals (span, busy, idle, GPU "
            "time) differ by that alone; the step rows and the causes compare the median step"
        )
    elif not counts[0] and _unlike_spans(base_meta, new_meta):
        spans = " → ".join(us_text(float(m["span_us"])) for m in (base_meta, new_meta))
        said.append(
            f"neither trace marks its steps (no ProfilerStep) and their spans differ ({spans}): the totals compare "
            "two recorded windows, which may hold different numbers of iterations"
        )
    bases = [str(m.get("step_basis") or "").split(";")[0] for m in (base_meta, new_meta)]
    if all(counts) and bases[0] != bases[1]:
        said.append(f"the steps are not cut alike ({bases[0]} → {bases[1]}): their walls are not the same measure")
    gpus = [named_gpu(m) for m in (base_meta, new_meta)]
    if gpus[0] and gpus[1] and gpus[0] != gpus[1]:
        said.append(
            f"different GPUs ({gpus[0]} → {gpus[1]}): kernels of other vendors or architectures rarely share a "
            "name, so compare the groups and the operators, not the kernel rows"
        )
    shared = kernel_names_shared(kernels)
    if shared is not None and max(shared) < KERNELS_SHARED:
        said.append(
            f"few kernels share a name ({shared[0]:.0%} of the base's listed kernel time, {shared[1]:.0%} of the "
            "new's): other GPUs, libraries or versions; the operator rows match them through the CPU operator "
            "that launched them"
        )
    worlds = [m.get("world_size") for m in (base_meta, new_meta)]
    if worlds[0] != worlds[1] and None not in worlds:
        said.append(f"different world sizes ({worlds[0]} → {worlds[1]} ranks): communication time is not comparable")
    elif worlds[0] != worlds[1]:
        said.append(
            f"one trace records its world size, the other not ({_or_unknown(worlds[0])} → {_or_unknown(worlds[1])}): "
            "check both come from jobs of the same size before comparing communication"
        )
    return said


WINDOW_RATIO = 1.1  # spans further apart than this are windows that may hold other numbers of iterations


def _unlike_spans(base_meta: dict, new_meta: dict) -> bool:
    spans = [m.get("span_us") for m in (base_meta, new_meta)]
    known = [float(v) for v in spans if isinstance(v, (int, float)) and v > 0]
    return len(known) == 2 and max(known) > WINDOW_RATIO * min(known)


def _or_unknown(value: object) -> str:
    return "not recorded" if value is None else str(value)


@dataclass(frozen=True)
class GpuTime:
    """GPU time of each side (kernels, copies and memsets: the group changes' sum) and the change (``delta_pct``
    of the base; None from 0)."""

    base_us: float
    new_us: float
    delta_us: float
    delta_pct: float | None


def totals(groups: Sequence[GroupChange]) -> GpuTime:
    base, new = sum(r.base_us for r in groups), sum(r.new_us for r in groups)
    return GpuTime(base, new, new - base, 100 * (new - base) / base if base else None)


@dataclass(frozen=True)
class TraceDiff:
    """Two imports compared: the changes as named tables, the GPU time of each side, where the files are not alike
    and the headline."""

    tables: DiffTables
    total: GpuTime
    mismatches: list[str]
    headline: str


def compare(base: TraceTables, base_meta: dict, new: TraceTables, new_meta: dict) -> TraceDiff:
    """Everything ``trace-diff`` says of two imports (their stored tables and meta), derived once."""
    groups, kernels = diff(base, new)
    total = totals(groups)
    tables = DiffTables(
        whole=tuple(whole(base_meta, new_meta)),
        steps=tuple(steps(base.steps, new.steps)),
        causes=tuple(causes(base.steps, new.steps)),
        groups=tuple(groups),
        kernels=tuple(kernels),
        ops=tuple(operators(base_meta, new_meta)),
    )
    said = mismatches(base_meta, new_meta, kernels)
    return TraceDiff(tables, total, said, headline(base.steps, new.steps, total))

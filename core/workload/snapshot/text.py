"""What an imported memory snapshot says, as text: the one writer of it, for ``python -m core snapshot FILE`` and the
page alike (the page places the same stack in its expanders). Plotly-free, from the stored run's meta only."""

from __future__ import annotations

from core.rows.notes import RunNotes
from core.rows.snapshot import SnapshotSummary
from core.units import bytes_text, count_text
from core.workload.findings import finding_lines
from core.workload.snapshot.frames import python_and_cpp

STACK_FRAMES = 12  # the frames of the peak's stack the text lists
SITES = 10  # the allocation sites live at the peak the text lists


def devices_text(device: int, devices: list[int] | None) -> str:
    """Which device of the file the figures are: ``"device 0"``, ``"device 1 of 2 (0, 1)"`` (never a list)."""
    others = list(devices or [])
    if len(others) <= 1:
        return f"device {device}"
    return f"device {device} of {len(others)} ({', '.join(str(d) for d in others)})"


def peak_stack(s: SnapshotSummary) -> tuple[list[str], list[str]]:
    """The peak's stack as its Python frames and its C++ ones (the Python line that asked for the memory first)."""
    return python_and_cpp(list(s.peak_stack))


def snapshot_lines(meta: dict, stored: str) -> list[str]:
    """The whole report, after the example's line: the file, the findings, the peak and its stack, the reserve, what
    came before recording, the categories and the sites at the peak, the notes. ``stored``: where the run went."""
    s = SnapshotSummary.from_meta(meta)
    head = f"{s.file}: {s.source_format}, {bytes_text(s.file_bytes)} — {stored}"
    return (
        [head, *finding_lines(meta), *_peak_lines(s), *_held_lines(s)]
        + [f"note: {n}" for n in s.notes]
        + RunNotes.from_meta(meta).quirk_lines()
    )


def _peak_lines(s: SnapshotSummary) -> list[str]:
    unit = "ms" if s.has_times else "(event number)"
    actions = ", ".join(f"{k} {v:,}" for k, v in s.actions.items())
    event = s.peak_event
    out = [
        f"{devices_text(s.device, list(s.devices))}: {s.trace_events:,} events over {s.duration_ms:,.1f} {unit}"
        + (f" ({actions})" if actions else ""),
        f"peak allocated {bytes_text(s.peak_allocated_bytes)} at {s.peak_time_ms:,.2f} {unit}"
        + (f" — {event.action} of {bytes_text(event.size_bytes)}" if event else " (before the first event)"),
    ]
    if s.peak_site:
        out.append(f"  site: {s.peak_site}")
    python, cpp = peak_stack(s)
    out += [f"    {frame}" for frame in (python or cpp)[:STACK_FRAMES]]
    if python and cpp:
        out.append(f"    (and {count_text(len(cpp), 'C++ frame')}: --json lists them)")
    out.append(
        f"peak reserved {bytes_text(s.peak_reserved_bytes)}; reserved − allocated at the peak "
        f"{bytes_text(s.fragmentation_at_peak_bytes)} (largest {bytes_text(s.peak_fragmentation_bytes)} at "
        f"{s.peak_fragmentation_time_ms:,.2f} {unit})"
    )
    return out


def _held_lines(s: SnapshotSummary) -> list[str]:
    cats = ", ".join(f"{k} {bytes_text(v)}" for k, v in s.categories_at_peak_bytes.items() if v)
    out = [
        f"allocated before recording began: {bytes_text(s.baseline_allocated_bytes)} in "
        f"{s.baseline_allocated_blocks:,} block(s) (baseline); reserved then {bytes_text(s.baseline_reserved_bytes)}",
        f"categories at the peak (inferred from stacks, see rules): {cats or 'none'}",
    ]
    out += [
        f"    rule {r.rule:<20} → {r.category:<16} {r.allocations:>9,} allocations  ({r.means})"
        for r in s.category_rules
        if r.allocations
    ]
    out.append("top allocation sites live at the peak:")
    out += [
        f"  {bytes_text(t.bytes):>12}  {t.blocks:>6,} block(s)  {t.label}  [{t.category}: {t.rule}]"
        for t in s.top_sites_at_peak[:SITES]
    ]
    return out

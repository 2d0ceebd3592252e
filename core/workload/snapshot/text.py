"""What an imported memory snapshot says, as text: the one writer of it, for ``python -m core snapshot FILE`` and the
page alike (the page places the same stack in its expanders). Plotly-free, from the stored run's meta only."""

from __future__ import annotations

from core.text import quirk_lines
from core.units import bytes_text, count_text
from core.workload.findings import finding_lines
from core.workload.snapshot.analysis import devices_text, python_and_cpp

STACK_FRAMES = 12  # the frames of the peak's stack the text lists
SITES = 10  # the allocation sites live at the peak the text lists


def peak_stack(meta: dict) -> tuple[list[str], list[str]]:
    """The peak's stack as its Python frames and its C++ ones (the Python line that asked for the memory first)."""
    return python_and_cpp(meta["peak_stack"])


def snapshot_lines(meta: dict, stored: str) -> list[str]:
    """The whole report, after the example's line: the file, the findings, the peak and its stack, the reserve, what
    came before recording, the categories and the sites at the peak, the notes. ``stored``: where the run went."""
    m = meta
    head = f"{m['file']}: {m['source']['format']}, {bytes_text(m['file_bytes'])} — {stored}"
    return (
        [head, *finding_lines(m), *_peak_lines(m), *_held_lines(m)]
        + [f"note: {n}" for n in m["notes"]]
        + quirk_lines(m)
    )


def _peak_lines(m: dict) -> list[str]:
    unit = "ms" if m["has_times"] else "(event number)"
    actions = ", ".join(f"{k} {v:,}" for k, v in m["actions"].items())
    event = m["peak_event"]
    out = [
        f"{devices_text(m['device'], m['devices'])}: {m['trace_events']:,} events over {m['duration_ms']:,.1f} {unit}"
        + (f" ({actions})" if actions else ""),
        f"peak allocated {bytes_text(m['peak_allocated_bytes'])} at {m['peak_time_ms']:,.2f} {unit}"
        + (f" — {event['action']} of {bytes_text(event['size_bytes'])}" if event else " (before the first event)"),
    ]
    if m.get("peak_site"):
        out.append(f"  site: {m['peak_site']}")
    python, cpp = peak_stack(m)
    out += [f"    {frame}" for frame in (python or cpp)[:STACK_FRAMES]]
    if python and cpp:
        out.append(f"    (and {count_text(len(cpp), 'C++ frame')}: --json lists them)")
    out.append(
        f"peak reserved {bytes_text(m['peak_reserved_bytes'])}; reserved − allocated at the peak "
        f"{bytes_text(m['fragmentation_at_peak_bytes'])} (largest {bytes_text(m['peak_fragmentation_bytes'])} at "
        f"{m['peak_fragmentation_time_ms']:,.2f} {unit})"
    )
    return out


def _held_lines(m: dict) -> list[str]:
    cats = ", ".join(f"{k} {bytes_text(v)}" for k, v in m["categories_at_peak_bytes"].items() if v)
    out = [
        f"allocated before recording began: {bytes_text(m['baseline_allocated_bytes'])} in "
        f"{m['baseline_allocated_blocks']:,} block(s) (baseline); reserved then {bytes_text(m['baseline_reserved_bytes'])}",
        f"categories at the peak (inferred from stacks, see rules): {cats or 'none'}",
    ]
    out += [
        f"    rule {r['rule']:<20} → {r['category']:<16} {r['allocations']:>9,} allocations  ({r['means']})"
        for r in m["category_rules"]
        if r["allocations"]
    ]
    out.append("top allocation sites live at the peak:")
    out += [
        f"  {bytes_text(s['bytes']):>12}  {s['blocks']:>6,} block(s)  {s['label']}  [{s['category']}: {s['rule']}]"
        for s in m["top_sites_at_peak"][:SITES]
    ]
    return out

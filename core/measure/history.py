"""How the lab records the CUDA caching allocator's history: events only, in a bounded ring buffer.

``torch.cuda.memory._record_memory_history()`` defaults to ``context="all", stacks="all"``: a C++
stack unwind on every allocation and free, symbolised when the snapshot is taken (a public report
measured one dump at 461 s with ``stacks="all"`` against 4 s with ``"python"``), and
``max_entries=sys.maxsize``. The lab reads only action, address, size and time from the trace, so it
records no tracebacks at all (``context=None``; ``stacks="python"`` in case a caller turns context on)
and bounds the buffer. When the buffer fills, the oldest events are overwritten: :func:`overflowed`
says so, and the caller must not pretend the trace is complete.
"""

from __future__ import annotations


def options(max_entries: int) -> dict:
    """Keyword arguments for ``_record_memory_history``: every action, no stack traces, bounded."""
    return {"enabled": "all", "context": None, "stacks": "python", "max_entries": int(max_entries)}


def start(torch, max_entries: int) -> None:
    torch.cuda.memory._record_memory_history(**options(max_entries))


def stop(torch) -> None:
    torch.cuda.memory._record_memory_history(enabled=None)


def overflowed(entries: list, max_entries: int) -> bool:
    """A trace as long as the ring buffer may have lost its oldest events."""
    return len(entries) >= max_entries

"""What to try for each cause a trace names, in one line, and only what the trace itself supports.

A finding names a cause with its time; the line here says what usually removes it. Each line is tied to the
evidence that selects it — the cause of the host's time (:data:`core.workload.trace.host_gaps.CAUSES`), and where the
cause alone does not tell, a fact of the trace passed in (the allocator's calls recurring in every step, a
blocking call that held the GPU idle longer than any recorded work explains) — so a finding never carries advice
its figures do not back. None means the trace says too little: the finding then states the fact alone.
"""

from __future__ import annotations

# the host's causes (host_gaps.CAUSES), when the GPU waits for the host inside or between the steps
_GAP = {
    "data loading": "more DataLoader workers (num_workers) and pin_memory=True, so the next batch is ready when the "
    "GPU needs it",
    "optimizer": "a fused or foreach optimizer (fused=True / foreach=True): fewer, larger kernels and less Python",
}
# before each step's first kernel: the host prepares the step while the GPU has nothing to run
_BEFORE = {
    "data loading": _GAP["data loading"],
    "other CPU work": "prepare the next inputs while the GPU runs the current step (DataLoader workers, "
    "num_workers > 0, or a background thread), or move the preprocessing onto the GPU",
    "no CPU event": "prepare the next inputs while the GPU runs the current step (DataLoader workers, "
    "num_workers > 0, or a background thread)",
    "optimizer": _GAP["optimizer"],
}
ALLOCATOR_EVERY_STEP = (
    "cudaMalloc/cudaFree (hipMalloc/hipFree) in every step: the caching allocator is off "
    "(PYTORCH_NO_CUDA_MEMORY_CACHING) or emptied each step (torch.cuda.empty_cache()); leave it on"
)
ALLOCATOR_SET_UP = "allocations of the first iteration (set-up): profile later steps to see the steady state"
OUTSIDE_WINDOW = (
    "the call blocked while no recorded GPU work ran: it waits for work outside the recorded window (another "
    "stream, process or a kernel launched before recording) — record a longer window, or find what else the GPU ran"
)


def for_gap(cause: str, *, allocator_every_step: bool | None = None, waits_outside: bool = False) -> str | None:
    """What to try where the GPU idles waiting for the host in ``cause``; the allocator's line needs to know whether
    its calls recur in every step (None: the trace cannot tell, no line); a blocking call that held the GPU idle
    with nothing recorded to wait for (``waits_outside``) says so."""
    if cause == "allocator" and allocator_every_step is not None:
        return ALLOCATOR_EVERY_STEP if allocator_every_step else ALLOCATOR_SET_UP
    if cause in ("synchronisation", "device→host copy") and waits_outside:
        return OUTSIDE_WINDOW
    return _GAP.get(cause)


def before_first_kernel(cause: str, *, in_python: bool) -> str | None:
    """What to try where the host works before each step's first kernel in ``cause``; for other CPU work only where
    the host was in the program's Python (``in_python``: its preprocessing), not in an operator of its own."""
    if cause == "other CPU work" and not in_python:
        return None
    return _BEFORE.get(cause)

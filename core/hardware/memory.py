"""How much memory a run may take on its device, and the cap a CPU job runs under.

On a GPU an allocation past the free memory raises ``torch.cuda.OutOfMemoryError``: the run ends as a
clean error. On a CPU nothing raises — the kernel's out-of-memory killer ends *a* process (the
worker, the dashboard, a neighbour). So every experiment that allocates compares its need with
:func:`budget` before allocating (``Context.check_fits``), and a CPU job runs under an address-space
limit (:func:`capped`) so that a wrong estimate still ends as a clean out-of-memory error.

Why only CPU jobs are capped: ``RLIMIT_AS`` limits *virtual* address space, and creating a CUDA
context reserves tens of GiB to TiB of it (the unified address space, driver mappings) without using
memory; under any cap a GPU job would fail at ``torch.cuda.init``. A worker learns its device from
each request, and one worker serves a device's jobs in turn, so the limit is set for each CPU job
and lifted after it; a GPU job never runs under it.
"""

from __future__ import annotations

import os
import resource
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from core.units import MIB, bytes_text

MEMORY_LIMIT_ENV = "GPULAB_WORKER_MEMORY_LIMIT_BYTES"  # explicit cap for CPU jobs; 0 turns the cap off
MEMORY_FRACTION_ENV = "GPULAB_WORKER_MEMORY_FRACTION"  # share of available RAM a CPU job may map; 0: off
DEFAULT_FRACTION = 0.8
HOST_RESERVE_BYTES = 512 * MIB  # what a CPU run leaves free: past it the OS kills, it does not raise


@dataclass(frozen=True)
class Budget:
    """The bytes a run may still allocate on a device, and where that number comes from (for messages)."""

    bytes: int
    source: str


def available_ram() -> int | None:
    """The RAM the box has available (MemAvailable), or None where it cannot be read."""
    from core.hardware.device import _meminfo

    return _meminfo()[1]


def address_space_bytes() -> int | None:
    """This process's mapped address space (what RLIMIT_AS counts), or None off Linux."""
    try:
        with open("/proc/self/statm", encoding="ascii") as fh:
            return int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def cpu_cap(mapped_bytes: int, available_bytes: int | None) -> int | None:
    """The RLIMIT_AS for one CPU job, or None when the cap is off.

    ``GPULAB_WORKER_MEMORY_LIMIT_BYTES=N`` sets it to N (0: off); otherwise the job may map
    ``GPULAB_WORKER_MEMORY_FRACTION`` (default 0.8; 0: off) of the RAM available when it starts, on
    top of what the worker maps already (Python, torch, their libraries).
    """
    explicit = os.environ.get(MEMORY_LIMIT_ENV, "").strip()
    if explicit:
        if not explicit.isdigit():
            raise ValueError(f"{MEMORY_LIMIT_ENV} must be a whole number of bytes (0: no cap), got {explicit!r}")
        return int(explicit) or None
    text = os.environ.get(MEMORY_FRACTION_ENV, "").strip()
    try:
        fraction = float(text) if text else DEFAULT_FRACTION
    except ValueError:
        fraction = -1.0
    if not 0 <= fraction <= 1:
        raise ValueError(f"{MEMORY_FRACTION_ENV} must be a number from 0 to 1 (0: no cap), got {text!r}")
    if fraction == 0 or available_bytes is None:
        return None
    return mapped_bytes + int(fraction * available_bytes)


@contextmanager
def capped(torch_device: str) -> Iterator[int | None]:
    """Run a CPU job under its address-space cap (yields it, or None); the previous limit comes back after.

    GPU jobs are never capped (see the module's docstring). Only the soft limit is lowered, so it can
    be raised again for the worker's next job.
    """
    mapped = address_space_bytes()
    if torch_device != "cpu" or mapped is None:
        yield None
        return
    cap = cpu_cap(mapped, available_ram())
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if cap is None:
        yield None
        return
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield cap
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def budget(torch_device: str) -> Budget:
    """What a run may still allocate on ``torch_device``: GPU free memory (plus this process's cached,
    unused blocks), or the CPU's available RAM less a reserve, within the job's cap."""
    if torch_device.startswith("cuda"):
        import torch

        free, _ = torch.cuda.mem_get_info(torch_device)
        cached = torch.cuda.memory_reserved(torch_device) - torch.cuda.memory_allocated(torch_device)
        return Budget(
            free + cached, f"only {bytes_text(free + cached)} is free on {torch_device} (torch.cuda.mem_get_info)"
        )
    available = available_ram()
    limits = []
    if available is not None:
        limits.append(
            (
                available - HOST_RESERVE_BYTES,
                f"only {bytes_text(max(0, available - HOST_RESERVE_BYTES))} of RAM is available (MemAvailable "
                f"{bytes_text(available)}, less {bytes_text(HOST_RESERVE_BYTES)} kept free)",
            )
        )
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    mapped = address_space_bytes()
    if soft != resource.RLIM_INFINITY and mapped is not None:
        limits.append(
            (
                soft - mapped,
                f"only {bytes_text(max(0, soft - mapped))} more fits under the job's memory cap "
                f"({MEMORY_FRACTION_ENV}, {MEMORY_LIMIT_ENV})",
            )
        )
    if not limits:
        return Budget(2**63, "no memory limit is known on this system")
    room, source = min(limits)
    return Budget(max(0, room), source)


# Allocation failures that do not surface as torch.cuda.OutOfMemoryError near the memory limit: the
# library's own status in the message says which allocation it was.
ALLOCATION_FAILURES = (
    ("cublas_status_alloc_failed", "cuBLAS could not allocate its handle or workspace (CUBLAS_STATUS_ALLOC_FAILED)"),
    ("cudnn_status_alloc_failed", "cuDNN could not allocate (CUDNN_STATUS_ALLOC_FAILED)"),
    ("cusolver_status_alloc_failed", "cuSOLVER could not allocate (CUSOLVER_STATUS_ALLOC_FAILED)"),
    ("cufft_alloc_failed", "cuFFT could not allocate (CUFFT_ALLOC_FAILED)"),
    ("cudaerrormemoryallocation", "a CUDA runtime allocation failed (cudaErrorMemoryAllocation)"),
    ("out of memory", "out of memory"),
    ("can't allocate memory", "host memory (the OS refused the allocation)"),
    ("failed to allocate", "an allocation failed"),
)


def allocation_failure(exc: BaseException | str) -> str | None:
    """Which allocation failed, in words, if ``exc`` (or an error text) is one; None for other errors."""
    if not isinstance(exc, str):
        import torch

        if isinstance(exc, torch.cuda.OutOfMemoryError):
            return "torch.cuda.OutOfMemoryError (the caching allocator could not get a block)"
        if isinstance(exc, MemoryError):
            return "MemoryError (host memory)"
        if not isinstance(exc, RuntimeError):
            return None
    text = str(exc).lower()
    return next((kind for marker, kind in ALLOCATION_FAILURES if marker in text), None)

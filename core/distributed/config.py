"""The interconnect job's options: one config for the ``interconnect`` experiment (host copies, the peer
matrix, collectives) and for the rank program every rank of its collectives runs (:mod:`core.distributed.rank`),
which measures the collectives part. Validated where it is made: sizes, ranks, timings, and whether Gloo ranks
on one box fit in its RAM."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from core.distributed.collectives import (
    COLLECTIVES,
    CPU_SIZES,
    GPU_SIZES,
    MAX_BYTES,
    PROCESS_OVERHEAD_BYTES,
    buffer_bytes,
    host_bytes_needed,
)
from core.errors import ConfigError
from core.experiment import check_choices
from core.units import bytes_text, exact_size_text, parse_size

if TYPE_CHECKING:
    from core.measure.timing import TimingPlan

PARTS = ("copy", "peer", "collectives")
Backend = Literal["auto", "nccl", "gloo"]
MAX_WORLD = 64


@dataclass(frozen=True)
class InterconnectConfig:
    parts: tuple[str, ...] = field(
        default=PARTS, metadata={"help": "what to measure: copy (host↔GPU), peer (GPU×GPU matrix), collectives"}
    )
    backend: Backend = field(
        default="auto",
        metadata={
            "help": "collectives between GPUs (nccl) or CPU processes (gloo); auto: NCCL when the job runs on a GPU"
        },
    )
    world_size: int = field(
        default=0,
        metadata={"help": "ranks on this box: 0 = one per GPU for NCCL, 2 for Gloo (torchrun by hand sets its own)"},
    )
    collectives: tuple[str, ...] = field(default=COLLECTIVES, metadata={"help": "collectives to time"})
    sizes: tuple[str, ...] = field(
        default=(),
        metadata={
            "help": "message sizes (bytes, KiB, MiB, GiB), e.g. 1KiB,1MiB,1GiB; empty = GPU 1 KiB…1 GiB, "
            "CPU 1 KiB…16 MiB, ×4 steps"
        },
    )
    copy_sizes: tuple[str, ...] = field(default=("1MiB", "64MiB", "256MiB"), metadata={"help": "host↔GPU copy sizes"})
    peer_size: str = field(default="256MiB", metadata={"help": "bytes per GPU→GPU copy of the peer matrix"})
    warmup_ms: float = field(default=20.0, metadata={"help": "time-based warm-up per point"})
    rep_ms: float = field(default=100.0, metadata={"help": "timed calls per point fill about this long"})
    min_reps: int = field(default=10, metadata={"help": "timed calls per point, at least"})
    max_reps: int = field(default=200, metadata={"help": "timed calls per point, at most"})
    timeout_s: float = field(
        default=120.0, metadata={"help": "a collective that waits longer for a rank ends the job, naming that rank"}
    )
    seed: int = field(default=0, metadata={"help": "random seed of the inputs"})

    def __post_init__(self) -> None:
        check_choices("parts", self.parts, PARTS)
        check_choices("collectives", self.collectives, COLLECTIVES)
        for name in ("sizes", "copy_sizes"):
            for text in getattr(self, name):
                _size(name, text)
        _size("peer_size", self.peer_size)
        if not 0 <= self.world_size <= MAX_WORLD:
            raise ConfigError(f"world_size must be 0 (automatic) or 1…{MAX_WORLD}, got {self.world_size}")
        if not 0 <= self.warmup_ms <= 60_000 or not 0 < self.rep_ms <= 600_000:
            raise ConfigError("warmup_ms must be 0…60000 and rep_ms 0…600000 (exclusive of 0)")
        if not 1 <= self.min_reps <= self.max_reps <= 100_000:
            raise ConfigError("need 1 ≤ min_reps ≤ max_reps ≤ 100000")
        if not 1 <= self.timeout_s <= 3600:
            raise ConfigError(f"timeout_s must be 1…3600, got {self.timeout_s:g}")
        if self.backend == "gloo" and "collectives" in self.parts:
            check_host_memory(self, self.world_size or 2)

    @property
    def plan(self) -> TimingPlan:
        from core.measure.timing import TimingPlan

        return TimingPlan(self.warmup_ms, self.rep_ms, self.min_reps, self.max_reps)


def _size(name: str, text: str) -> int:
    try:
        nbytes = parse_size(text)
    except ValueError as exc:
        raise ConfigError(f"{name}: {exc}") from None
    if not 4 <= nbytes <= MAX_BYTES:
        raise ConfigError(f"{name}: {text} is outside 4 B…{exact_size_text(MAX_BYTES)}")
    return nbytes


def sizes_for(cfg: InterconnectConfig, is_cuda: bool) -> tuple[int, ...]:
    """Message sizes in bytes, the device's defaults where the config gives none."""
    return tuple(parse_size(s) for s in cfg.sizes) or (GPU_SIZES if is_cuda else CPU_SIZES)


def check_host_memory(cfg: InterconnectConfig, world: int) -> None:
    """Gloo ranks on one box share its RAM: refuse sizes whose buffers × world size do not fit."""
    from core.hardware.memory import available_ram

    largest = max(sizes_for(cfg, False))
    per_rank = max(buffer_bytes(c, largest, world) for c in cfg.collectives)
    need = host_bytes_needed(per_rank, world)
    available = available_ram()
    if available and need > 0.8 * available:
        raise ConfigError(
            f"sizes: {exact_size_text(largest)} with {world} Gloo ranks needs {bytes_text(need)} of host memory "
            f"({bytes_text(per_rank)} of buffers per rank — the message, the result and a check copy — plus "
            f"{exact_size_text(PROCESS_OVERHEAD_BYTES)} per process); {bytes_text(available)} is available: "
            f"choose smaller sizes or fewer ranks"
        )

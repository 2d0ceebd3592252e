"""What a health check runs (its parts, soak, device, timeouts): read by the command line to build its options
without loading the check itself."""

from __future__ import annotations

from dataclasses import dataclass

from core.errors import ConfigError
from core.experiment import check_choices

PARTS = ("doctor", "soak", "search", "copies", "collectives")
QUICK_SOAK_S = 10.0
QUICK_SEARCH_S = 10.0


@dataclass(frozen=True)
class HealthConfig:
    """What the health check runs; the defaults are the full check, ``quick`` a short one."""

    device: str = "auto"  # auto: every GPU (else the CPU); all: every GPU; cpu; cuda or cuda:N (that GPU)
    parts: tuple[str, ...] = PARTS
    soak_s: float = 60.0  # seconds of sustained matmul per GPU (the soak's burst is its first seconds)
    search_s: float = 30.0  # the bounded shape search's budget per GPU: what a published maximum is judged against
    dtype: str = "auto"  # the soak's dtype: bf16 on a GPU, fp32 on the CPU
    quick: bool = False  # a short soak and small copies: minutes → seconds
    timeout_s: float = 900.0  # per job

    def __post_init__(self) -> None:
        check_choices("parts", self.parts, PARTS)
        if not 2 <= self.soak_s <= 1800:  # the soak's own range: two samples at least, within a job's hour
            raise ConfigError(f"soak_s must be 2…1800 seconds, got {self.soak_s:g}")
        if not 1 <= self.search_s <= 600:
            raise ConfigError(f"search_s must be 1…600 seconds, got {self.search_s:g}")
        if not 0 < self.timeout_s <= 24 * 3600:
            raise ConfigError(f"timeout_s must be positive and at most a day, got {self.timeout_s:g}")

    @property
    def soak_seconds(self) -> float:
        return min(self.soak_s, QUICK_SOAK_S) if self.quick else self.soak_s

    @property
    def search_seconds(self) -> float:
        return min(self.search_s, QUICK_SEARCH_S) if self.quick else self.search_s

    def search(self, dtype: str) -> dict:
        """The search job's settings: the soak's dtype, its budget, no roofline or fp64 check (the figure is the
        throughput alone)."""
        return {"dtypes": [dtype], "mamf": True, "budget_s": self.search_seconds, "roofline": False, "accuracy": False}

    def soak_dtype(self, cuda: bool) -> str:
        return self.dtype if self.dtype != "auto" else "bf16" if cuda else "fp32"

    def interconnect(self, gpus: int) -> dict:
        """The interconnect job's settings: the copies at one large size, all_reduce at the largest messages."""
        parts = ["copy"] if "copies" in self.parts else []
        if "copies" in self.parts and gpus > 1:
            parts.append("peer")
        if "collectives" in self.parts and gpus != 1:  # one GPU has nobody to reduce with
            parts.append("collectives")
        if gpus:
            sizes, copy = (["64MiB"], ["64MiB"]) if self.quick else (["256MiB", "1GiB"], ["256MiB"])
            extra: dict = {"backend": "nccl", "peer_size": copy[0]}
        else:
            sizes, copy = (["1MiB"], ["1MiB"]) if self.quick else (["4MiB"], ["1MiB"])
            extra = {"backend": "gloo", "world_size": 2}
        return {
            "parts": parts,
            "collectives": ["all_reduce"],
            "sizes": sizes,
            "copy_sizes": copy,
            "rep_ms": 30.0 if self.quick else 100.0,
        } | extra

"""A run on every GPU of the box, compared across its GPUs: each GPU against the node median
(:class:`NodeDevice`), the comparison (:class:`NodeComparison`) and whether the GPUs ran at once.

The fan-out (``core.fanout.compare``) builds them and stores ``to_dict()`` in the run's meta (``node``,
``concurrency``) under the keys and in the order runs have always had; the node chart and the page's verdict read
the fields. Torch-free.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from core.result import RunResult
from core.rows.stored import known


@dataclass(frozen=True)
class NodeDevice:
    """One GPU of the node: its median ratio to the node median over the points it measured, whether that is
    more than the threshold below, and what NVML recorded of its clocks over those points (or why nothing)."""

    device: str
    gpu_index: int | None = None
    gpu_name: str | None = None
    relative: float | None = None  # the median of its value / the node median, point by point
    points: int = 0
    flagged: bool = False
    sm_clock_mhz: float | None = None  # the mean of its points' SM clocks; None: no samples (clocks_note says why)
    sm_clock_min_mhz: float | None = None
    temp_c: float | None = None
    power_w: float | None = None
    throttle_reasons: tuple[str, ...] | None = None
    throttled: bool | None = None
    clocks_note: str | None = None

    @property
    def sampled(self) -> bool:
        clock = self.sm_clock_mhz
        return isinstance(clock, int | float) and clock == clock  # a NaN read from a frame is no sample

    def to_dict(self) -> dict:
        head = {k: getattr(self, k) for k in ("device", "gpu_index", "gpu_name", "relative", "points", "flagged")}
        if not self.sampled:
            return head | {"sm_clock_mhz": self.sm_clock_mhz, "clocks_note": self.clocks_note}
        clocks = ("sm_clock_mhz", "sm_clock_min_mhz", "temp_c", "power_w")
        return (
            head
            | {k: getattr(self, k) for k in clocks}
            | {
                "throttle_reasons": list(self.throttle_reasons or ()),
                "throttled": self.throttled,
            }
        )

    @classmethod
    def from_dict(cls, stored: Mapping[str, Any]) -> NodeDevice:
        reasons = stored.get("throttle_reasons")
        return cls(
            **known(
                cls,
                stored,
                device=str(stored.get("device") or "?"),
                throttle_reasons=tuple(reasons) if isinstance(reasons, list) else None,
            )
        )


@dataclass(frozen=True)
class NodeComparison:
    """Every GPU against the node median of one metric (``metric``: the rows' column; ``label``: in words),
    point by point over ``keys``; ``flagged``: the GPUs more than ``threshold`` below it."""

    metric: str = ""
    label: str = ""
    keys: tuple[str, ...] = ()
    threshold: float = 0.0
    per_device: tuple[NodeDevice, ...] = ()
    flagged: tuple[str, ...] = ()
    points: int = 0

    @property
    def named(self) -> str:
        return self.label or self.metric

    def to_dict(self) -> dict:
        return asdict(self) | {
            "keys": list(self.keys),
            "per_device": [d.to_dict() for d in self.per_device],
            "flagged": list(self.flagged),
        }

    @classmethod
    def from_run(cls, run: RunResult) -> NodeComparison | None:
        """The comparison of an all-GPU run; None for a run on one device."""
        node = run.meta.get("node")
        if not isinstance(node, Mapping):
            return None
        devices = node.get("per_device") or ()
        return cls(
            **known(
                cls,
                node,
                keys=tuple(node.get("keys") or ()),
                per_device=tuple(NodeDevice.from_dict(d) for d in devices if isinstance(d, Mapping)),
                flagged=tuple(node.get("flagged") or ()),
            )
        )


def concurrency_note(run: RunResult) -> str | None:
    """Why the GPUs' numbers are not under a full-node load (they did not all run at once), where they are not."""
    said = run.meta.get("concurrency")
    return str(said.get("note") or "") or None if isinstance(said, Mapping) else None

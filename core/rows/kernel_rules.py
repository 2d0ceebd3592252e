"""What each kernel-group rule matched in an imported trace (the meta's ``rules``), and the gap below which a kernel
waiting on the one before it is launch overhead. The trace engine writes both and the views read them
(:class:`core.rows.trace_summary.TraceSummary`); kept apart from the summary so that an import's worker defines these
and not the summary's classes, which only the views read. Torch-free."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

KERNEL_WAIT_US = 30.0  # HTA's consecutive_kernel_delay default (30; its trace times are µs): shorter is launch overhead


@dataclass(frozen=True)
class RuleCount:
    """What one kernel-group rule matched."""

    rule: str
    group: str
    count: int = 0
    us: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """As the meta's ``rules`` store it, keys in their stored order."""
        return {"rule": self.rule, "group": self.group, "count": self.count, "us": self.us}

"""What ``trace-diff`` compares, as named tables (:class:`DiffTables`): whole-trace figures, steps, the host's causes,
kernel groups, kernels and operators, each a figure base → new. The rows' machinery is :mod:`core.rows.trace`'s.
Torch-free."""

from __future__ import annotations

from dataclasses import dataclass

from core.rows.trace import StoredRow, Tables


@dataclass(frozen=True, kw_only=True)
class Change(StoredRow):
    """A figure base → new (µs); ``delta_pct`` of base, None from 0; counts where the kind has them."""

    figure: str = ""
    base_us: float = 0.0
    new_us: float = 0.0
    delta_us: float = 0.0
    delta_pct: float | None = None
    base_count: int = 0
    new_count: int = 0


@dataclass(frozen=True, kw_only=True)
class WholeChange(Change):
    KIND = "whole"


@dataclass(frozen=True, kw_only=True)
class StepChange(Change):
    KIND = "step"


@dataclass(frozen=True, kw_only=True)
class CauseChange(Change):
    KIND = "cause"


@dataclass(frozen=True, kw_only=True)
class GroupChange(Change):
    KIND = "group"
    group: str = ""


@dataclass(frozen=True, kw_only=True)
class KernelChange(Change):
    KIND = "kernel"
    group: str | None = None
    kernel: str = ""


@dataclass(frozen=True, kw_only=True)
class OpChange(Change):
    KIND = "op"
    op: str = ""


@dataclass(frozen=True)
class DiffTables(Tables):
    """What ``trace-diff`` compares, in the order its ``--json`` lists the rows."""

    TABLES = {
        "whole": WholeChange,
        "steps": StepChange,
        "causes": CauseChange,
        "groups": GroupChange,
        "kernels": KernelChange,
        "ops": OpChange,
    }

    whole: tuple[WholeChange, ...] = ()
    steps: tuple[StepChange, ...] = ()
    causes: tuple[CauseChange, ...] = ()
    groups: tuple[GroupChange, ...] = ()
    kernels: tuple[KernelChange, ...] = ()
    ops: tuple[OpChange, ...] = ()

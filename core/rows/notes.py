"""What any run's meta may say beside its rows, read the one way every view reads it: figures the engine judged
impossible (``measurement_errors``), why the run could not be stored (``store_error``), the row columns that
count bytes (``byte_columns``: shown with a byte unit), what a reader found odd in an imported file, by kind
(``quirks``), the runs a doctor made (``run_ids``) and what a runs file added (``added``, ``already_present``).
Torch-free."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from core.result import RunResult


@dataclass(frozen=True)
class RunNotes:
    measurement_errors: tuple[str, ...] = ()
    store_error: str | None = None
    byte_columns: frozenset[str] = frozenset()
    quirks: Mapping[str, int] = field(default_factory=dict)  # why → how many times
    run_ids: tuple[str, ...] = ()
    added: int = 0
    already_present: int = 0

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any]) -> RunNotes:
        quirks = meta.get("quirks")
        store_error = meta.get("store_error")
        return cls(
            measurement_errors=tuple(str(e) for e in _list(meta.get("measurement_errors"))),
            store_error=str(store_error) if store_error else None,
            byte_columns=frozenset(str(c) for c in _list(meta.get("byte_columns"))),
            quirks={str(k): v for k, v in quirks.items()} if isinstance(quirks, Mapping) else {},
            run_ids=tuple(str(i) for i in _list(meta.get("run_ids"))),
            added=_count(meta.get("added")),
            already_present=_count(meta.get("already_present")),
        )

    @classmethod
    def from_run(cls, run: RunResult) -> RunNotes:
        return cls.from_meta(run.meta)

    def quirk_lines(self) -> list[str]:
        """What a reader found odd in a file, one line each, as the text reports end."""
        return [f"quirk: {count:,} × {why}" for why, count in self.quirks.items()]


def _list(value: object) -> list:
    return list(value) if isinstance(value, list | tuple) else []


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0

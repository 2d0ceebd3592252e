"""An ``autocast`` run's rows: per model, autocast mode and module, the dtypes its forward and backward hooks saw —
or, for a mode the device cannot run, why. The engine builds them and stores ``to_row()``; the dtype map and the page
read the fields. Torch-free."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from core.result import RunResult


@dataclass(frozen=True)
class ModuleDtypes:
    model: str
    autocast: str  # "none", "fp16", "bf16"
    module: str  # "(model)" for the model itself
    type: str = ""
    input_dtypes: str = ""  # "fp32, bf16": each input's, as the hooks saw them
    output_dtype: str = ""
    param_dtypes: str = ""
    grad_dtypes: str = ""
    grad_output_dtypes: str = ""
    model_output_dtype: str = ""
    status: str = "ok"  # ok | unsupported
    reason: str | None = None  # why the device cannot run the mode
    extra: Mapping[str, Any] = field(default_factory=dict)  # keys others add (the fan-out's GPU)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_row(self) -> dict:
        """The stored row: the hooks' dtypes, or a mode the device cannot run with its reason."""
        keys = _MEASURED if self.ok else _UNSUPPORTED
        return {k: getattr(self, k) for k in keys} | dict(self.extra)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> ModuleDtypes:
        known = {k: row[k] for k in _FIELDS if k in row and row[k] is not None and k != "reason"}
        return cls(**known, reason=row.get("reason"), extra={k: v for k, v in row.items() if k not in _FIELDS})

    @classmethod
    def of(cls, rows: Sequence[Mapping[str, Any]]) -> list[ModuleDtypes]:
        return [cls.from_row(r) for r in rows]

    @classmethod
    def from_run(cls, run: RunResult) -> list[ModuleDtypes]:
        return cls.of(run.rows)


_FIELDS = tuple(f.name for f in dataclasses.fields(ModuleDtypes) if f.name != "extra")
_MEASURED = _FIELDS[:11]  # every hook's dtype, then the status
_UNSUPPORTED = ("model", "autocast", "module", "status", "reason")

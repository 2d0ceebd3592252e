"""The one result schema every experiment produces, and its strict JSON validation.

The store, the CLI, the import/export path and the charts all speak :class:`RunResult`; only the
``rows`` (one record per measured point) and ``meta`` differ between experiments.
"""
from __future__ import annotations

import uuid
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any

SCHEMA_VERSION = 1
# "running" exists only in the store while a job is in flight; "interrupted" is what it becomes
# when the process that ran it died (server restart) before writing a final status.
STATUSES = ("ok", "error", "cancelled", "unsupported", "running", "interrupted")
FINAL_STATUSES = ("ok", "error", "cancelled", "unsupported", "interrupted")


class SchemaError(ValueError):
    """A run record that does not follow the schema (the message says which field)."""


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def new_run_id() -> str:
    return uuid.uuid4().hex


@dataclass
class RunResult:
    experiment: str
    config: dict
    device: dict  # core.hardware.device description of the device the run used
    versions: dict  # library versions (torch, CUDA, cuDNN, python, gpulab)
    started_at: str
    finished_at: str | None
    status: str
    error: str | None = None
    rows: list[dict] = field(default_factory=list)
    meta: dict = field(default_factory=dict)
    id: str = field(default_factory=new_run_id)
    name: str = ""  # user label, editable
    tags: list[str] = field(default_factory=list)
    imported: bool = False
    schema_version: int = SCHEMA_VERSION

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def duration_s(self) -> float | None:
        if not self.finished_at:
            return None
        return (datetime.fromisoformat(self.finished_at) - datetime.fromisoformat(self.started_at)).total_seconds()

    def frame(self):
        return rows_frame(self.rows)

    @classmethod
    def from_dict(cls, data: Any) -> "RunResult":
        """Validate a decoded JSON object field by field; raise :class:`SchemaError` naming the problem."""
        if not isinstance(data, dict):
            raise SchemaError(f"a run must be a JSON object, got {type(data).__name__}")
        version = data.get("schema_version")
        if version != SCHEMA_VERSION:
            raise SchemaError(f"schema_version {version!r} is not supported (this lab reads {SCHEMA_VERSION})")
        spec: dict[str, tuple] = {
            "id": (str,), "experiment": (str,), "config": (dict,), "device": (dict,), "versions": (dict,),
            "started_at": (str,), "finished_at": (str, type(None)), "status": (str,),
            "error": (str, type(None)), "rows": (list,), "meta": (dict,), "name": (str,), "tags": (list,),
            "imported": (bool,), "schema_version": (int,),
        }
        missing = [k for k in ("id", "experiment", "config", "device", "versions", "started_at", "status", "rows")
                   if k not in data]
        if missing:
            raise SchemaError(f"missing field(s): {', '.join(missing)}")
        unknown = set(data) - set(spec)
        if unknown:
            raise SchemaError(f"unknown field(s): {', '.join(sorted(unknown))}")
        for key, types_ in spec.items():
            if key in data and not isinstance(data[key], types_):
                raise SchemaError(f"field {key!r} has type {type(data[key]).__name__}")
        if data["status"] not in STATUSES:
            raise SchemaError(f"status {data['status']!r} is not one of {', '.join(STATUSES)}")
        if not data["id"] or len(data["id"]) > 64 or not data["id"].isalnum():
            raise SchemaError("id must be 1-64 letters and digits")
        for key in ("started_at", "finished_at"):
            if data.get(key):
                try:
                    datetime.fromisoformat(data[key])
                except ValueError:
                    raise SchemaError(f"{key} is not an ISO date: {data[key]!r}") from None
        for i, row in enumerate(data["rows"]):
            if not isinstance(row, dict):
                raise SchemaError(f"rows[{i}] is not an object")
        if not all(isinstance(t, str) for t in data.get("tags", [])):
            raise SchemaError("tags must be strings")
        return cls(**data)


def rows_frame(rows: list[dict]):
    """Rows as a DataFrame; columns that are numbers plus "inf"/"nan" strings become float again."""
    import pandas as pd

    df = pd.DataFrame(rows)
    special = {"inf": float("inf"), "-inf": float("-inf"), "nan": float("nan")}
    for col in df.columns:
        if pd.api.types.is_numeric_dtype(df[col]) or pd.api.types.is_bool_dtype(df[col]):
            continue
        values = df[col].dropna()
        if len(values) and all((isinstance(v, (int, float)) and not isinstance(v, bool))
                               or (isinstance(v, str) and v in special) for v in values):
            if any(isinstance(v, str) for v in values):
                df[col] = pd.Series([special.get(v, v) if isinstance(v, str) else v for v in df[col]],
                                    index=df.index, dtype=float)
    return df

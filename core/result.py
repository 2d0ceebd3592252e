"""The one result schema every experiment produces, and its strict JSON validation.

The store, the CLI, the import/export path and the charts all speak :class:`RunResult`; only the
``rows`` (one record per measured point) and ``meta`` differ between experiments.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime
from typing import Any, Literal

SCHEMA_VERSION = 1
# "running" exists only in the store while a job is in flight; "interrupted" is what it becomes
# when the process that ran it died (server restart) before writing a final status.
STATUSES = ("ok", "error", "cancelled", "unsupported", "running", "interrupted")
FINAL_STATUSES = ("ok", "error", "cancelled", "unsupported", "interrupted")


@dataclass(frozen=True)
class ErrorKind:
    """What a failed run's ``error_kind`` means to the frame: its status, the CLI's exit code and how a page
    says it. One table, so no caller ever reads the wording of an error to decide either."""

    status: str
    exit_code: int  # core/cli: 1 the run failed, 2 bad input, 3 unsupported on this device
    banner: Literal["error", "warning", "info"]  # the page's st.<banner>
    says: str  # the page's words; fields: status, error, detail (the error without its lead), points
    lead: str = ""  # the words the worker writes before the message (the page may show the message alone)

    def text(self, message: str) -> str:
        """The run's error text: the lead, then the message."""
        return self.lead + message


ERROR_KINDS: dict[str, ErrorKind] = {
    "config": ErrorKind("error", 2, "error", "{status}: {error}", lead="invalid config: "),  # bad input
    "refused": ErrorKind("error", 2, "error", "Not run — {detail}", lead="refused: "),  # cannot fit: not run
    "unsupported": ErrorKind("unsupported", 3, "warning", "{error}"),
    "oom": ErrorKind("error", 1, "error", "{status}: {error}"),
    "crash": ErrorKind("error", 1, "error", "{status}: {error}"),  # an exception, a dead worker, a broken queue
    "timeout": ErrorKind("error", 1, "error", "{status}: {error}"),
    "cancelled": ErrorKind(
        "cancelled", 1, "info", "Cancelled — showing the {points} point(s) finished before the cancel."
    ),
    "interrupted": ErrorKind("interrupted", 1, "error", "{status}: {error}"),
}
# A status that is itself the kind of failure: a run given it takes that kind.
KIND_OF_STATUS = {"unsupported": "unsupported", "cancelled": "cancelled", "interrupted": "interrupted"}


class SchemaError(ValueError):
    """A run record that does not follow the schema (the message says which field)."""


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def new_run_id() -> str:
    return uuid.uuid4().hex


@dataclass(frozen=True)
class DeviceInfo:
    """A run's device description (``core.hardware.device`` writes it; ``DEVICE_FIELDS`` types it) as fields, so
    a view asks ``run.device_info.is_cuda`` where it read ``run.device.get("kind") == "cuda"``. The stored dict is
    unchanged; keys the lab does not read stay there (``RunResult.device``)."""

    kind: str = ""
    name: str = ""
    label: str | None = None
    torch_device: str | None = None
    index: int | None = None
    compute_capability: str | None = None
    multiprocessors: int | None = None
    cores: int | None = None
    torch_threads: int | None = None
    l2_cache_bytes: float | None = None
    total_memory_bytes: float | None = None
    free_memory_bytes: float | None = None
    bf16_supported: bool | None = None
    tf32: dict | None = None
    torch_build: dict | None = None
    spec: dict | None = None
    host: str | None = None  # the box's host name (a health check's run names it)
    devices: tuple[dict, ...] = ()  # an all-GPU run's: every GPU's own description (core.fanout.box_device)

    @classmethod
    def of(cls, device: dict) -> DeviceInfo:
        """The fields of a stored description; a key it lacks reads as the field's default."""
        known: dict[str, Any] = {f.name: device[f.name] for f in fields(cls) if f.name in device}
        parts = device.get("devices")  # not in the schema's checks: only a list of descriptions is read
        known["devices"] = tuple(d for d in parts if isinstance(d, dict)) if isinstance(parts, list) else ()
        return cls(**known)

    @property
    def is_cuda(self) -> bool:
        return self.kind == "cuda"

    @property
    def is_cpu(self) -> bool:
        return self.kind == "cpu"

    @property
    def shown(self) -> str:
        """How a heading names it: its label, else its name."""
        return self.label or self.name


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
    error_kind: str | None = None  # a key of ERROR_KINDS when the run failed; None when ok or running

    def __post_init__(self) -> None:
        # A status that is a kind of failure decides it, so a copy made with another status (the store's
        # "interrupted") never keeps the kind of the run it was; an error nobody classified is a crash.
        self.error_kind = KIND_OF_STATUS.get(self.status, self.error_kind)
        if self.status == "error" and self.error_kind is None:
            self.error_kind = "crash"

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def failure(self) -> ErrorKind | None:
        """What the run's failure means to the CLI and the pages; None when it did not fail."""
        return ERROR_KINDS.get(self.error_kind) if self.error_kind else None

    @property
    def exit_code(self) -> int:
        """The CLI's exit code for this run (core/cli): 0 when ok, else its kind's."""
        if self.status == "ok":
            return 0
        return self.failure.exit_code if self.failure else 1

    @property
    def error_detail(self) -> str:
        """The error in the experiment's own words: without the lead its kind wrote before them."""
        error = self.error or ""
        lead = self.failure.lead if self.failure else ""
        return error[len(lead) :] if lead and error[: len(lead)] == lead else error

    @property
    def duration_s(self) -> float | None:
        return duration_s(self.started_at, self.finished_at)

    @property
    def recorded_elsewhere(self) -> str | None:
        return recorded_elsewhere(self.meta)

    @property
    def device_info(self) -> DeviceInfo:
        """The device description's fields (read from ``device`` on each call: a running job may replace it)."""
        return DeviceInfo.of(self.device)

    def frame(self):
        return rows_frame(self.rows)

    @classmethod
    def from_dict(cls, data: Any) -> RunResult:
        """Validate a decoded JSON object field by field; raise :class:`SchemaError` naming the problem."""
        problem = schema_problem(data)
        if problem:
            raise SchemaError(problem)
        if "error_kind" not in data:
            data = data | {"error_kind": legacy_error_kind(data)}
        return cls(**data)


def legacy_error_kind(data: dict) -> str | None:
    """Legacy reading: the kind of a run stored before runs carried ``error_kind``, read once, here.

    Such a run told its kind by its status, ``meta.refused``/``meta.oom`` and the words the worker then
    put first in its error; nothing else reads those words.
    """
    status, error, meta = data["status"], data.get("error") or "", data.get("meta") or {}
    if status != "error":
        return KIND_OF_STATUS.get(status)
    if meta.get("refused") or error.startswith("refused: "):
        return "refused"
    if error.startswith(("invalid config: ", "invalid request: ")):
        return "config"
    if meta.get("oom"):
        return "oom"
    if error.startswith("timed out after "):
        return "timeout"
    return "crash"


def recorded_elsewhere(meta: dict) -> str | None:
    """For a run that imported a file recorded on another machine (a memory snapshot, a profiler trace):
    that machine's GPU as the file names it, or "recorded elsewhere"; None for the lab's own measurements,
    whose device is the one that ran them."""
    if not meta.get("recorded_on"):
        return None
    return str(meta.get("device_name") or "recorded elsewhere")


def duration_s(started_at: str, finished_at: str | None) -> float | None:
    if not finished_at:
        return None
    return (datetime.fromisoformat(finished_at) - datetime.fromisoformat(started_at)).total_seconds()


SUMMARY_ERROR_CHARS = 1000  # a summary quotes the start of an error; the run itself keeps all of it


@dataclass
class RunSummary:
    """What the history lists of a run: everything but its rows and meta, plus their count and the
    headline figure. The store keeps it beside the run, so listing a 150 MB run reads a few hundred
    bytes of it."""

    id: str
    experiment: str
    status: str
    started_at: str
    finished_at: str | None
    name: str
    tags: list[str]
    imported: bool
    config: dict
    device: dict
    versions: dict
    error: str | None
    row_count: int
    headline: str
    payload_bytes: int  # size of the stored run as JSON: what exporting it adds to a runs file
    recorded_elsewhere: str | None = None  # an imported file's own GPU (see recorded_elsewhere())
    damaged: str | None = None  # what is wrong with a stored run that cannot be read back (listed, never opened)

    @classmethod
    def of(cls, run: RunResult, payload_bytes: int, headline: str) -> RunSummary:
        error = (
            run.error
            if run.error is None or len(run.error) <= SUMMARY_ERROR_CHARS
            else run.error[:SUMMARY_ERROR_CHARS] + "…"
        )
        return cls(
            id=run.id,
            experiment=run.experiment,
            status=run.status,
            started_at=run.started_at,
            finished_at=run.finished_at,
            name=run.name,
            tags=list(run.tags),
            imported=run.imported,
            config=run.config,
            device=run.device,
            versions=run.versions,
            error=error,
            row_count=len(run.rows),
            headline=headline,
            payload_bytes=payload_bytes,
            recorded_elsewhere=run.recorded_elsewhere,
        )

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> RunSummary:
        """A stored summary, checked like a run's fields (the history reads them without further checks)."""
        problem = summary_problem(data)
        if problem:
            raise SchemaError(problem)
        return cls(**data)

    @property
    def duration_s(self) -> float | None:
        return duration_s(self.started_at, self.finished_at)

    @property
    def device_name(self) -> str:
        return self.device_info.name

    @property
    def device_info(self) -> DeviceInfo:
        return DeviceInfo.of(self.device)


NONE = type(None)
NUMBER = (int, float)
SCALAR = (str, int, float, bool, NONE)
# Every top-level field and the types it may hold (``bool`` is never taken for ``int``).
FIELDS: dict[str, tuple[type, ...]] = {
    "id": (str,),
    "experiment": (str,),
    "config": (dict,),
    "device": (dict,),
    "versions": (dict,),
    "started_at": (str,),
    "finished_at": (str, NONE),
    "status": (str,),
    "error": (str, NONE),
    "rows": (list,),
    "meta": (dict,),
    "name": (str,),
    "tags": (list,),
    "imported": (bool,),
    "schema_version": (int,),
    "error_kind": (str, NONE),  # absent in runs stored before it existed (legacy_error_kind reads them)
}
REQUIRED = ("id", "experiment", "config", "device", "versions", "started_at", "status", "rows")
# What the lab reads of a device description (core.hardware.device), by type. Other keys may hold any JSON.
DEVICE_FIELDS: dict[str, tuple[type, ...]] = {
    "kind": (str,),
    "name": (str,),
    "label": (str, NONE),
    "torch_device": (str, NONE),
    "index": (int, NONE),
    "compute_capability": (str, NONE),
    "multiprocessors": (int, NONE),
    "cores": (int, NONE),
    "torch_threads": (int, NONE),
    "l2_cache_bytes": NUMBER + (NONE,),
    "total_memory_bytes": NUMBER + (NONE,),
    "free_memory_bytes": NUMBER + (NONE,),
    "bf16_supported": (bool, NONE),
    "tf32": (dict, NONE),
    "torch_build": (dict, NONE),
    "spec": (dict, NONE),
}
SPEC_PEAKS = "tflops"  # device.spec's table of dense datasheet peaks per unit (TOPS for int8): DeviceSpec.tflops
SPEC_FIELDS: dict[str, tuple[type, ...]] = {
    "key": (str,),
    "name": (str,),
    "pattern": (str,),
    SPEC_PEAKS: (dict,),
    "bandwidth_gbs": NUMBER + (NONE,),
    "memory_gib": NUMBER + (NONE,),
    "source": (str,),
    "notes": (str,),
    "min_memory_gib": NUMBER + (NONE,),
}
_ID = re.compile(r"^[0-9A-Za-z]{1,64}$")
_EXPERIMENT = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}$")


def _type_name(types: tuple[type, ...]) -> str:
    names = {
        str: "text",
        int: "a whole number",
        float: "a number",
        bool: "true/false",
        NONE: "null",
        dict: "an object",
        list: "a list",
    }
    return " or ".join(dict.fromkeys(names[t] for t in types))


def _wrong(value: Any, types: tuple[type, ...]) -> bool:
    if isinstance(value, bool):
        return bool not in types
    return not isinstance(value, types)


def _typed(obj: dict, fields: dict[str, tuple[type, ...]], where: str) -> str | None:
    for key, types in fields.items():
        if key in obj and _wrong(obj[key], types):
            return f"{where}{key} has type {type(obj[key]).__name__} (expected {_type_name(types)})"
    return None


def _device_problem(device: dict) -> str | None:
    missing = [k for k in ("kind", "name") if k not in device]
    if missing:
        return f"device lacks {', '.join(missing)}"
    problem = _typed(device, DEVICE_FIELDS, "device.")
    if problem:
        return problem
    for key in ("tf32", "torch_build"):
        bad = next((k for k, v in (device.get(key) or {}).items() if _wrong(v, SCALAR)), None)
        if bad is not None:
            return f"device.{key}.{bad} must be a plain value"
    spec = device.get("spec")
    if spec is not None:
        problem = _typed(spec, SPEC_FIELDS, "device.spec.")
        if problem:
            return problem
        bad = next((k for k, v in (spec.get(SPEC_PEAKS) or {}).items() if _wrong(v, NUMBER + (NONE,))), None)
        if bad is not None:
            return f"device.spec.{SPEC_PEAKS}.{bad} must be a number"
    return None


def schema_problem(data: Any) -> str | None:
    """What is wrong with a run record, or None: the type of every field the lab reads, at every level.

    The store, the history list, the CLI tables and the comparison all read these fields without
    further checks, so a record that passes cannot crash them later. (What a *new* name or tag may
    hold is :mod:`core.text`'s rule, applied where labels enter: imports, the CLI, relabelling.) ``rows`` and ``meta`` hold any
    JSON (each experiment's plots read their own, inside a guard); their depth is capped where a
    file is read (:mod:`core.intake`).
    """
    from core.text import quoted

    if not isinstance(data, dict):
        return f"a run must be a JSON object, got {type(data).__name__}"
    version = data.get("schema_version")
    if isinstance(version, bool) or version != SCHEMA_VERSION:
        return f"schema_version {quoted(version)} is not supported (this lab reads {SCHEMA_VERSION})"
    missing = [k for k in REQUIRED if k not in data]
    if missing:
        return f"missing field(s): {', '.join(missing)}"
    unknown = set(data) - set(FIELDS)
    if unknown:
        return f"unknown field(s): {quoted(', '.join(sorted(unknown)))}"
    problem = _typed(data, FIELDS, "field ")
    if problem:
        return problem
    if data["status"] not in STATUSES:
        return f"status {quoted(data['status'])} is not one of {', '.join(STATUSES)}"
    if data.get("error_kind") is not None and data["error_kind"] not in ERROR_KINDS:
        return f"error_kind {quoted(data['error_kind'])} is not one of {', '.join(ERROR_KINDS)}"
    if not _ID.match(data["id"]):
        return "id must be 1-64 letters and digits"
    if not _EXPERIMENT.match(data["experiment"]):
        return f"experiment {quoted(data['experiment'])} is not an experiment name (a-z, 0-9, -, _, .)"
    for key in ("started_at", "finished_at"):
        if data.get(key):
            try:
                datetime.fromisoformat(data[key])
            except ValueError:
                return f"{key} is not an ISO date: {quoted(data[key])}"
    if not all(isinstance(t, str) for t in data.get("tags", [])):
        return "tags must be text"
    problem = _device_problem(data["device"])
    if problem:
        return problem
    for key, value in data["config"].items():
        items = value if isinstance(value, list) else [value]
        if any(_wrong(v, SCALAR) for v in items):
            return f"config.{quoted(key, 40)} must be a plain value or a list of plain values"
    bad = next((k for k, v in data["versions"].items() if _wrong(v, SCALAR)), None)
    if bad is not None:
        return f"versions.{quoted(bad, 40)} must be a plain value"
    bad_row = next((i for i, row in enumerate(data["rows"]) if not isinstance(row, dict)), None)
    if bad_row is not None:
        return f"rows[{bad_row}] is not an object"
    return None


SUMMARY_FIELDS: dict[str, tuple[type, ...]] = {
    "row_count": (int,),
    "headline": (str,),
    "payload_bytes": (int,),
    "recorded_elsewhere": (str, NONE),
    "damaged": (str, NONE),
}


def summary_problem(data: Any) -> str | None:
    """What is wrong with a stored summary, or None: its run's fields as :func:`schema_problem` checks them, and its
    own."""
    if not isinstance(data, dict):
        return f"a summary must be a JSON object, got {type(data).__name__}"
    own = {k: data[k] for k in SUMMARY_FIELDS if k in data}
    missing = [k for k in ("row_count", "headline", "payload_bytes") if k not in own]
    unknown = set(data) - set(FIELDS) - set(SUMMARY_FIELDS)
    if missing or unknown:
        return f"summary fields missing ({', '.join(missing)}) or unknown ({', '.join(sorted(map(str, unknown)))})"
    problem = _typed(own, SUMMARY_FIELDS, "summary field ")
    if problem:
        return problem
    run = {k: v for k, v in data.items() if k not in SUMMARY_FIELDS}
    return schema_problem(run | {"rows": [], "schema_version": SCHEMA_VERSION})


def rows_frame(rows: list[dict]):
    """Rows as a DataFrame; columns that are numbers plus "inf"/"nan" strings become float again."""
    import pandas as pd

    df = pd.DataFrame(rows)
    special = {"inf": float("inf"), "-inf": float("-inf"), "nan": float("nan")}
    for col in df.columns:
        if pd.api.types.is_numeric_dtype(df[col]) or pd.api.types.is_bool_dtype(df[col]):
            continue
        values = df[col].dropna()
        if len(values) and all(
            (isinstance(v, (int, float)) and not isinstance(v, bool)) or (isinstance(v, str) and v in special)
            for v in values
        ):
            if any(isinstance(v, str) for v in values):
                df[col] = pd.Series(
                    [special.get(v, v) if isinstance(v, str) else v for v in df[col]], index=df.index, dtype=float
                )
    return df

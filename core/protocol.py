"""The messages between the lab's processes, as typed records, each with one constructor and one reader.

Two channels speak JSON lines:

* the worker (``python -m core.worker``): requests on its stdin (:class:`RunRequest`, :class:`ExitRequest`,
  keyed by ``op``) and events on its stdout (:class:`ReadyEvent` … :class:`ResultEvent`, keyed by ``type``);
* the ranks of a one-box distributed job (:mod:`core.distributed.rank` writes, :mod:`core.distributed.launch`
  reads): their records live in :mod:`core.distributed.events`, built on :class:`Message` and :func:`decode` here, and
  kept there so that no worker or command that starts one defines them.

Why records: a field is named in one place, and a line that does not follow the protocol is refused by
:func:`decode` with the reason (:class:`ProtocolError`) instead of surfacing as a ``KeyError`` elsewhere.
Every record holds JSON-ready values (``core.experiment.json_ready`` is applied once, by whoever builds
it from an experiment's data), so :meth:`Message.to_json` is a plain ``json.dumps``.
"""

from __future__ import annotations

import functools
import json
import types
import typing
from collections.abc import Callable
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, ClassVar, TypeVar

from core.result import ERROR_KINDS, FINAL_STATUSES, now_iso


class ProtocolError(ValueError):
    """A line that is not a message of its channel; the message says what is wrong with it."""


M = TypeVar("M", bound="Message")


@dataclass(frozen=True)
class Message:
    """A record sent as one JSON object: its fields plus ``{KEY: TAG}`` naming its kind."""

    KEY: ClassVar[str] = "type"
    TAG: ClassVar[str] = ""

    def to_dict(self) -> dict:
        return {self.KEY: self.TAG} | {f.name: getattr(self, f.name) for f in fields(self)}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), allow_nan=False)

    @classmethod
    def from_dict(cls: type[M], data: dict) -> M:
        """The record of a decoded object whose tag is already known; every field checked by its type."""
        hints = _hints(cls)
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - names - {cls.KEY})
        if unknown:
            raise ProtocolError(f"{cls.TAG} {cls.KEY}: unknown field(s) {', '.join(unknown)}")
        missing = [f.name for f in fields(cls) if f.name not in data and _required(f)]
        if missing:
            raise ProtocolError(f"{cls.TAG} {cls.KEY}: missing field(s) {', '.join(missing)}")
        for name in names & set(data):
            if not hints[name](data[name]):
                raise ProtocolError(f"{cls.TAG} {cls.KEY}: {name} has type {type(data[name]).__name__}")
        try:
            return cls(**{k: v for k, v in data.items() if k in names})
        except ValueError as exc:  # a record's own check (__post_init__)
            raise ProtocolError(f"{cls.TAG} {cls.KEY}: {exc}") from None


def _required(f) -> bool:
    return f.default is MISSING and f.default_factory is MISSING


@functools.cache
def _hints(cls: type) -> dict[str, Callable[[Any], bool]]:
    """Each field's check, built once per record class: a result's thousands of rows are checked one by one."""
    return {name: _check(tp) for name, tp in typing.get_type_hints(cls).items()}


def _check(tp: Any) -> Callable[[Any], bool]:
    """Whether a decoded JSON value fits an annotation (``bool`` is never taken for a number)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        parts = [_check(a) for a in args]
        return lambda value: any(part(value) for part in parts)
    if tp is type(None):
        return lambda value: value is None
    if tp is Any:
        return lambda value: True
    if origin is list:
        item = _check(args[0])
        return lambda value: isinstance(value, list) and all(map(item, value))
    expected = {float: (int, float), dict: dict}.get(origin or tp, tp)
    return lambda value: isinstance(value, expected) and (tp is bool or not isinstance(value, bool))


def decode(line: str | bytes | dict, kinds: tuple[type[M], ...]) -> M:
    """One message of the channel whose records are ``kinds``; :class:`ProtocolError` saying why not."""
    if isinstance(line, dict):
        data = line
    else:
        try:
            data = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ProtocolError(f"not a JSON line: {exc}") from None
    key = kinds[0].KEY
    if not isinstance(data, dict):
        raise ProtocolError(f"a message is a JSON object, got {type(data).__name__}")
    by_tag = {k.TAG: k for k in kinds}
    tag = data.get(key)
    if tag not in by_tag:
        raise ProtocolError(f"unknown {key} {tag!r}: expected one of {', '.join(by_tag)}")
    return by_tag[tag].from_dict(data)


# --- the worker: requests (stdin) ---------------------------------------------------------------------


@dataclass(frozen=True)
class RunRequest(Message):
    """Run one experiment; ``config`` is the dict :meth:`core.jobs.JobManager.submit` validated."""

    KEY: ClassVar[str] = "op"
    TAG: ClassVar[str] = "run"
    experiment: str
    config: dict = field(default_factory=dict)
    device: str = "auto"
    job_id: str = ""


@dataclass(frozen=True)
class ExitRequest(Message):
    """Leave the request loop (closing stdin does the same)."""

    KEY: ClassVar[str] = "op"
    TAG: ClassVar[str] = "exit"


REQUESTS: tuple[type[Message], ...] = (RunRequest, ExitRequest)


# --- the worker: events (stdout) ----------------------------------------------------------------------


@dataclass(frozen=True)
class ReadyEvent(Message):
    """Once, at start, after torch and every experiment are imported: a job starts at once from here."""

    TAG: ClassVar[str] = "ready"
    pid: int
    env: dict[str, str]  # the worker-relevant environment variables it saw


@dataclass(frozen=True)
class WaitingEvent(Message):
    """Another process holds the device lock."""

    TAG: ClassVar[str] = "waiting"
    job_id: str
    message: str


@dataclass(frozen=True)
class StartedEvent(Message):
    """Lock taken, the experiment starts."""

    TAG: ClassVar[str] = "started"
    job_id: str
    device: dict  # core.hardware.device description
    versions: dict
    started_at: str
    pid: int
    memory_cap_bytes: int | None  # a CPU job's address-space cap; None on a GPU


@dataclass(frozen=True)
class ProgressEvent(Message):
    """A step of the experiment; ``rows`` are the rows finished since the previous event (sent once)."""

    TAG: ClassVar[str] = "progress"
    job_id: str
    done: int
    total: int
    message: str = ""
    rows: list[dict] = field(default_factory=list)


@dataclass(frozen=True)
class ResultEvent(Message):
    """The end of a job. Rows already sent in progress events are not sent again: the run's rows are the
    first ``rows_from`` rows the parent received, then ``rows`` (``rows_from`` is 0 when the experiment's
    final rows are not a continuation of what it reported). ``error_kind`` classifies a failure
    (:data:`core.result.ERROR_KINDS`); ``recycle`` asks the parent to replace this worker."""

    TAG: ClassVar[str] = "result"
    job_id: str
    status: str
    error: str | None = None
    error_kind: str | None = None
    rows: list[dict] = field(default_factory=list)
    rows_from: int = 0
    meta: dict = field(default_factory=dict)
    finished_at: str = field(default_factory=now_iso)
    recycle: bool = False

    def __post_init__(self) -> None:
        if self.status not in FINAL_STATUSES:
            raise ValueError(f"status {self.status!r} is not one of {', '.join(FINAL_STATUSES)}")
        if (self.status == "ok") != (self.error_kind is None):
            raise ValueError(f"status {self.status} with error_kind {self.error_kind!r}")
        if self.error_kind is not None and self.error_kind not in ERROR_KINDS:
            raise ValueError(f"error_kind {self.error_kind!r} is not one of {', '.join(ERROR_KINDS)}")

    @classmethod
    def failed(cls, job_id: str, kind: str, error: str, meta: dict | None = None, recycle: bool = False) -> ResultEvent:
        """A failure of kind ``kind``; its status follows from the kind (:data:`core.result.ERROR_KINDS`)."""
        return cls(job_id, ERROR_KINDS[kind].status, error, kind, meta=meta or {}, recycle=recycle)


WORKER_EVENTS: tuple[type[Message], ...] = (ReadyEvent, WaitingEvent, StartedEvent, ProgressEvent, ResultEvent)
WorkerEvent = ReadyEvent | WaitingEvent | StartedEvent | ProgressEvent | ResultEvent

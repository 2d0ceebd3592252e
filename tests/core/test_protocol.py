"""The protocol's records: each survives its JSON line, a line that is not one is refused with the reason,
and a failure's kind decides its status, exit code and page banner (checked against hand-written tables)."""

import json

import pytest

from core.distributed.events import RANK_EVENTS, RankAlive, RankDone, RankError, RankRows, RankStart, RankStep
from core.protocol import (
    REQUESTS,
    WORKER_EVENTS,
    ExitRequest,
    ProgressEvent,
    ProtocolError,
    ReadyEvent,
    ResultEvent,
    RunRequest,
    StartedEvent,
    WaitingEvent,
    decode,
)
from core.result import ERROR_KINDS, RunResult, legacy_error_kind

MESSAGES = [
    (RunRequest("matmul", {"dtypes": ["bf16"]}, "cuda:0", "j1"), REQUESTS),
    (ExitRequest(), REQUESTS),
    (ReadyEvent(12, {"CUDA_VISIBLE_DEVICES": "0"}), WORKER_EVENTS),
    (WaitingEvent("j1", "waiting for cuda:0"), WORKER_EVENTS),
    (StartedEvent("j1", {"kind": "cpu", "name": "x"}, {"torch": "2"}, "2024-01-01T00:00:00", 12, None), WORKER_EVENTS),
    (ProgressEvent("j1", 1, 2, "half", [{"a": 1.5, "b": "inf"}]), WORKER_EVENTS),
    (ResultEvent("j1", "ok", rows=[{"a": 1}], rows_from=3, meta={"k": [1, 2]}), WORKER_EVENTS),
    (ResultEvent.failed("j1", "oom", "out of memory on x", meta={"oom": True}, recycle=True), WORKER_EVENTS),
    (RankStart(4, {"ranks": []}), RANK_EVENTS),
    (RankStep(0, 4, "all_reduce 1 MiB"), RANK_EVENTS),
    (RankRows(0, 4, [{"busbw_gbs": 1.0}]), RANK_EVENTS),
    (RankDone({"backend": "gloo"}), RANK_EVENTS),
    (RankAlive(), RANK_EVENTS),
    (RankError(1, "boom", stalled=[2, 3], step="all_reduce", exception="RuntimeError", timeout_s=30.0), RANK_EVENTS),
]


@pytest.mark.parametrize("message, channel", MESSAGES, ids=lambda m: type(m).__name__)
def test_every_message_round_trips_its_json_line(message, channel):
    line = message.to_json()
    assert "\n" not in line
    assert decode(line, channel) == message
    assert decode(line.encode(), channel) == message
    assert json.loads(line)[message.KEY] == message.TAG


@pytest.mark.parametrize(
    "line, channel, says",
    [
        ("not json", WORKER_EVENTS, "not a JSON line"),
        ("[1, 2]", WORKER_EVENTS, "a message is a JSON object, got list"),
        ('{"type": "telemetry"}', WORKER_EVENTS, "unknown type 'telemetry': expected one of ready, waiting"),
        ('{"op": "launch"}', REQUESTS, "unknown op 'launch': expected one of run, exit"),
        ('{"type": "ready", "pid": 1}', WORKER_EVENTS, "ready type: missing field(s) env"),
        ('{"type": "ready", "pid": 1, "env": {}, "extra": 1}', WORKER_EVENTS, "unknown field(s) extra"),
        ('{"type": "ready", "pid": "1", "env": {}}', WORKER_EVENTS, "pid has type str"),
        ('{"type": "ready", "pid": true, "env": {}}', WORKER_EVENTS, "pid has type bool"),
        ('{"type": "progress", "job_id": "j", "done": 1, "total": 2, "rows": [1]}', WORKER_EVENTS, "rows has type"),
        ('{"type": "result", "job_id": "j", "status": "running"}', WORKER_EVENTS, "status 'running' is not one of"),
        ('{"type": "result", "job_id": "j", "status": "error"}', WORKER_EVENTS, "status error with error_kind None"),
        (
            '{"type": "result", "job_id": "j", "status": "error", "error_kind": "gremlins"}',
            WORKER_EVENTS,
            "error_kind 'gremlins' is not one of",
        ),
        ('{"type": "error", "message": "no rank"}', RANK_EVENTS, "error type: missing field(s) rank"),
        ('{"type": "ready", "pid": 1, "env": {}}', RANK_EVENTS, "unknown type 'ready'"),
    ],
)
def test_a_line_that_is_not_a_message_is_refused_with_the_reason(line, channel, says):
    with pytest.raises(ProtocolError) as refused:
        decode(line, channel)
    assert says in str(refused.value)


# Written from the CLI's documented exit codes (core/cli/__init__.py) and the pages' banners, not read
# from the table: kind → (status, exit code, banner).
EXPECTED = {
    "config": ("error", 2, "error"),
    "refused": ("error", 2, "error"),
    "unsupported": ("unsupported", 3, "warning"),
    "oom": ("error", 1, "error"),
    "crash": ("error", 1, "error"),
    "timeout": ("error", 1, "error"),
    "cancelled": ("cancelled", 1, "info"),
    "interrupted": ("interrupted", 1, "error"),
}


def test_each_error_kind_has_its_status_exit_code_and_banner():
    assert {k: (v.status, v.exit_code, v.banner) for k, v in ERROR_KINDS.items()} == EXPECTED


def _run(status, error=None, error_kind=None, meta=None) -> RunResult:
    return RunResult("probe", {}, {"kind": "cpu", "name": "cpu"}, {}, "2024-01-01T00:00:00", None, status, error,
                     error_kind=error_kind, meta=meta or {})  # fmt: skip


@pytest.mark.parametrize("kind, status, code", [(k, status, code) for k, (status, code, _) in EXPECTED.items()])
def test_a_failed_run_exits_with_its_kinds_code(kind, status, code):
    event = ResultEvent.failed("j", kind, "why")
    assert event.status == status
    assert _run(event.status, event.error, event.error_kind).exit_code == code
    assert _run("ok").exit_code == 0


def test_the_error_detail_drops_only_the_lead_its_kind_wrote():
    refused = ERROR_KINDS["refused"].text("a 1 GiB copy needs an estimated 2 GiB")
    assert refused == "refused: a 1 GiB copy needs an estimated 2 GiB"
    assert _run("error", refused, "refused").error_detail == "a 1 GiB copy needs an estimated 2 GiB"
    assert _run("error", "invalid request: device cuda:9", "config").error_detail == "invalid request: device cuda:9"
    assert _run("error", "refused: not really", "crash").error_detail == "refused: not really"


def test_a_status_that_is_a_failure_decides_the_kind():
    assert _run("interrupted", "x", error_kind="oom").error_kind == "interrupted"
    assert _run("error", "x").error_kind == "crash"
    assert _run("ok").error_kind is None and _run("running").error_kind is None


@pytest.mark.parametrize(
    "status, error, meta, kind",
    [
        ("ok", None, {}, None),
        ("running", None, {}, None),
        ("unsupported", "unsupported on cpu: no fp8", {}, "unsupported"),
        ("cancelled", "cancelled by user", {}, "cancelled"),
        ("interrupted", "the process stopped", {}, "interrupted"),
        ("error", "refused: a copy needs 2 GiB", {"refused": {"need_bytes": 1}}, "refused"),
        ("error", "invalid config: steps: too many", {}, "config"),
        ("error", "invalid request: device cuda:99 does not exist", {}, "config"),
        ("error", "out of memory on cpu: x", {"oom": True}, "oom"),
        ("error", "timed out after 1.5 s (the job's time limit)", {}, "timeout"),
        ("error", "RuntimeError: probe raised on purpose", {}, "crash"),
    ],
)
def test_a_run_stored_before_error_kind_opens_with_its_kind(status, error, meta, kind):
    old = _run(status, error, meta=meta).to_dict()
    del old["error_kind"]
    assert legacy_error_kind(old) == kind
    assert RunResult.from_dict(old).error_kind == kind

"""The worker process: ``python -m core.worker`` runs experiments away from the dashboard.

Protocol (JSON lines, the shape pyperf uses; the records are :mod:`core.protocol`'s). The parent writes
requests on the worker's stdin:

    {"op": "run", "job_id": "...", "experiment": "matmul", "config": {...}, "device": "auto"}
    {"op": "exit"}                                   (or just close stdin)

The worker answers on stdout, one JSON object per line; anything else the experiment or a C
library prints is redirected to stderr, so stdout carries nothing but the protocol:

    {"type": "ready", "pid": 123, "env": {...}}                  once, at start
    {"type": "waiting", "job_id", "message"}                     another process holds the device
    {"type": "started", "job_id", "device": {...}, "versions": {...}, "started_at", "memory_cap_bytes"}
    {"type": "progress", "job_id", "done", "total", "message", "rows": [the new rows]}
    {"type": "result", "job_id", "status", "error", "error_kind", "rows", "rows_from", "meta", "finished_at",
     "recycle"}

``python -m core.worker --info`` prints one JSON line with :func:`core.hardware.device.describe_all` and
exits. Run it by hand to debug an experiment: type a ``run`` request and read the events.

Jobs on one physical device never overlap, across processes too: the worker holds an exclusive
``flock`` on ``<lock_dir>/<device>.lock`` from "started" to "result". A worker whose parent dies
exits by itself (it watches its parent pid), so no orphan keeps a GPU busy.
"""

from __future__ import annotations

import gc

if __name__ == "__main__":  # a worker's own process: no collection while it imports (serve() turns it back on)
    gc.disable()

import copy
import dataclasses
import importlib
import json
import os
import platform
import sys
import threading
import time
from collections.abc import Callable, Generator
from contextlib import ExitStack, nullcontext
from typing import Any

from core import import_budget, import_dirs
from core.errors import ConfigError, DoesNotFit, Unsupported
from core.experiment import Context, Experiment, Output, Progress
from core.hardware.device import current_device
from core.hardware.memory import MEMORY_FRACTION_ENV, MEMORY_LIMIT_ENV, allocation_failure, capped, cpu_cap
from core.jsonable import json_ready
from core.limits import check_limits
from core.locks import device_lock
from core.protocol import (
    REQUESTS,
    ExitRequest,
    Message,
    ProgressEvent,
    ProtocolError,
    ReadyEvent,
    ResultEvent,
    RunRequest,
    StartedEvent,
    WaitingEvent,
    decode,
)
from core.result import ERROR_KINDS, now_iso
from core.text import first_line
from core.units import bytes_text

# Environment a parent may set for the worker (the memory cap of CPU jobs: core.hardware.memory).
REPORTED_ENV = (
    "PYTORCH_CUDA_ALLOC_CONF",
    "NVIDIA_TF32_OVERRIDE",
    "CUDA_VISIBLE_DEVICES",
    MEMORY_LIMIT_ENV,
    MEMORY_FRACTION_ENV,
)


class _Channel:
    """Protocol output on a private duplicate of fd 1; fd 1 itself is pointed at stderr."""

    def __init__(self) -> None:
        sys.stdout.flush()
        self._out = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
        os.dup2(2, 1)
        sys.stdout = sys.stderr
        self._lock = threading.Lock()

    def emit(self, event: Message) -> None:
        line = event.to_json()
        with self._lock:
            self._out.write(line + "\n")
            self._out.flush()


def _watch_parent() -> None:
    parent = os.getppid()

    def loop() -> None:
        while True:
            time.sleep(0.5)
            if os.getppid() != parent:
                os._exit(3)

    threading.Thread(target=loop, daemon=True, name="parent-watch").start()


def _free_memory() -> None:
    import torch

    gc.collect()
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()


def _result_rows(sent: list[dict], final: list[dict]) -> tuple[list[dict], int]:
    """The result's ``rows`` and ``rows_from``: only what the progress events did not already carry."""
    if final[: len(sent)] == sent:
        return final[len(sent) :], len(sent)
    return final, 0  # the experiment's final rows revise what it reported: they replace it


def _resolve(request: RunRequest) -> tuple[Experiment, Any, str, dict, dict | None]:
    """The request's experiment, its config (rebuilt from the dict the job validated, not judged again), the
    device it runs on with its description, and the versions where they are known without torch; ConfigError or
    KeyError for a request this box cannot serve."""
    from core import registry
    from core.hardware import device as devices

    exp = registry.get(request.experiment)
    config = exp.rebuild_config(request.config)
    if not exp.uses_torch:  # no device is resolved or touched, and torch is never imported
        torch_device = devices.check_device_string(request.device)
        desc = devices.describe_no_device(torch_device, exp.in_process)
        return exp, config, torch_device, desc, devices.versions_no_device()
    torch_device = devices.resolve(request.device)
    return exp, config, torch_device, devices.describe(torch_device), None


def _confined(exp: Experiment, config: Any, files: ExitStack) -> Any:
    """An import of a dashboard's worker (:data:`core.import_dirs.CONFINE_ENV`): each file it reads opened here,
    without following links, under the directories the dashboard allowed (ConfigError otherwise), and the config
    naming the files opened, held in ``files``; any other job's config as it is."""
    dirs = import_dirs.confined()
    if exp.reads is None or dirs is None:
        return config
    moved = files.enter_context(import_dirs.held(exp.reads(config), dirs))
    opened = copy.copy(config)
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if isinstance(value, str) and value in moved:
            object.__setattr__(opened, f.name, moved[value])
        elif isinstance(value, tuple) and any(v in moved for v in value):
            object.__setattr__(opened, f.name, tuple(moved.get(v, v) for v in value))
    if {str(p) for p in exp.reads(opened)} - set(moved.values()):  # a folder, read file by file: each must be named
        raise ConfigError("paths: a dashboard's import names each file it reads (a folder is not opened here)")
    return opened


def run_job(request: RunRequest, emit: Callable[[Message], None]) -> None:
    """Run one request to the end, emitting events; never raises."""
    from core.hardware import device as devices

    job_id = request.job_id
    files = ExitStack()  # the files a confined import reads, held open until it ends
    try:
        exp, config, torch_device, desc, versions = _resolve(request)
        config = _confined(exp, config, files)
    except (ConfigError, KeyError) as exc:
        files.close()
        emit(ResultEvent.failed(job_id, "config", f"invalid request: {exc}"))
        return

    # An in-process job (torch-free arithmetic in the submitting process) takes no device lock and no
    # memory cap: RLIMIT_AS would bind the whole dashboard or CLI process, not a worker. An import touches no
    # device either (no lock), and runs under the CPU time its files allow.
    touches_device = not (exp.in_process or exp.reads)
    lock = device_lock(torch_device, lambda msg: emit(WaitingEvent(job_id, msg))) if touches_device else nullcontext()
    memory_cap = nullcontext(None) if exp.in_process else capped(torch_device)
    cpu_limit = import_budget.cpu_limited(exp.reads(config)) if exp.reads else nullcontext(None)
    with files, lock, current_device("cpu" if exp.in_process else torch_device), memory_cap as cap, cpu_limit:
        emit(
            StartedEvent(
                job_id,
                device=json_ready(desc),
                versions=json_ready(versions or devices.versions()),
                started_at=now_iso(),
                pid=os.getpid(),
                memory_cap_bytes=cap,
            )
        )
        gen = exp.run(config, Context(device=torch_device, device_name=desc["name"]))
        try:
            result = _drive(gen, job_id, emit)
        except BaseException as exc:  # noqa: BLE001 - every failure becomes a stored result
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            emit(_failed(exc, job_id, exp, desc["name"], cap))
        else:
            emit(result)
        finally:
            gen.close()
            if exp.uses_torch:
                _free_memory()


def _drive(gen: Generator[Progress, None, Output], job_id: str, emit: Callable[[Message], None]) -> ResultEvent:
    """Run the experiment's generator to its end, each progress event carrying only its new rows; the ok result,
    with the rows those events did not carry."""
    sent: list[dict] = []  # every row the progress events carried, JSON-ready
    while True:
        try:
            event = next(gen)
        except StopIteration as stop:
            out = stop.value if isinstance(stop.value, Output) else Output(rows=[])
            rows, rows_from = _result_rows(sent, json_ready(list(out.rows)))
            return ResultEvent(job_id, "ok", rows=rows, rows_from=rows_from, meta=json_ready(out.meta))
        if isinstance(event, Progress):
            rows = json_ready(list(event.rows))
            sent += rows
            emit(ProgressEvent(job_id, event.done, event.total, event.message, rows))


def _failed(exc: BaseException, job_id: str, exp: Experiment, device_name: str, cap: int | None) -> ResultEvent:
    """The result of a run that ``exc`` ended, of the kind it is (called while ``exc`` is being handled, so an
    unforeseen one keeps its traceback); ``cap`` is the memory cap the job ran under, if any."""
    if isinstance(exc, Unsupported):
        return ResultEvent.failed(job_id, "unsupported", str(exc))
    if isinstance(exc, DoesNotFit):
        return ResultEvent.failed(job_id, "refused", ERROR_KINDS["refused"].text(str(exc)), meta=exc.meta)
    if isinstance(exc, ConfigError):
        return ResultEvent.failed(job_id, "config", ERROR_KINDS["config"].text(str(exc)))
    extra = getattr(exc, "meta", None)  # an experiment may attach context (e.g. the failing step)
    extra = json_ready(extra) if isinstance(extra, dict) else {}
    if not exp.in_process and _out_of_memory(exc):
        under = (
            f" (the job ran under a {bytes_text(cap)} memory cap: {MEMORY_FRACTION_ENV} or {MEMORY_LIMIT_ENV} "
            f"changes it)"
            if cap
            else ""
        )
        text = f"out of memory on {device_name}: {first_line(exc)}{under}"
        return ResultEvent.failed(job_id, "oom", text, meta=extra | {"oom": True}, recycle=True)
    text = f"{type(exc).__name__}: {exc}"
    import traceback  # a crash's only: every worker's start would pay for it

    return ResultEvent.failed(job_id, "crash", text, meta=extra | {"traceback": traceback.format_exc()})


def _out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` is an allocation that failed. A worker that has not imported torch (a torch-free import
    under its memory cap) raised no torch error and must not import torch now: under the cap it fails too."""
    if "torch" not in sys.modules:
        return isinstance(exc, MemoryError)
    return allocation_failure(exc) is not None


def serve(preload_torch: bool = False, preload: tuple[str, ...] = ()) -> int:
    try:
        cpu_cap(0, 0)  # a malformed memory setting stops the worker here, with its message
        check_limits()  # and so does a malformed GPULAB_LIMITS
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 2
    channel = _Channel()
    _watch_parent()
    # Every job's start names the platform, and platform.platform() runs `uname -p` the first time it is asked:
    # asked now, on its own thread, that wait overlaps the imports below instead of delaying the job's start.
    threading.Thread(target=platform.platform, name="platform", daemon=True).start()
    # Each experiment's module is imported by its first job. torch is imported here only when the job that
    # started this worker runs tensors: a worker that reads a snapshot never pays for it.
    if preload_torch:
        import torch  # noqa: F401
    for module in preload:  # what the job this worker was started for will import (its start overlaps the caller's)
        if module.startswith("core."):
            importlib.import_module(module)
    # What the worker imported lives as long as it does: the collector need never go through it again (about
    # 10 ms of collections while a trace's worker imports, as long again as reading a small trace; core.__main__)
    gc.freeze()
    gc.enable()
    channel.emit(ReadyEvent(os.getpid(), {k: os.environ[k] for k in REPORTED_ENV if k in os.environ}))
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            request = decode(line, REQUESTS)
        except ProtocolError as exc:
            channel.emit(ResultEvent.failed(_job_id_of(line), "config", f"bad request: {exc}"))
            continue
        if isinstance(request, ExitRequest):
            break
        if not isinstance(request, RunRequest):  # a request kind this loop does not serve
            channel.emit(ResultEvent.failed(_job_id_of(line), "config", f"unexpected request {type(request).__name__}"))
            continue
        run_job(request, channel.emit)
    return 0


def _job_id_of(line: str) -> str:
    """The job a refused request named, so its sender can tell which job failed."""
    try:
        job_id = json.loads(line).get("job_id", "")
    except (ValueError, AttributeError):
        return ""
    return job_id if isinstance(job_id, str) else ""


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    preload = [arg.removeprefix("--preload=") for arg in argv if arg.startswith("--preload=")]
    if len(preload) + argv.count("--preload-torch") == len(argv):  # as the lab starts it: no parser (10 ms) needed
        return serve("--preload-torch" in argv, tuple(preload))
    import argparse

    parser = argparse.ArgumentParser(prog="python -m core.worker", description=(__doc__ or "").partition("\n")[0])
    parser.add_argument("--info", action="store_true", help="print the device description as JSON and exit")
    parser.add_argument(
        "--preload-torch",
        action="store_true",
        help="import torch before reporting ready, so a job that runs tensors starts at once (its timeout does "
        "not pay for the import)",
    )
    parser.add_argument(
        "--preload",
        action="append",
        default=[],
        metavar="MODULE",
        help="a core module to import before reporting ready",
    )
    args = parser.parse_args(argv)
    if args.info:
        from core.hardware.device import describe_all

        print(json.dumps(json_ready(describe_all()), allow_nan=False), flush=True)
        return 0
    return serve(args.preload_torch, tuple(args.preload))


def _exit(code: int) -> None:
    """A worker that never imported torch has nothing to finalise (its jobs' results are sent, its files
    closed): it ends at once instead of tearing down the interpreter, which the caller would wait for."""
    if "torch" in sys.modules:
        sys.exit(code)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    _exit(main())

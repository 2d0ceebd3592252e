"""The worker process: ``python -m core.worker`` runs experiments away from the dashboard.

Protocol (JSON lines, the shape pyperf uses). The parent writes requests on the worker's stdin:

    {"op": "run", "job_id": "...", "experiment": "matmul", "config": {...}, "device": "auto"}
    {"op": "exit"}                                   (or just close stdin)

The worker answers on stdout, one JSON object per line; anything else the experiment or a C
library prints is redirected to stderr, so stdout carries nothing but the protocol:

    {"type": "ready", "pid": 123, "env": {...}}                  once, at start
    {"type": "waiting", "job_id", "message"}                     another process holds the device
    {"type": "started", "job_id", "device": {...}, "versions": {...}, "started_at", "memory_cap_bytes"}
    {"type": "progress", "job_id", "done", "total", "message", "rows": [...]}
    {"type": "result", "job_id", "status", "error", "rows", "meta", "finished_at", "recycle"}

``python -m core.worker --info`` prints one JSON line with :func:`core.hardware.device.describe_all` and
exits. Run it by hand to debug an experiment: type a ``run`` request and read the events.

Jobs on one physical device never overlap, across processes too: the worker holds an exclusive
``flock`` on ``<lock_dir>/<device>.lock`` from "started" to "result". A worker whose parent dies
exits by itself (it watches its parent pid), so no orphan keeps a GPU busy.
"""

from __future__ import annotations

import argparse
import fcntl
import gc
import json
import os
import sys
import threading
import time
import traceback
from contextlib import contextmanager, nullcontext
from pathlib import Path

from core.experiment import ConfigError, Context, DoesNotFit, Output, Progress, Unsupported, json_ready
from core.hardware.device import current_device
from core.hardware.memory import MEMORY_FRACTION_ENV, MEMORY_LIMIT_ENV, allocation_failure, capped, cpu_cap
from core.paths import lock_dir
from core.result import now_iso
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

    def emit(self, event: dict) -> None:
        line = json.dumps(json_ready(event), allow_nan=False)
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


def lock_path(torch_device: str) -> Path:
    """The file whose exclusive flock means "a GPU Lab job is running on this device"."""
    return lock_dir() / f"{torch_device.replace(':', '')}.lock"


def _open_lock(torch_device: str) -> int:
    return os.open(lock_path(torch_device), os.O_RDWR | os.O_CREAT, 0o644)


def try_lock(torch_device: str) -> int | None:
    """The device's lock if no other process holds it: the open file descriptor (closing it releases the
    lock), or None while another GPU Lab job runs there."""
    fd = _open_lock(torch_device)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BaseException as exc:
        os.close(fd)
        if isinstance(exc, BlockingIOError):
            return None
        raise
    return fd


@contextmanager
def device_lock(torch_device: str, on_wait):
    fd = try_lock(torch_device)
    if fd is None:
        on_wait(f"waiting for {torch_device}: another GPU Lab process is running a job on it")
        fd = _open_lock(torch_device)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(fd)
            raise
    try:
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _free_memory() -> None:
    import torch

    gc.collect()
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()


def run_job(request: dict, emit) -> None:
    """Run one request to the end, emitting events; never raises."""
    from core import registry
    from core.hardware import device as devices

    job_id = request.get("job_id", "")

    def result(status: str, error: str | None, rows=(), meta=None, recycle=False) -> None:
        emit(
            {
                "type": "result",
                "job_id": job_id,
                "status": status,
                "error": error,
                "rows": list(rows),
                "meta": meta or {},
                "finished_at": now_iso(),
                "recycle": recycle,
            }
        )

    try:
        exp = registry.get(request["experiment"])
        config = exp.make_config(request.get("config") or {})
        if exp.in_process:  # torch-free: no device is resolved, locked or touched
            torch_device = devices.check_device_string(request.get("device", "auto"))
            desc, versions = devices.describe_no_device(torch_device), devices.versions_no_device()
        else:
            torch_device = devices.resolve(request.get("device", "auto"))
            desc, versions = devices.describe(torch_device), None
    except (ConfigError, KeyError) as exc:
        result("error", f"invalid request: {exc}")
        return

    # An in-process job (torch-free arithmetic in the submitting process) takes no device lock and no
    # memory cap: RLIMIT_AS would bind the whole dashboard or CLI process, not a worker.
    lock = (
        nullcontext()
        if exp.in_process
        else device_lock(torch_device, lambda msg: emit({"type": "waiting", "job_id": job_id, "message": msg}))
    )
    memory_cap = nullcontext(None) if exp.in_process else capped(torch_device)
    with lock, current_device("cpu" if exp.in_process else torch_device), memory_cap as cap:
        emit(
            {
                "type": "started",
                "job_id": job_id,
                "device": desc,
                "versions": versions or devices.versions(),
                "started_at": now_iso(),
                "pid": os.getpid(),
                "memory_cap_bytes": cap,
            }
        )
        ctx = Context(device=torch_device, device_name=desc["name"])
        gen = exp.run(config, ctx)
        try:
            while True:
                event = next(gen)
                if isinstance(event, Progress):
                    emit(
                        {
                            "type": "progress",
                            "job_id": job_id,
                            "done": event.done,
                            "total": event.total,
                            "message": event.message,
                            "rows": list(event.rows),
                        }
                    )
        except StopIteration as stop:
            out = stop.value if isinstance(stop.value, Output) else Output(rows=[])
            result("ok", None, out.rows, out.meta)
        except Unsupported as exc:
            result("unsupported", str(exc))
        except DoesNotFit as exc:
            result("error", f"refused: {exc}", meta=exc.meta)
        except ConfigError as exc:
            result("error", f"invalid config: {exc}")
        except BaseException as exc:  # noqa: BLE001 - every failure becomes a stored result
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            extra = getattr(exc, "meta", None)  # an experiment may attach context (e.g. the failing step)
            extra = dict(extra) if isinstance(extra, dict) else {}
            if not exp.in_process and allocation_failure(exc) is not None:
                first = first_line(exc)
                under = (
                    f" (the job ran under a {bytes_text(cap)} memory cap: {MEMORY_FRACTION_ENV} or {MEMORY_LIMIT_ENV} "
                    f"changes it)"
                    if cap
                    else ""
                )
                result(
                    "error",
                    f"out of memory on {desc['name']}: {first}{under}",
                    meta=extra | {"oom": True},
                    recycle=True,
                )
            else:
                result("error", f"{type(exc).__name__}: {exc}", meta=extra | {"traceback": traceback.format_exc()})
        finally:
            gen.close()
            if not exp.in_process:
                _free_memory()


def serve() -> int:
    from core import registry

    try:
        cpu_cap(0, 0)  # a malformed memory setting stops the worker here, with its message
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 2
    channel = _Channel()
    _watch_parent()
    registry.experiments()  # import torch and every experiment now: "ready" means a job starts at once
    channel.emit(
        {"type": "ready", "pid": os.getpid(), "env": {k: os.environ[k] for k in REPORTED_ENV if k in os.environ}}
    )
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
        except json.JSONDecodeError as exc:
            channel.emit(
                {
                    "type": "result",
                    "job_id": "",
                    "status": "error",
                    "error": f"bad request: {exc}",
                    "rows": [],
                    "meta": {},
                    "finished_at": now_iso(),
                    "recycle": False,
                }
            )
            continue
        op = request.get("op")
        if op == "exit":
            break
        if op == "run":
            run_job(request, channel.emit)
        else:
            channel.emit(
                {
                    "type": "result",
                    "job_id": request.get("job_id", ""),
                    "status": "error",
                    "error": f"unknown op {op!r}",
                    "rows": [],
                    "meta": {},
                    "finished_at": now_iso(),
                    "recycle": False,
                }
            )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m core.worker", description=__doc__.splitlines()[0])
    parser.add_argument("--info", action="store_true", help="print the device description as JSON and exit")
    args = parser.parse_args(argv)
    if args.info:
        from core.hardware.device import describe_all

        print(json.dumps(json_ready(describe_all()), allow_nan=False), flush=True)
        return 0
    return serve()


if __name__ == "__main__":
    sys.exit(main())

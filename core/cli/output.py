"""How the CLI prints: JSON (``--json``) or a readable table of a run, shared by every command."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from core.experiment import json_ready
from core.result import RunResult
from core.text import terminal


class OutputError(Exception):
    """A file the command was asked to write cannot be written (exit 2, no traceback)."""


def dump(obj: Any) -> str:
    return json.dumps(json_ready(obj), indent=2, allow_nan=False)


def open_store(args, write: bool = True):
    """The run database of ``--db`` (or the default). Commands that only read (``write=False``) open a
    database they cannot write read-only, so an archived database can still be listed and exported;
    on a writable one they first mark runs whose process died as interrupted."""
    from core.paths import db_path
    from core.store import RunStore

    path = Path(args.db) if args.db else db_path()
    if write or not path.parent.exists() or RunStore.writable(path):
        store = RunStore(path)
        if not write:
            store.mark_interrupted()
        return store
    return RunStore(path, read_only=True)


def check_writable(path: str | os.PathLike) -> None:
    """Refuse an output path before any work is done: a directory, a missing or read-only folder."""
    target = Path(path)
    if target.is_dir():
        raise OutputError(f"cannot write {target}: Is a directory")
    folder = target.parent
    if not folder.is_dir():
        raise OutputError(f"cannot write {target}: No such file or directory ({folder} does not exist)")
    if not os.access(folder, os.W_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise OutputError(f"cannot write {target}: Permission denied")


def write_file(path: str | os.PathLike, data: bytes) -> None:
    try:
        with open(path, "wb") as fh:
            fh.write(data)
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None


def print_run(run: RunResult, as_json: bool) -> None:
    """Every text that came from outside (names, errors, device names, cells) is escaped for the terminal."""
    if as_json:
        print(dump(run.to_dict()))
        return
    device = run.device.get("label") or run.device.get("name")
    name = f"  {run.name!s}" if run.name else ""
    print(terminal(f"{run.experiment}  {run.id}  [{run.status}]  on {device}  at {run.started_at}{name}"))
    if run.error:
        print("  " + terminal(run.error, multiline=True).replace("\n", "\n  "))
    if run.rows:
        import pandas as pd

        with pd.option_context("display.max_rows", 200, "display.max_columns", 30, "display.width", 200):
            frame = run.frame()
            nested = [c for c in frame.columns if frame[c].map(lambda v: isinstance(v, (list, dict))).any()]
            print(terminal(frame.drop(columns=nested).to_string(index=False), multiline=True))
    for key, value in run.meta.items():
        if key not in ("worker", "traceback") and not isinstance(value, (list, dict)):
            print(terminal(f"  {key}: {value}"))

"""How the CLI prints: JSON (``--json``) or a readable table of a run, shared by every command."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from core.jsonable import json_ready
from core.result import RunResult
from core.rows.kinds import of_kinds, other_kinds
from core.rows.notes import RunNotes
from core.text import terminal_text
from core.units import bytes_text, count_text


class OutputError(Exception):
    """A file the command was asked to write cannot be written (exit 2, no traceback)."""


def dump(obj: Any) -> str:
    return json.dumps(json_ready(obj), indent=2, allow_nan=False)


def open_store(args, write: bool = True):
    """The run database of ``--db`` (or the default). Commands that only read (``write=False``) open a
    database they cannot write read-only, so an archived database can still be listed and exported;
    on a writable one they first mark runs whose process died as interrupted."""
    from core.paths import db_path
    from core.store import RunStore, StoreError

    path = Path(args.db) if args.db else db_path()
    if write or not path.parent.exists():
        return RunStore(path)
    if RunStore.writable(path):
        try:
            store = RunStore(path)
            store.mark_interrupted()
            return store
        except StoreError:
            if not path.is_file():
                raise
            # A disk that is full (or a database that cannot be written for another reason): reading
            # needs no write, so list, show, export and report still work from a read-only connection.
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


def cell(key: str, value: Any, byte_columns: frozenset = frozenset()) -> str:
    """One value as text: ``*_bytes`` (and a run's ``meta.byte_columns``) in KiB/MiB/GiB, floats to 4
    significant digits, None blank."""
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if key.endswith("_bytes") or key in byte_columns:
        return bytes_text(value)
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def table(rows: list[dict], max_rows: int = 200, byte_columns: frozenset = frozenset()) -> str:
    """Rows as aligned text columns (nested values left out), without pandas: the CLI stays fast."""
    columns: list[str] = []
    for row in rows:
        columns += [k for k, v in row.items() if k not in columns and not isinstance(v, (list, dict))]
    body = [[cell(c, row.get(c), byte_columns) for c in columns] for row in rows[:max_rows]]
    widths = [max(len(c), *(len(r[i]) for r in body)) if body else len(c) for i, c in enumerate(columns)]
    numeric = [all(_numeric(row.get(c)) for row in rows[:max_rows] if row.get(c) is not None) for c in columns]
    lines = ["  ".join(c.rjust(w) if n else c.ljust(w) for c, w, n in zip(columns, widths, numeric)).rstrip()]
    for r in body:
        lines.append("  ".join(v.rjust(w) if n else v.ljust(w) for v, w, n in zip(r, widths, numeric)).rstrip())
    if len(rows) > max_rows:
        lines.append(f"… {count_text(len(rows) - max_rows, 'more row')}; --json has them all")
    return "\n".join(lines)


def _numeric(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def print_run(run: RunResult, as_json: bool) -> None:
    """Every text that came from outside (names, errors, device names, cells) is escaped for the terminal."""
    if as_json:
        print(dump(run.to_dict()))
        warn_measurement_errors(run)
        return
    device = run.device_info.shown
    name = f"  {run.name!s}" if run.name else ""
    print(terminal_text(f"{run.experiment}  {run.id}  [{run.status}]  on {device}  at {run.started_at}{name}"))
    if run.error:
        print("  " + terminal_text(run.error, multiline=True).replace("\n", "\n  "))
    _print_rows(run)
    for key, value in run.meta.items():
        if key in ("worker", "traceback", "byte_columns"):
            continue
        if isinstance(value, dict) and key.endswith("_bytes") and all(_numeric(v) for v in value.values()):
            print(terminal_text(f"  {key}: " + ", ".join(f"{k} {bytes_text(v)}" for k, v in value.items())))
        elif not isinstance(value, (list, dict)):
            print(terminal_text(f"  {key}: {cell(key, value)}"))
    warn_measurement_errors(run)


def _print_rows(run: RunResult) -> None:
    """The experiment's answer in words first, then its rows: a table per kind it lists (raw samples counted, left
    to --json), or every row as it comes."""
    from core import registry

    exp = registry.experiments().get(run.experiment)
    byte_columns = RunNotes.from_run(run).byte_columns
    try:
        answer = exp.answer(run.rows, run.meta) if exp and exp.answer and run.rows else []
    except Exception as exc:  # noqa: BLE001 - a stored run's fields its answer cannot read: said, its rows still printed
        answer = [f"(its answer in words cannot be written for this run: {type(exc).__name__}: {exc})"]
    for line in answer:
        print(terminal_text(line))
    kinds = exp.text_kinds if exp else ()
    if not kinds:
        if run.rows:
            print(terminal_text(table(run.rows, byte_columns=byte_columns), multiline=True))
        return
    for kind in kinds:
        rows = of_kinds(run.rows, (kind,))
        if rows:
            print(terminal_text(f"\n{kind}:\n" + table(rows, byte_columns=byte_columns), multiline=True))
    left = len(other_kinds(run.rows, kinds))
    if left:
        print(f"\n{left:,} more row{'s' if left != 1 else ''} (raw samples): --json has them all")


def warn_measurement_errors(run: RunResult) -> None:
    """Said on stderr whatever the output format, so a script reading JSON still sees it."""
    for error in RunNotes.from_run(run).measurement_errors:
        print(terminal_text(f"warning: {error}"), file=sys.stderr)

"""Every finished run, in an embedded SQLite database (WAL: many readers, concurrent writers).

One table holds each run's :class:`~core.result.RunResult` as JSON plus the columns the history
filters on. ``PRAGMA user_version`` records the schema version; :data:`MIGRATIONS` brings older
databases forward. Runs travel between boxes as JSON files ({"format": "gpulab-runs", ...}),
validated field by field before anything is written; a pickle is never loaded.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import closing, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import BinaryIO
from urllib.parse import quote

from core.columns import headline
from core.intake import LIMITS, InputRefused, check_containers, is_pickle, json_containers, loads_json, read_json_input
from core.jsonable import json_ready
from core.locks import pid_alive
from core.paths import db_path
from core.result import SCHEMA_VERSION, RunResult, RunSummary, SchemaError, now_iso
from core.rows import upgrade
from core.text import label_problem, quoted, tags_problem
from core.units import MIB, bytes_text, count_text, exact_size_text

EXPORT_FORMAT = "gpulab-runs"
MAX_IMPORT_BYTES = 256 * MIB
DB_VERSION = 2
# How long a write waits for another process's lock before it fails with "database is locked".
BUSY_TIMEOUT_S = 30.0


class StoreError(RuntimeError):
    """The database cannot be opened or written (read-only directory, disk full, locked, newer schema)."""


class ImportRefused(InputRefused):
    """An import file that is not a valid GPU Lab runs file; nothing was written."""


class ExportTooLarge(StoreError):
    """Runs that would make a runs file larger than an import accepts (so it could never come back)."""


def _v1(conn: sqlite3.Connection) -> None:
    statements = """
        CREATE TABLE runs (
            id TEXT PRIMARY KEY,
            experiment TEXT NOT NULL,
            status TEXT NOT NULL,
            device_name TEXT NOT NULL,
            device_kind TEXT NOT NULL,
            started_at TEXT NOT NULL,
            finished_at TEXT,
            name TEXT NOT NULL DEFAULT '',
            tags TEXT NOT NULL DEFAULT '[]',
            imported INTEGER NOT NULL DEFAULT 0,
            owner_pid INTEGER,
            payload TEXT NOT NULL
        );
        CREATE INDEX runs_experiment ON runs(experiment, started_at);
        CREATE INDEX runs_started ON runs(started_at)
    """
    for statement in statements.split(";"):  # not executescript: it would commit our transaction
        conn.execute(statement)


def _v2(conn: sqlite3.Connection) -> None:
    """A summary per run (everything but rows and meta, plus their count and the headline), so the
    history lists runs without decoding them: one 150 MB run made every listing take seconds. They live
    in their own table: a column after the payload would make SQLite walk the payload's overflow pages
    to reach it."""
    conn.execute("CREATE TABLE summaries (id TEXT PRIMARY KEY, summary TEXT NOT NULL)")
    for (run_id,) in conn.execute("SELECT id FROM runs").fetchall():  # one payload in memory at a time
        row = conn.execute(f"SELECT {_STORED_COLUMNS} FROM runs WHERE id = ?", (run_id,)).fetchone()
        conn.execute("INSERT INTO summaries VALUES (?, ?)", (run_id, _summary_json(_summary_of_row(row))))


# MIGRATIONS[n] upgrades a database of version n to n + 1.
MIGRATIONS = {0: _v1, 1: _v2}
# What a summary is rebuilt from when a database has none yet (an older one opened read-only).
_STORED_COLUMNS = (
    "id, experiment, status, device_name, device_kind, started_at, finished_at, name, tags, imported, payload"
)


class RunStore:
    """The run database. ``read_only`` opens an archived database that cannot be written (a read-only
    directory or file): listing, showing, exporting and reporting work, saving raises StoreError."""

    def __init__(self, path: str | os.PathLike | None = None, read_only: bool = False) -> None:
        self.path = Path(path) if path else db_path()
        self.read_only = read_only
        self._summarised = True  # False: an older database opened read-only, summaries come from payloads
        if read_only:
            if not self.path.is_file():
                raise StoreError(f"there is no run database at {self.path}")
        else:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(
                    f"cannot create the data directory {self.path.parent}: {exc.strerror or exc}"
                ) from None
            if not self.writable(self.path):
                raise StoreError(
                    f"the run database {self.path} is read-only (or its directory is): runs cannot be "
                    f"saved; set GPULAB_DATA_DIR or --db to a writable place"
                )
        with self._connect():
            pass  # creates and migrates, so errors surface at start-up

    @staticmethod
    def writable(path: Path) -> bool:
        return os.access(path.parent, os.W_OK) and (not path.exists() or os.access(path, os.W_OK))

    def _open(self) -> sqlite3.Connection:
        if not self.read_only:
            return sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        uri = f"file:{quote(str(self.path.resolve()))}?mode=ro"
        conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        try:
            conn.execute("PRAGMA user_version").fetchone()
            return conn
        except sqlite3.OperationalError:
            conn.close()
            # A WAL database closed cleanly has no -shm file, and a read-only directory (or a full disk)
            # cannot get one: without a -wal file (or with an empty one) nothing is pending, so reading the
            # file as immutable loses nothing.
            wal = Path(f"{self.path}-wal")
            if wal.exists() and wal.stat().st_size > 0:
                raise
            return sqlite3.connect(uri + "&immutable=1", uri=True, isolation_level=None)

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        try:
            conn = self._open()
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the run database {self.path}: {self._problem(exc)}") from None
        try:
            with closing(conn):
                conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
                if self.read_only:
                    conn.execute("PRAGMA query_only = 1")
                    self._check_version(conn)
                else:
                    mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                    if mode.lower() != "wal" and os.access(self.path, os.W_OK):
                        raise StoreError(f"cannot switch {self.path} to WAL mode (got {mode})")
                    self._migrate(conn)
                yield conn
        except sqlite3.Error as exc:
            raise StoreError(self._problem(exc)) from None

    def _problem(self, exc: sqlite3.Error) -> str:
        """What went wrong, in words; a full disk says where to free space."""
        if getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
            return f"no space left on device: free space under {self.path.parent} (run database {self.path}: {exc})"
        return f"run database {self.path}: {exc}"

    def _check_version(self, conn: sqlite3.Connection) -> int:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > DB_VERSION:
            raise StoreError(f"the run database has version {version}, newer than this GPU Lab ({DB_VERSION})")
        self._summarised = version >= 2
        return version

    def _migrate(self, conn: sqlite3.Connection) -> None:
        version = self._check_version(conn)
        while version < DB_VERSION:
            conn.execute("BEGIN IMMEDIATE")
            try:
                if conn.execute("PRAGMA user_version").fetchone()[0] == version:  # another process may have won
                    MIGRATIONS[version](conn)
                    conn.execute(f"PRAGMA user_version = {version + 1}")
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            version = self._check_version(conn)

    # -- writing -----------------------------------------------------------------------------------

    @staticmethod
    def _record(run: RunResult, owner_pid: int | None) -> tuple[tuple, str]:
        """The run's table row and its summary."""
        payload = json.dumps(json_ready(run.to_dict()), allow_nan=False)
        row = (
            run.id,
            run.experiment,
            run.status,
            str(run.device.get("name", "")),
            str(run.device.get("kind", "")),
            run.started_at,
            run.finished_at,
            run.name,
            json.dumps(run.tags),
            int(run.imported),
            owner_pid,
            payload,
        )
        return row, _summary_json(summarize(run, len(payload)))

    _UPSERT = """INSERT INTO runs (id, experiment, status, device_name, device_kind, started_at, finished_at, name,
                                   tags, imported, owner_pid, payload) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)"""

    def _write(self, conn: sqlite3.Connection, run: RunResult, owner_pid: int | None, verb: str) -> int:
        """INSERT OR ``verb`` the run and its summary (inside the caller's transaction); 1 if the run was written."""
        row, summary = self._record(run, owner_pid)
        written = conn.execute(self._UPSERT.replace("INSERT", f"INSERT OR {verb}"), row).rowcount
        if written:
            conn.execute("INSERT OR REPLACE INTO summaries VALUES (?, ?)", (run.id, summary))
        return written

    def save(self, run: RunResult, owner_pid: int | None = None) -> None:
        """Insert or replace a run (a "running" row is replaced by its final result)."""
        with self._transaction() as conn:
            self._write(conn, run, owner_pid, "REPLACE")

    def delete(self, ids: Iterable[str]) -> int:
        ids = list(ids)
        if not ids:
            return 0
        marks = ",".join("?" * len(ids))
        with self._transaction() as conn:
            conn.execute(f"DELETE FROM summaries WHERE id IN ({marks})", ids)
            return conn.execute(f"DELETE FROM runs WHERE id IN ({marks})", ids).rowcount

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._connect() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:  # SQLite has rolled back by itself after some errors (a full disk)
                    conn.execute("ROLLBACK")
                raise

    def relabel(self, run_id: str, *, name: str | None = None, tags: list[str] | None = None) -> RunResult:
        """Rename or re-tag a run; ValueError (naming the rule) for a label the lab does not take."""
        tags = None if tags is None else [t.strip() for t in tags if t.strip()]
        problem = (name is not None and label_problem(name, "name")) or (tags is not None and tags_problem(tags))
        if problem:
            raise ValueError(problem)
        run = self.get(run_id)
        if name is not None:
            run.name = name
        if tags is not None:
            run.tags = tags
        self.save(run)
        return run

    def mark_interrupted(self) -> int:
        """Runs left "running" by a process that no longer exists become "interrupted"."""
        with self._connect() as conn:
            rows = conn.execute("SELECT id, owner_pid FROM runs WHERE status = 'running'").fetchall()
        count = 0
        for run_id, pid in rows:
            if pid == os.getpid() or (pid and pid_alive(pid)):
                continue  # still being run by a live process
            run = self.get(run_id)
            self.save(interrupted(run, f"the GPU Lab process that ran it (pid {pid}) stopped before the run finished"))
            count += 1
        return count

    # -- reading -----------------------------------------------------------------------------------

    def get(self, run_id: str) -> RunResult:
        with self._connect() as conn:
            row = conn.execute("SELECT payload FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            raise KeyError(f"no run with id {run_id!r}")
        return read_run(json.loads(row[0]))

    def find(self, prefix: str) -> RunResult:
        """A run by id or unique id prefix (as the CLI prints short ids)."""
        with self._connect() as conn:
            rows = conn.execute(
                "SELECT id FROM runs WHERE id LIKE ? ESCAPE '\\'", (_like_escape(prefix) + "%",)
            ).fetchall()
        if not rows:
            raise KeyError(f"no run with id {prefix!r}")
        if len(rows) > 1:
            raise KeyError(f"id prefix {prefix!r} matches {len(rows)} runs; give more characters")
        return self.get(rows[0][0])

    def list(
        self,
        *,
        experiment: str | None = None,
        device: str | None = None,
        status: str | None = None,
        since: str | None = None,
        until: str | None = None,
        limit: int | None = None,
    ) -> list[RunResult]:
        """Whole runs (rows included) newest first; ``device`` matches part of the device name; dates are
        ISO prefixes. To list runs, :meth:`summaries` reads far less."""
        where, args = self._where(experiment, device, status, since, until)
        sql = f"SELECT payload FROM runs{where} ORDER BY started_at DESC" + (" LIMIT ?" if limit else "")
        with self._connect() as conn:
            return [read_run(json.loads(p)) for (p,) in conn.execute(sql, args + ([int(limit)] if limit else []))]

    @staticmethod
    def _where(experiment, device, status, since, until) -> tuple[str, list]:
        where, args = [], []
        for clause, value in (
            ("experiment = ?", experiment),
            ("device_name LIKE ? ESCAPE '\\'", device),
            ("status = ?", status),
            ("started_at >= ?", since),
            ("started_at < ?", until),
        ):
            if value:
                where.append(clause)
                args.append(f"%{_like_escape(value)}%" if "LIKE" in clause else value)
        return (f" WHERE {' AND '.join(where)}" if where else ""), args

    def summaries(
        self,
        *,
        experiment: str | None = None,
        device: str | None = None,
        status: str | None = None,
        since: str | None = None,
        until: str | None = None,
        limit: int | None = None,
    ) -> list[RunSummary]:
        """What the history lists, newest first, without reading any run's rows (same filters as :meth:`list`)."""
        where, args = self._where(experiment, device, status, since, until)
        if self._summarised:
            sql = f"SELECT s.summary FROM runs JOIN summaries s USING (id){where} ORDER BY started_at DESC"
        else:
            sql = f"SELECT {_STORED_COLUMNS} FROM runs{where} ORDER BY started_at DESC"
        sql += " LIMIT ?" if limit else ""
        with self._connect() as conn:
            rows = conn.execute(sql, args + ([int(limit)] if limit else [])).fetchall()
        if self._summarised:
            return [RunSummary.from_dict(json.loads(text)) for (text,) in rows]
        return [_summary_of_row(row) for row in rows]

    def count(self) -> int:
        with self._connect() as conn:
            return conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0]

    def frame(self, **filters):
        """One line per run (no rows): what the history table shows."""
        import pandas as pd

        return pd.DataFrame(
            [
                {
                    "id": r.id,
                    "experiment": r.experiment,
                    "device": r.device_name,
                    "status": r.status,
                    "started_at": r.started_at,
                    "duration_s": r.duration_s,
                    "name": r.name,
                    "tags": ", ".join(r.tags),
                    "imported": r.imported,
                    "rows": r.row_count,
                    "error": r.error or "",
                }
                for r in self.summaries(**filters)
            ],
            columns=[
                "id",
                "experiment",
                "device",
                "status",
                "started_at",
                "duration_s",
                "name",
                "tags",
                "imported",
                "rows",
                "error",
            ],
        )

    # -- exchange ----------------------------------------------------------------------------------

    def export_data(self, ids: Iterable[str] | None = None) -> dict:
        """The runs as a runs file object; a run still 'running' goes out as 'interrupted' (a file holds
        finished runs only, so what was measured so far can still be imported elsewhere)."""
        runs = [self.get(i) for i in ids] if ids is not None else list(reversed(self.list()))
        runs = [
            interrupted(r, "it was still running when it was exported") if r.status == "running" else r for r in runs
        ]
        return {
            "format": EXPORT_FORMAT,
            "schema_version": SCHEMA_VERSION,
            "exported_at": now_iso(),
            "runs": [json_ready(r.to_dict()) for r in runs],
        }

    def export_json(self, ids: Iterable[str] | None = None) -> str:
        """Compact JSON, refused (:class:`ExportTooLarge`) past what an import accepts."""
        data = self.export_data(ids)
        text = json.dumps(data, allow_nan=False, ensure_ascii=False, separators=(",", ":"))
        size = len(text.encode("utf-8"))
        if size > MAX_IMPORT_BYTES:
            count = len(data["runs"])
            raise ExportTooLarge(
                f"{count} run(s) make a {bytes_text(size)} runs file, larger than the "
                f"{exact_size_text(MAX_IMPORT_BYTES)} import limit, so it could not be imported back; "
                + (
                    "export fewer runs at a time (runs export ID …)"
                    if count > 1
                    else "this run alone is too large to move as a runs file"
                )
            )
        return text

    def import_bytes(self, raw: bytes) -> tuple[int, int]:
        """Validate a whole runs file, then add its runs in one transaction: (added, already present)."""
        runs = parse_runs_file(raw)
        added = 0
        with self._transaction() as conn:
            for run in runs:
                run.imported = True
                added += self._write(conn, run, None, "IGNORE")
        return added, len(runs) - added

    def import_file(self, source: str | os.PathLike | BinaryIO) -> tuple[int, int]:
        """Import a runs file from a path (a device or a pipe too) or an open binary stream (an upload).

        The bytes are counted as they are read, so a file that claims size 0 (``/dev/zero``) stops
        at the limit; a gzip file is undone under the same limit, its JSON objects and lists counted as it
        is inflated (``runs_file_containers``), so a small file of millions of ``{}`` is refused unread.
        """
        try:
            raw = read_json_input(source, MAX_IMPORT_BYTES, LIMITS.runs_file_containers, "runs file")
        except InputRefused as exc:
            raise ImportRefused(str(exc)) from None
        return self.import_bytes(raw)


def parse_runs_file(raw: bytes) -> list[RunResult]:
    """Decode and validate a runs file (or a single run as printed by ``--json``); never unpickle.

    All or nothing: the first problem refuses the whole file, naming the run and the field.
    """
    if len(raw) > MAX_IMPORT_BYTES:
        raise ImportRefused(f"the runs file is larger than the {exact_size_text(MAX_IMPORT_BYTES)} limit")
    if is_pickle(raw):
        raise ImportRefused(
            "this is a Python pickle; GPU Lab never loads pickles — "
            "export runs with `python -m core runs export` instead"
        )
    try:
        check_containers(json_containers(raw), LIMITS.runs_file_containers, "runs file")  # before any is made
    except InputRefused as exc:
        raise ImportRefused(str(exc)) from None
    try:
        data = loads_json(raw, what="runs file")
    except InputRefused as exc:
        raise ImportRefused(f"not a GPU Lab runs file: {exc}") from None
    if isinstance(data, dict) and "format" in data:
        if data.get("format") != EXPORT_FORMAT:
            raise ImportRefused(f"format {quoted(data.get('format'))} is not {EXPORT_FORMAT!r}")
        version = data.get("schema_version")
        if isinstance(version, bool) or version != SCHEMA_VERSION:
            raise ImportRefused(f"runs file schema_version {quoted(version)} is not {SCHEMA_VERSION}")
        items = data.get("runs")
        if not isinstance(items, list):
            raise ImportRefused("'runs' must be a list")
        if len(items) > LIMITS.runs_per_file:
            raise ImportRefused(f"{len(items):,} runs exceed the {LIMITS.runs_per_file:,}-run limit")
    elif isinstance(data, dict) and "experiment" in data:
        items = [data]
    else:
        raise ImportRefused(f"not a GPU Lab runs file: expected an object with format {EXPORT_FORMAT!r}")
    runs = []
    seen: dict[str, int] = {}
    for i, item in enumerate(items):
        where = f"run {i + 1} of {len(items)}"
        try:
            run = read_run(item)
        except (SchemaError, TypeError) as exc:
            raise ImportRefused(f"{where}: {exc}") from None
        if run.status == "running":
            raise ImportRefused(f"{where} is still 'running'; only finished runs can be imported")
        problem = label_problem(run.name, "name") or tags_problem(run.tags) or _unstorable(run)
        if problem:
            raise ImportRefused(f"{where}: {problem}")
        if run.id in seen:
            raise ImportRefused(
                f"{where} has the same id as run {seen[run.id] + 1} ({run.id}); a runs file holds each run once"
            )
        seen[run.id] = i
        runs.append(run)
    return runs


def read_run(data: object) -> RunResult:
    """A run as stored or exported, validated, with what an earlier version did not store filled in
    (:func:`core.rows.upgrade`): the one way a run is read back."""
    return upgrade(RunResult.from_dict(data))


def summarize(run: RunResult, payload_bytes: int) -> RunSummary:
    """The run's summary; the headline is left empty while it runs (its rows are not final)."""
    text = ""
    if run.status != "running":
        try:
            text = headline(run.rows, run.device.get("kind") == "cuda", run.experiment)
        except Exception:  # noqa: BLE001 - a headline is a convenience: odd rows (or no pandas) must not stop a save
            text = ""
    return RunSummary.of(run, payload_bytes, text)


def _summary_json(summary: RunSummary) -> str:
    return json.dumps(json_ready(summary.to_dict()), allow_nan=False)


def _summary_of_row(row: tuple) -> RunSummary:
    """A stored run's summary from its table row; a run that no longer validates still lists, saying so."""
    run_id, experiment, status, device_name, device_kind, started_at, finished_at, name, tags, imported, payload = row
    try:
        return summarize(RunResult.from_dict(json.loads(payload)), len(payload))
    except (ValueError, TypeError, RecursionError) as exc:  # SchemaError and JSON errors are ValueErrors
        return RunSummary(
            id=run_id,
            experiment=experiment,
            status=status,
            started_at=started_at,
            finished_at=finished_at,
            name=str(name),
            tags=[],
            imported=bool(imported),
            config={},
            device={"kind": device_kind, "name": device_name},
            versions={},
            error=f"this stored run does not follow the result schema ({str(exc)[:200]}); "
            f"delete it with `python -m core runs delete {run_id}`",
            row_count=0,
            headline="",
            payload_bytes=len(payload),
        )


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def interrupted(run: RunResult, why: str) -> RunResult:
    """The run as 'interrupted' (a copy): a run that will never finish, with the rows it recorded."""
    return replace(
        run,
        status="interrupted",
        error=f"{why}; {count_text(len(run.rows), 'row')} {'was' if len(run.rows) == 1 else 'were'} recorded",
        finished_at=None,
    )


def _unstorable(run: RunResult) -> str | None:
    """What passes the schema check but would break the store or the history table."""
    try:
        _ = run.duration_s
    except TypeError:
        return "started_at and finished_at must both have a time zone or both lack one"
    try:
        json.dumps(run.to_dict(), ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return "it contains text that is not valid Unicode (an unpaired surrogate escape)"
    return None

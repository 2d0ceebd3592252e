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
from collections.abc import Iterable, Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import BinaryIO
from urllib.parse import quote

from core.columns import headline
from core.errors import InputRefused
from core.intake import check_containers, is_pickle, json_containers, loads_json, read_json_input
from core.jsonable import json_ready
from core.limits import LIMITS
from core.locks import pid_alive
from core.paths import db_path
from core.result import SCHEMA_VERSION, STATUSES, RunResult, RunSummary, SchemaError, now_iso
from core.rows import upgrade
from core.rows.shapes import run_problem
from core.text import label_problem, quoted, tags_problem
from core.units import MIB, bytes_text, count_text, exact_size_text

EXPORT_FORMAT = "gpulab-runs"
MAX_IMPORT_BYTES = 256 * MIB
DB_VERSION = 3
# How long a write waits for another process's lock before it fails with "database is locked".
BUSY_TIMEOUT_S = 30.0


class StoreError(RuntimeError):
    """The database cannot be opened or written (read-only directory, disk full, locked, newer schema)."""


class ImportRefused(InputRefused):
    """An import file that is not a valid GPU Lab runs file; nothing was written."""


class ExportTooLarge(StoreError):
    """Runs that would make a runs file larger than an import accepts (so it could never come back)."""


class DamagedRun(StoreError):
    """A stored run that cannot be read back (its JSON cut or garbled, or not what its experiment's views read):
    named by its id with what is wrong, so one bad row is a sentence, never a traceback that takes down every
    list, page and command. ``runs check`` lists such runs and moves them aside."""

    def __init__(self, run_id: str, problem: str) -> None:
        self.run_id, self.problem = run_id, problem
        super().__init__(
            f"stored run {run_id} is damaged: {problem}; `python -m core runs check` lists the damaged runs and "
            f"`runs check --quarantine` moves them aside"
        )


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


def _v3(conn: sqlite3.Connection) -> None:
    """Where ``runs check --quarantine`` moves a damaged run: its row as it was (the payload's text, its summary)
    with what is wrong and when, out of every list and view but not lost."""
    conn.execute(
        "CREATE TABLE quarantine (id, experiment, started_at, problem TEXT NOT NULL, quarantined_at TEXT NOT NULL, "
        "payload, summary)"
    )


# MIGRATIONS[n] upgrades a database of version n to n + 1.
MIGRATIONS = {0: _v1, 1: _v2, 2: _v3}
# What a summary is rebuilt from when a database has none yet (an older one opened read-only).
_LISTED_COLUMNS = "id, experiment, status, device_name, device_kind, started_at, finished_at, name, tags, imported"
_STORED_COLUMNS = f"{_LISTED_COLUMNS}, payload"


class RunStore:
    """The run database. ``read_only`` opens an archived database that cannot be written (a read-only
    directory or file): listing, showing, exporting and reporting work, saving raises StoreError."""

    def __init__(self, path: str | os.PathLike | None = None, read_only: bool = False) -> None:
        self.path = Path(path) if path else db_path()
        self.read_only = read_only
        self._version = DB_VERSION  # below 2: an older database opened read-only, summaries come from payloads
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
        self._version = version
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
            str(run.device_info.name),
            str(run.device_info.kind),
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
        """Delete runs by exact id, stored or moved aside by ``runs check --quarantine``: how many were."""
        ids = list(ids)
        if not ids:
            return 0
        marks = ",".join("?" * len(ids))
        with self._transaction() as conn:
            conn.execute(f"DELETE FROM summaries WHERE id IN ({marks})", ids)
            removed = conn.execute(f"DELETE FROM runs WHERE id IN ({marks})", ids).rowcount
            if self._version >= 3:
                removed += conn.execute(f"DELETE FROM quarantine WHERE id IN ({marks})", ids).rowcount
            return removed

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
        """Runs left "running" by a process that no longer exists become "interrupted"; a damaged one (nothing it
        recorded can be read) is marked so in its row and listed as damaged, for ``runs check``."""
        with self._connect() as conn:
            rows = conn.execute("SELECT id, owner_pid FROM runs WHERE status = 'running'").fetchall()
        count = 0
        for run_id, pid in rows:
            if pid == os.getpid() or (isinstance(pid, int) and pid > 0 and pid_alive(pid)):
                continue  # still being run by a live process
            try:
                run = self.get(run_id)
            except DamagedRun as exc:
                self._mark_damaged(run_id, exc.problem)
                continue
            self.save(interrupted(run, f"the GPU Lab process that ran it (pid {pid}) stopped before the run finished"))
            count += 1
        return count

    def _mark_damaged(self, run_id: str, problem: str) -> None:
        """A damaged run left "running": "interrupted" in its row, and a summary that lists it as damaged."""
        with self._transaction() as conn:
            conn.execute("UPDATE runs SET status = 'interrupted' WHERE id = ?", (run_id,))
            row = conn.execute(f"SELECT {_LISTED_COLUMNS} FROM runs WHERE id = ?", (run_id,)).fetchone()
            summary = _summary_json(_damaged_summary(row, problem))
            conn.execute("INSERT OR REPLACE INTO summaries VALUES (?, ?)", (run_id, summary))

    # -- reading -----------------------------------------------------------------------------------

    def get(self, run_id: str) -> RunResult:
        """The run with this exact id: KeyError when there is none, :class:`DamagedRun` when it cannot be read."""
        with self._connect() as conn:
            row = conn.execute("SELECT payload FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            raise KeyError(f"no run with id {quoted(run_id)}")
        return _decode(run_id, row[0])

    def resolve(self, given: str) -> str:
        """The id a user means: the run with exactly this id, else the one run whose id starts with it (as the CLI
        prints short ids). Letters keep their case, and a prefix that several runs share is refused with them named,
        so an imported run whose id extends (or differs only in case from) another's never hides it."""
        with self._connect() as conn:
            if conn.execute("SELECT 1 FROM runs WHERE id = ?", (given,)).fetchone():
                return given
            if not (given.isascii() and given.isalnum()):  # an id is letters and digits: nothing else can match
                raise KeyError(f"no run with id {quoted(given)}")
            pattern = (given + "*",)
            count = conn.execute("SELECT COUNT(*) FROM runs WHERE id GLOB ?", pattern).fetchone()[0]
            ids = [r[0] for r in conn.execute("SELECT id FROM runs WHERE id GLOB ? ORDER BY id LIMIT 3", pattern)]
        if not count:
            raise KeyError(f"no run with id {quoted(given)}")
        if count > 1:
            named = ", ".join(ids) + (", …" if count > len(ids) else "")
            raise KeyError(f"id prefix {quoted(given)} matches {count:,} runs ({named}); give more characters")
        return ids[0]

    def find(self, given: str) -> RunResult:
        """A run by its id or a unique prefix of it (:meth:`resolve`)."""
        return self.get(self.resolve(given))

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
        """Whole runs (rows included) newest first, a damaged one left out; ``device`` matches part of the device
        name; dates are ISO prefixes. To list runs, :meth:`summaries` reads far less."""
        where, args = self._where(experiment, device, status, since, until)
        sql = f"SELECT id, payload FROM runs{where} ORDER BY started_at DESC" + (" LIMIT ?" if limit else "")
        runs = []
        with self._connect() as conn:
            for run_id, payload in conn.execute(sql, args + ([int(limit)] if limit else [])):
                try:
                    runs.append(_decode(run_id, payload))
                except DamagedRun:
                    continue  # listed by summaries() and runs check, never raised into a view
        return runs

    @staticmethod
    def _where(experiment, device, status, since, until) -> tuple[str, list]:
        """The SQL of the filters; ``experiment`` and ``status`` may each be several (any of them)."""
        where, args = [], []
        for column, value in (("experiment", experiment), ("status", status)):
            values = [value] if isinstance(value, str) else list(value or ())
            if values:
                where.append(f"{column} IN ({','.join('?' * len(values))})")
                args += values
        for clause, value in (
            ("device_name LIKE ? ESCAPE '\\'", device),
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
        experiment: str | Sequence[str] | None = None,
        device: str | None = None,
        status: str | Sequence[str] | None = None,
        since: str | None = None,
        until: str | None = None,
        limit: int | None = None,
    ) -> list[RunSummary]:
        """What the history lists, newest first, without reading any run's rows (same filters as :meth:`list`).
        Every stored run is listed: one whose summary is missing or garbled is listed from its table row, marked
        damaged."""
        where, args = self._where(experiment, device, status, since, until)
        summarised = self._version >= 2
        joined = " LEFT JOIN summaries s USING (id)" if summarised else ""
        sql = f"SELECT id, {'s.summary' if summarised else 'NULL'} FROM runs{joined}{where} ORDER BY started_at DESC"
        sql += " LIMIT ?" if limit else ""
        with self._connect() as conn:
            rows = conn.execute(sql, args + ([int(limit)] if limit else [])).fetchall()
        # Where a summary is missing (an older database read-only) or garbled, it is made from the run: one bad row
        # must not empty the history.
        return [(summarised and _stored_summary(*row)) or self._summary_from_run(row[0]) for row in rows]

    def _summary_from_run(self, run_id: str) -> RunSummary:
        """A run's summary made from its stored run, or from its table row (marked damaged) when that cannot be
        read."""
        with self._connect() as conn:
            row = conn.execute(f"SELECT {_STORED_COLUMNS} FROM runs WHERE id = ?", (run_id,)).fetchone()
        return _summary_of_row(row)

    def count(self) -> int:
        with self._connect() as conn:
            return conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0]

    def experiments(self) -> list[str]:
        """The experiments of the stored runs, each once (from the index: no run is read)."""
        with self._connect() as conn:
            return [str(e) for (e,) in conn.execute("SELECT DISTINCT experiment FROM runs ORDER BY experiment")]

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

    def export_data(self, ids: Iterable[str] | None = None, left_out: list[DamagedRun] | None = None) -> dict:
        """The runs as a runs file object; a run still 'running' goes out as 'interrupted' (a file holds
        finished runs only, so what was measured so far can still be imported elsewhere). Every run by default, a
        damaged one left out and added to ``left_out`` (a run asked for by id that is damaged raises
        :class:`DamagedRun`)."""
        if ids is not None:
            runs = [self.get(i) for i in ids]
        else:
            runs = []
            with self._connect() as conn:
                order = conn.execute("SELECT id FROM runs ORDER BY started_at").fetchall()
            for (run_id,) in order:  # one payload in memory at a time while it is read
                try:
                    runs.append(self.get(run_id))
                except DamagedRun as exc:
                    if left_out is not None:
                        left_out.append(exc)
                except KeyError:
                    continue  # deleted since the ids were read
        runs = [
            interrupted(r, "it was still running when it was exported") if r.status == "running" else r for r in runs
        ]
        return {
            "format": EXPORT_FORMAT,
            "schema_version": SCHEMA_VERSION,
            "exported_at": now_iso(),
            "runs": [json_ready(r.to_dict()) for r in runs],
        }

    def export_json(self, ids: Iterable[str] | None = None, left_out: list[DamagedRun] | None = None) -> str:
        """Compact JSON, refused (:class:`ExportTooLarge`) past what an import accepts (``left_out``: as
        :meth:`export_data`)."""
        data = self.export_data(ids, left_out)
        text = json.dumps(data, allow_nan=False, ensure_ascii=False, separators=(",", ":"))
        size = len(text.encode("utf-8"))
        if size > MAX_IMPORT_BYTES:
            count = len(data["runs"])
            raise ExportTooLarge(
                f"{count_text(count, 'run')} make a {bytes_text(size)} runs file, larger than the "
                f"{exact_size_text(MAX_IMPORT_BYTES)} import limit, so it could not be imported back; "
                + (
                    "export fewer runs at a time (runs export ID …)"
                    if count > 1
                    else "this run alone is too large to move as a runs file"
                )
            )
        return text

    # -- damage ------------------------------------------------------------------------------------

    def check(self) -> Check:
        """Every stored run read back, one at a time: the runs that cannot be (:class:`DamagedRun`), the runs whose
        summary cannot, and what an earlier check moved aside."""
        with self._connect() as conn:
            ids = [r[0] for r in conn.execute("SELECT id FROM runs ORDER BY started_at")]
        damaged, summaries = [], []
        for run_id in ids:
            with self._connect() as conn:
                row = conn.execute(
                    "SELECT payload, s.summary FROM runs LEFT JOIN summaries s USING (id) WHERE id = ?"
                    if self._version >= 2
                    else "SELECT payload, '' FROM runs WHERE id = ?",
                    (run_id,),
                ).fetchone()
            if row is None:
                continue  # deleted meanwhile
            try:
                _decode(run_id, row[0])
            except DamagedRun as exc:
                damaged.append(exc)
                continue
            if self._version >= 2 and _stored_summary(run_id, row[1]) is None:
                summaries.append(run_id)
        return Check(damaged=damaged, summaries=summaries, quarantined=self.quarantined())

    def quarantined(self) -> list[tuple[str, str, str]]:
        """What ``runs check --quarantine`` moved aside: (id, problem, when), oldest first."""
        if self._version < 3:
            return []
        with self._connect() as conn:
            rows = conn.execute("SELECT id, problem, quarantined_at FROM quarantine ORDER BY rowid").fetchall()
        return [(str(i), str(p), str(t)) for i, p, t in rows]

    def quarantine(self, found: Check) -> None:
        """Move ``found``'s damaged runs aside (their row as it was, with the problem, in the quarantine table) and
        rebuild the summaries it found damaged from their runs; one transaction, so a crash leaves the store as it
        was."""
        with self._transaction() as conn:
            for damage in found.damaged:
                conn.execute(
                    "INSERT INTO quarantine SELECT id, experiment, started_at, ?, ?, payload, "
                    "(SELECT summary FROM summaries WHERE id = runs.id) FROM runs WHERE id = ?",
                    (damage.problem, now_iso(), damage.run_id),
                )
                conn.execute("DELETE FROM summaries WHERE id = ?", (damage.run_id,))
                conn.execute("DELETE FROM runs WHERE id = ?", (damage.run_id,))
            for run_id in found.summaries:
                row = conn.execute("SELECT payload FROM runs WHERE id = ?", (run_id,)).fetchone()
                if row is not None:
                    summary = _summary_json(summarize(_decode(run_id, row[0]), len(row[0])))
                    conn.execute("INSERT OR REPLACE INTO summaries VALUES (?, ?)", (run_id, summary))

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


@dataclass(frozen=True)
class Check:
    """What ``runs check`` found: the runs that cannot be read, the runs whose summary cannot (their run can: the
    summary is rebuilt), and what was moved aside before, as (id, problem, when)."""

    damaged: list[DamagedRun]
    summaries: list[str]
    quarantined: list[tuple[str, str, str]]


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
    """A run as stored or exported, validated (the result schema, then what its experiment's views read:
    :mod:`core.rows.shapes`), with what an earlier version did not store filled in (:func:`core.rows.upgrade`): the
    one way a run is read back."""
    run = RunResult.from_dict(data)
    problem = run_problem(run)
    if problem:
        raise SchemaError(problem)
    return upgrade(run)


def summarize(run: RunResult, payload_bytes: int) -> RunSummary:
    """The run's summary; the headline is left empty while it runs (its rows are not final)."""
    text = ""
    if run.status != "running":
        try:
            text = headline(run.rows, run.device_info.is_cuda, run.experiment)
        except Exception:  # noqa: BLE001 - a headline is a convenience: odd rows (or no pandas) must not stop a save
            text = ""
    return RunSummary.of(run, payload_bytes, text)


def _summary_json(summary: RunSummary) -> str:
    return json.dumps(json_ready(summary.to_dict()), allow_nan=False)


def _summary_of_row(row: tuple) -> RunSummary:
    """A stored run's summary from its table row (the migration to summaries); a run that cannot be read still
    lists, marked damaged."""
    payload = row[-1]
    try:
        return summarize(_decode(row[0], payload), len(payload))
    except DamagedRun as exc:
        return _damaged_summary(row[:-1], exc.problem, _size(payload))


def _stored_summary(run_id: str, text: object) -> RunSummary | None:
    """A run's stored summary, or None where it is missing or garbled."""
    try:
        if isinstance(text, str):
            return replace(RunSummary.from_dict(json.loads(text)), id=run_id)
    except (ValueError, TypeError, RecursionError):
        pass
    return None


def _damaged_summary(columns: tuple, problem: str, payload_bytes: int = 0) -> RunSummary:
    """What the table row of a damaged run still says, each column taken only when it holds what it should."""
    run_id, experiment, status, device_name, device_kind, started_at, _, name, tags, imported = columns[:10]
    try:
        tag_list = json.loads(tags)
    except (ValueError, TypeError, RecursionError):
        tag_list = []
    return RunSummary(
        id=str(run_id),
        experiment=str(experiment),
        status=status if status in STATUSES else "error",
        started_at=str(started_at or ""),
        finished_at=None,
        name=str(name or ""),
        tags=[t for t in tag_list if isinstance(t, str)] if isinstance(tag_list, list) else [],
        imported=bool(imported),
        config={},
        device={"kind": str(device_kind or ""), "name": str(device_name or "")},
        versions={},
        error=f"damaged: {problem}",
        row_count=0,
        headline="",
        payload_bytes=payload_bytes,
        damaged=problem,
    )


def _size(payload: object) -> int:
    return len(payload) if isinstance(payload, (str, bytes)) else 0


def _decode(run_id: str, payload: object) -> RunResult:
    """A stored payload read back (:func:`read_run`), or :class:`DamagedRun` saying what is wrong with it."""
    if not isinstance(payload, (str, bytes)):
        raise DamagedRun(run_id, f"its stored JSON is a {type(payload).__name__}, not text")
    try:
        data = json.loads(payload)
    except json.JSONDecodeError as exc:
        at = f"{exc.msg.removesuffix(' at').lower()} at character {exc.pos:,} of {len(payload):,}"
        raise DamagedRun(run_id, f"its stored JSON is cut short or garbled: {at}") from None
    except (ValueError, RecursionError) as exc:
        raise DamagedRun(run_id, f"its stored JSON cannot be read ({str(exc)[:200]})") from None
    try:
        run = read_run(data)
    except (SchemaError, TypeError, RecursionError) as exc:
        raise DamagedRun(run_id, str(exc)[:500]) from None
    if run.id != run_id:
        raise DamagedRun(run_id, f"its stored JSON is another run's ({quoted(run.id, 70)})")
    return run


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

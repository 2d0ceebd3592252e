"""A full disk: an import that runs out of space leaves nothing behind, the store stays readable, and a write
that fails says where to free space (exit 2) instead of a traceback."""

import errno
import json
import os
import pickle
import resource
import signal
import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import ROOT
from tests.core.workload import snapshots


def snapshot(tmp_path):
    from core.workload.snapshot.reader import read_snapshot

    path = tmp_path / "s.pickle"
    path.write_bytes(pickle.dumps(snapshots.hand_snapshot()))
    return read_snapshot(path)


def stored_run():
    from core.result import RunResult

    return RunResult(
        experiment="probe",
        config={},
        device={"kind": "cpu", "name": "CPU"},
        versions={},
        started_at="2026-01-01T00:00:00",
        finished_at="2026-01-01T00:00:01",
        status="ok",
        rows=[{"x": 1}],
        meta={},
    )


def test_an_import_that_fills_the_disk_leaves_no_partial_folder_and_runs_list_still_works(
    data_dir, tmp_path, monkeypatch, capsys
):
    from core.cli import main
    from core.errors import ConfigError
    from core.store import RunStore
    from core.workload.snapshot import detail

    RunStore().save(stored_run())
    real_save, written = np.save, []

    def filling(file, arr, *args, **kwargs):
        if len(written) == 2:  # the third column does not fit
            with open(file, "wb") as fh:
                fh.write(b"\0" * 100)  # half written when the disk fills
            raise OSError(errno.ENOSPC, "No space left on device")
        written.append(file)
        real_save(file, arr, *args, **kwargs)

    monkeypatch.setattr(np, "save", filling)
    with pytest.raises(ConfigError, match=r"no space left on device: free space under .*snapshots"):
        detail.save(snapshot(tmp_path), 0)
    assert written and list(detail.root().iterdir()) == []  # no .ID.partial, no folder

    capsys.readouterr()
    assert main(["runs", "list"]) == 0
    assert "probe" in capsys.readouterr().out


def test_partial_folders_of_dead_writers_are_pruned_by_the_next_write(data_dir, tmp_path):
    from core.workload.snapshot import detail

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(gone.stdout)
    root = detail.root()
    dead = root / f".{'a' * 32}.{dead_pid}.partial"
    legacy = root / f".{'b' * 32}.partial"  # named no writer: stale after an hour
    recent_legacy = root / f".{'c' * 32}.partial"
    live = root / f".{'d' * 32}.{os.getppid()}.partial"  # a writer that is still alive
    for folder in (dead, legacy, recent_legacy, live):
        folder.mkdir(parents=True)
        (folder / "action.npy").write_bytes(b"\0" * 1000)
    os.utime(legacy, (0, 0))
    detail_id = detail.save(snapshot(tmp_path), 0)
    left = sorted(p.name for p in root.iterdir())
    assert left == sorted([detail_id, recent_legacy.name, live.name])


def test_a_store_write_on_a_full_disk_says_where_to_free_space(data_dir, monkeypatch, capsys):
    from core.cli import main
    from core.store import RunStore, StoreError

    store = RunStore()
    store.save(stored_run())
    real_open = RunStore._open

    def full(self):  # the file may not grow: SQLite answers SQLITE_FULL, as on a full disk
        conn = real_open(self)
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {pages}")
        return conn

    monkeypatch.setattr(RunStore, "_open", full)
    big = stored_run()
    big.id, big.rows = "b" * 32, [{"x": "y" * 100_000}]
    with pytest.raises(StoreError, match=r"^no space left on device: free space under ") as caught:
        store.save(big)
    assert str(data_dir) in str(caught.value)
    export = data_dir.parent / "runs.json"
    export.write_text(json.dumps({"format": "gpulab-runs", "schema_version": 1, "runs": [big.to_dict()]}))
    capsys.readouterr()
    assert main(["runs", "import", str(export)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: no space left on device: free space under ") and "Traceback" not in err
    assert main(["runs", "list"]) == 0  # reading needs no space


def _cli_with_file_size_limit(args, limit_bytes, env):
    """The CLI in a process that may not grow any file past ``limit_bytes``: SQLite's shared-memory index
    (32 KiB) cannot be created, as on a disk without a free block."""

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a killed process
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))

    return subprocess.run(
        [sys.executable, "-m", "core", *args],
        cwd=ROOT,
        env={**env, "PYTHONDONTWRITEBYTECODE": "1"},
        preexec_fn=limit,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_runs_list_works_when_no_file_can_grow(data_dir):
    from core.store import RunStore

    RunStore().save(stored_run())
    db = data_dir / "runs.sqlite"
    assert not (data_dir / "runs.sqlite-shm").exists()  # closed cleanly: the next reader must create it
    env = {k: v for k, v in os.environ.items()}
    done = _cli_with_file_size_limit(["runs", "list"], 4096, env)
    assert done.returncode == 0, done.stderr
    assert "probe" in done.stdout and "disk I/O error" not in done.stderr
    assert db.stat().st_size > 4096  # the database itself is larger than what may be written: it was only read

"""The full-resolution side of an imported snapshot, kept beside the run store.

A stored run holds a few thousand points (what compare, export and the HTML report draw); the page's
zoom, its segment map at any moment and its "who holds memory here" re-read the whole trace from here:
one device's event columns as ``.npy`` arrays (read memory-mapped, never unpickled) and the stacks,
segments and settings as JSON, in ``<data dir>/snapshots/<id>/``. A run names its folder in
``meta["detail_id"]``; the newest :data:`KEEP` folders are kept, older runs still draw their points.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import time
import uuid
from dataclasses import asdict
from pathlib import Path

import numpy as np

from core.errors import ConfigError
from core.locks import pid_alive
from core.paths import data_dir
from core.workload.snapshot.reader import Block, DeviceTrace, Segment, Snapshot

KEEP = 20
COLUMNS = ("action", "addr", "size", "time_us", "site")
_ID = re.compile(r"^[0-9a-f]{32}$")
# A folder being written: ``.<id>.<writer pid>.partial`` (``.<id>.partial`` before the pid was named).
_PARTIAL = re.compile(r"^\.[0-9a-f]{32}(?:\.(\d+))?\.partial$")
STALE_PARTIAL_S = 3600.0  # a partial folder that names no writer is its writer's after this long


def root() -> Path:
    return data_dir() / "snapshots"


def save(snapshot: Snapshot, device: int) -> str:
    """Write one device of a snapshot; returns its id. Older folders beyond :data:`KEEP` are removed.

    All or nothing: a write that fails (a full disk) removes its partial folder, and partial folders of
    writers that died are removed first. A full disk is a :class:`ConfigError` that says where to free space.
    """
    _prune_partials()
    detail_id = uuid.uuid4().hex
    folder = root() / detail_id
    partial = root() / f".{detail_id}.{os.getpid()}.partial"
    try:
        partial.mkdir(parents=True)
        _write(partial, snapshot, device)
        partial.rename(folder)  # whole or absent: a reader never sees half a folder
    except BaseException as exc:
        shutil.rmtree(partial, ignore_errors=True)
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise ConfigError(
                f"no space left on device: free space under {root()} (the full trace of this import "
                f"did not fit; nothing was kept)"
            ) from None
        raise
    _prune()
    return detail_id


def _write(partial: Path, snapshot: Snapshot, device: int) -> None:
    trace = snapshot.traces.get(device)
    for name in COLUMNS:
        np.save(partial / f"{name}.npy", getattr(trace, name) if trace is not None else np.zeros(0, np.int64))
    meta = {
        "device": device,
        "source": snapshot.source,
        "settings": snapshot.settings,
        "malformed": trace.malformed if trace is not None else 0,
        "unknown_actions": trace.unknown_actions if trace is not None else {},
        "sites": [[list(f) for f in stack] for stack in snapshot.sites],
        "segments": [asdict(s) for s in snapshot.segments if s.device == device],
        "devices": snapshot.devices(),
    }
    (partial / "snapshot.json").write_text(json.dumps(meta))


def _prune_partials() -> None:
    """Remove the partial folders of writers that are gone (a crash, a kill, a disk that filled)."""
    try:
        entries = list(root().iterdir())
    except FileNotFoundError:
        return
    for p in entries:
        match = _PARTIAL.match(p.name)
        if not match:
            continue
        pid = int(match.group(1)) if match.group(1) else None
        if pid is not None:
            stale = pid != os.getpid() and not pid_alive(pid)
        else:
            try:
                stale = time.time() - p.stat().st_mtime > STALE_PARTIAL_S
            except FileNotFoundError:
                continue
        if stale:
            shutil.rmtree(p, ignore_errors=True)


class Damaged(Exception):
    """A folder whose files cannot be read back as a trace (cut, garbled or replaced): said in words, the run still
    draws its stored points."""


def exists(detail_id: str | None) -> bool:
    return bool(detail_id) and bool(_ID.match(detail_id)) and (root() / detail_id / "snapshot.json").exists()


def load(detail_id: str) -> Snapshot:
    """The saved device as a :class:`Snapshot` (columns memory-mapped); KeyError if it is gone, :class:`Damaged`
    (saying what) if its files cannot be read back."""
    if not exists(detail_id):
        raise KeyError(f"the full-resolution data of import {detail_id!r} is no longer on this machine")
    folder = root() / detail_id
    try:
        meta = json.loads((folder / "snapshot.json").read_text())
        columns = {name: np.load(folder / f"{name}.npy", mmap_mode="r", allow_pickle=False) for name in COLUMNS}
        lengths = {len(c) for c in columns.values()}
        if len(lengths) > 1 or any(c.ndim != 1 or c.dtype.kind not in "iu" for c in columns.values()):
            raise ValueError("its columns are not one length of whole numbers")
        trace = DeviceTrace(**columns, malformed=meta["malformed"], unknown_actions=meta["unknown_actions"])
        segments = [Segment(**{**s, "blocks": [Block(**b) for b in s["blocks"]]}) for s in meta["segments"]]
        sites = [tuple((f[0], int(f[1]), f[2]) for f in stack) for stack in meta["sites"]]
        device = meta["device"]
        return Snapshot({device: trace}, segments, sites, meta["settings"], meta["source"], meta["devices"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError, RecursionError) as exc:
        raise Damaged(
            f"the full-resolution data of import {detail_id} cannot be read back ({type(exc).__name__}: "
            f"{str(exc)[:200]}): its folder is damaged"
        ) from None


def _prune() -> None:
    folders = sorted((p for p in root().iterdir() if p.is_dir() and _ID.match(p.name)), key=lambda p: p.stat().st_mtime)
    for old in folders[:-KEEP]:
        shutil.rmtree(old, ignore_errors=True)

"""The file an import names: checked to exist when its config is built (the dashboard, the CLI), read in
the worker with the reason a refused file gives turned into the run's bad-input error."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from core.errors import ConfigError
from core.experiment import Progress
from core.intake import InputRefused
from core.units import bytes_text

T = TypeVar("T")


def check_file(path: str, what: str) -> None:
    """The file an import names must exist here (its content is judged in the worker)."""
    if not path:
        raise ConfigError(f"path: name the {what} file to import")
    try:
        exists = os.path.isfile(path)
    except (ValueError, OSError):
        exists = False
    if not exists:
        raise ConfigError(f"path: {path!r} is not a file on this machine")


def read_imported(path: Path, read: Callable[[Path], T], total: int):
    """Yield the first progress step while ``read`` parses the file; return (what it read, the file's size)."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise ConfigError(f"{path.name}: {exc.strerror or exc}") from None
    yield Progress(0, total, f"reading {path.name} ({bytes_text(size)})")
    try:
        return read(path), size
    except InputRefused as exc:
        raise ConfigError(f"{path.name}: {exc}") from None

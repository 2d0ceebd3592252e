"""Where the lab keeps its data: one place so the store, the CLI and the tests agree."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def data_dir() -> Path:
    """``$GPULAB_DATA_DIR``, else ``$XDG_DATA_HOME/gpulab``, else ``~/.local/share/gpulab``."""
    if os.environ.get("GPULAB_DATA_DIR"):
        return Path(os.environ["GPULAB_DATA_DIR"]).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "gpulab"


def db_path() -> Path:
    """The run database: ``$GPULAB_DB`` or ``<data_dir>/runs.sqlite``."""
    if os.environ.get("GPULAB_DB"):
        return Path(os.environ["GPULAB_DB"]).expanduser()
    return data_dir() / "runs.sqlite"


def lock_dir() -> Path:
    """Device locks live with the machine, not the database: two stores, one GPU, still one job at a time."""
    path = Path(os.environ.get("GPULAB_LOCK_DIR") or Path(tempfile.gettempdir()) / f"gpulab-locks-{os.getuid()}")
    path.mkdir(parents=True, exist_ok=True)
    return path


def examples_dir() -> Path:
    """Reference runs recorded on real GPUs and committed with the lab (``scripts/record_reference_runs.py``);
    ``$GPULAB_EXAMPLES_DIR`` points elsewhere."""
    if os.environ.get("GPULAB_EXAMPLES_DIR"):
        return Path(os.environ["GPULAB_EXAMPLES_DIR"]).expanduser()
    return Path(__file__).resolve().parent.parent / "examples"


def example_files() -> list[Path]:
    """The runs files in :func:`examples_dir`, newest name last."""
    folder = examples_dir()
    return sorted(folder.glob("*.json")) if folder.is_dir() else []

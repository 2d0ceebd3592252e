"""Test set-up: every test gets its own data directory (workers inherit it through the environment),
GPU tests skip with a reason on machines without CUDA, and AppTest never sees another test's caches."""
import os
import socket
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(url: str, timeout_s: float, alive=lambda: True, poll_s: float = 0.2) -> bool:
    """Poll a Streamlit server's ``/_stcore/health`` until it answers "ok" (True), the deadline passes
    or ``alive()`` turns False (False). No fixed sleeps in the tests that start servers."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=3) as response:
                if response.read() == b"ok":
                    return True
        except OSError:
            pass
        if not alive() or time.monotonic() > deadline:
            return False
        time.sleep(poll_s)


def _cuda_available() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:  # noqa: BLE001
        return False


def pytest_collection_modifyitems(config, items):
    if _cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU: torch.cuda.is_available() is False on this machine")
    for item in items:
        if item.get_closest_marker("gpu"):
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def data_dir(tmp_path, monkeypatch):
    """A private data directory (run database) and lock directory for each test."""
    path = tmp_path / "gpulab-data"
    monkeypatch.setenv("GPULAB_DATA_DIR", str(path))
    monkeypatch.delenv("GPULAB_DB", raising=False)
    monkeypatch.setenv("GPULAB_LOCK_DIR", str(tmp_path / "locks"))
    return path


@pytest.fixture
def store(data_dir):
    from core.store import RunStore

    return RunStore()


@pytest.fixture
def manager(store):
    from core.jobs import JobManager

    m = JobManager(store=store)
    yield m
    m.shutdown()


@pytest.fixture
def app(data_dir):
    """An AppTest of the whole dashboard with fresh server-wide caches."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    st.cache_resource.clear()
    st.cache_data.clear()
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    yield at
    from pages.common import lab

    try:
        lab.manager().shutdown()
    except Exception:  # noqa: BLE001
        pass
    st.cache_resource.clear()


os.environ.setdefault("GPULAB_DATA_DIR", tempfile.mkdtemp(prefix="gpulab-tests-"))

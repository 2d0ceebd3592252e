"""Test set-up: every test gets its own data directory (workers inherit it through the environment),
GPU tests skip with a reason on machines without CUDA, and AppTest never sees another test's caches."""

import copy
import os
import socket
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def two_node_torchrun(rdzv_id: str, module: str, *args: str) -> list[str]:
    """The command each of two torchrun agents on this machine runs: one process per "node", meeting at a
    c10d rendezvous on a free local port, no restarts, running ``python -m module args``."""
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nnodes",
        "2",
        "--nproc-per-node",
        "1",
        "--rdzv-backend",
        "c10d",
        "--rdzv-endpoint",
        f"127.0.0.1:{free_port()}",
        "--rdzv-id",
        rdzv_id,
        "--max-restarts",
        "0",
        "-m",
        module,
        *args,
    ]


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


def gone(pid: int, timeout_s: float = 10) -> bool:
    """The process has exited (a zombie waiting for a reaper counts as gone: it holds no memory or lock)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


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


# What a GPU box's worker reports for its first GPU, added to the device list where this box has none,
# so the CPU-pinned page tests below run under a GPU box's defaults (cuda:0 selected) everywhere.
FAKE_GPU = {
    "kind": "cuda",
    "index": 0,
    "torch_device": "cuda:0",
    "name": "Test GPU (a GPU box's default device)",
    "label": "cuda:0 — Test GPU (a GPU box's default device)",
    "compute_capability": "9.0",
    "multiprocessors": 132,
    "l2_cache_bytes": 50 * 2**20,
    "total_memory_bytes": 80 * 2**30,
    "free_memory_bytes": 79 * 2**30,
    "bf16_supported": True,
    "spec": None,
    "tf32": {
        "cuda_matmul_allow_tf32": False,
        "cudnn_allow_tf32": True,
        "float32_matmul_precision": "highest",
        "NVIDIA_TF32_OVERRIDE": None,
    },
}


def as_on_a_gpu_box(info: dict) -> dict:
    """The device list as a GPU box reports it: a cuda:0 that is the default (real GPUs are kept as they are)."""
    if any(d.get("kind") == "cuda" for d in info.get("devices", [])):
        return info
    return info | {"devices": [*info.get("devices", []), FAKE_GPU], "default": "cuda:0", "cuda_available": True}


_device_answer: dict[str, dict] = {}


def devices_once() -> dict:
    """This box's device list from a real ``core.worker --info``, asked once per test process and not once per
    page test: a worker's answer costs an import of torch (seconds of CPU), and the box does not change during a
    run. A failed query is not kept (the next test asks again)."""
    from core.workerprocess import query_devices

    if "info" not in _device_answer:
        _device_answer["info"] = query_devices()
    return copy.deepcopy(_device_answer["info"])


@pytest.fixture
def one_device_query(monkeypatch):
    """The dashboard's device list is :func:`devices_once`'s (skipped where Streamlit is not installed: a GPU box
    that runs only the engine's tests)."""
    pytest.importorskip("streamlit")
    pytest.importorskip("plotly")  # every page draws its charts with it
    from pages.common import lab

    monkeypatch.setattr(lab, "query_devices", lambda *a, **k: devices_once())


@pytest.fixture
def app(data_dir, one_device_query):
    """An AppTest of the whole dashboard with fresh server-wide caches."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    from pages.common import lab

    st.cache_resource.clear()
    st.cache_data.clear()
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    yield at
    try:
        lab.manager().shutdown()
    except Exception:  # noqa: BLE001
        pass
    st.cache_resource.clear()


@pytest.fixture
def cpu_app(app, monkeypatch):
    """The dashboard with the sidebar's device pinned to the CPU, under a GPU box's defaults.

    On a GPU box the sidebar starts on cuda:0; a test that expects CPU behaviour (GFLOPS, RSS, "CPU" in
    titles, unsupported TF32) must say so. Here the device list always has a cuda:0 default (a stand-in
    where this box has no GPU), so a test that forgets to pin fails on a CPU box too.
    """
    from pages.common import lab

    real = lab.query_devices
    monkeypatch.setattr(lab, "query_devices", lambda *a, **k: as_on_a_gpu_box(real(*a, **k)))
    app.session_state[lab.DEVICE_KEY] = "cpu"
    return app


@pytest.fixture
def gpu_app(app):
    """The dashboard with the sidebar on cuda:0 (for ``@pytest.mark.gpu`` page tests)."""
    from pages.common import lab

    app.session_state[lab.DEVICE_KEY] = "cuda:0"
    return app


os.environ.setdefault("GPULAB_DATA_DIR", tempfile.mkdtemp(prefix="gpulab-tests-"))


@pytest.fixture
def busy_machine():
    """Two processes spinning on the CPU beside the test (a second doctor, a build), killed at teardown.

    For checks that must hold on a loaded machine: a timing comparison says it cannot decide rather than
    fail, a job still ends with its result. Yields their pids."""
    import subprocess
    import sys

    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        yield [p.pid for p in spinners]
    finally:
        for proc in spinners:
            proc.kill()
        for proc in spinners:
            proc.wait(timeout=30)

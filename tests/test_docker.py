"""The Docker image: its promises read from the Dockerfile everywhere, and where a Docker daemon
answers, the image is built and must pass its health check on ``/_stcore/health``.

``GPULAB_DOCKER_BASE`` picks the base image for the build test (default: the Dockerfile's CUDA
PyTorch image; ``python:3.11-slim-bookworm`` builds the CPU image much faster).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import uuid
from fnmatch import fnmatch
from pathlib import Path

import pytest

from tests.conftest import free_port, wait_healthy

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = (ROOT / "Dockerfile").read_text()
INSTRUCTIONS = [
    line.strip()
    for line in re.sub(r"\\\n", " ", DOCKERFILE).splitlines()
    if line.strip() and not line.lstrip().startswith("#")
]


def instruction(name: str) -> list[str]:
    return [line[len(name) :].strip() for line in INSTRUCTIONS if line.upper().startswith(name + " ")]


def test_base_image_is_a_build_argument_defaulting_to_cuda_pytorch():
    assert INSTRUCTIONS[0].startswith("ARG BASE_IMAGE=pytorch/pytorch:")
    assert re.search(r"cuda\d+\.\d+-cudnn\d+-runtime", INSTRUCTIONS[0])
    assert instruction("FROM") == ["${BASE_IMAGE}"]


def test_torch_is_kept_not_reinstalled():
    runs = " ".join(instruction("RUN"))
    assert "-r requirements.txt -c /tmp/keep-base-torch.txt" in runs
    assert "torch was replaced" in runs  # the build fails if pip swapped the base's torch anyway


def test_runs_as_non_root_exposes_8501_with_health_check():
    users = instruction("USER")
    assert users and users[-1] not in ("root", "0")
    assert instruction("EXPOSE") == ["8501"]
    assert "/_stcore/health" in " ".join(instruction("HEALTHCHECK"))


def test_binds_all_interfaces_only_inside_the_container():
    cmd = " ".join(instruction("CMD"))
    assert "--server.address=0.0.0.0" in cmd and "--server.port=8501" in cmd
    assert "-p 127.0.0.1:8501:8501" in DOCKERFILE  # the documented run command publishes on localhost


def test_dockerignore_keeps_local_data_out():
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".git", "*.sqlite", "**/__pycache__"} <= set(ignored)


def test_the_examples_ship_in_the_image():
    """The files recorded elsewhere that the workload views open with one click are copied into the image: the
    whole tree is, and no ignore rule matches examples/ or any file or folder under it."""
    assert "COPY . ." in INSTRUCTIONS
    patterns = [p.rstrip("/") for p in (ROOT / ".dockerignore").read_text().split() if not p.startswith("#")]
    shipped = [p.relative_to(ROOT) for p in (ROOT / "examples").rglob("*")]
    assert any(p.suffix == ".gz" for p in shipped)
    for rel in shipped:
        prefixes = [Path(*rel.parts[: i + 1]).as_posix() for i in range(len(rel.parts))]
        hits = [(p, x) for p in patterns for x in prefixes if fnmatch(x, p) or fnmatch(x, p.removeprefix("**/"))]
        assert not hits, f"{rel} is dropped from the image by .dockerignore: {hits}"


def _docker_problem() -> str | None:
    if shutil.which("docker") is None:
        return "the docker CLI is not installed"
    try:
        out = subprocess.run(
            ["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True, timeout=20
        )
    except subprocess.TimeoutExpired:
        return "the Docker daemon did not answer within 20 s"
    if out.returncode != 0:
        return f"no Docker daemon answers: {(out.stderr or out.stdout).strip().splitlines()[-1:]}"
    return None


@pytest.mark.slow
def test_image_builds_and_answers_its_health_check():
    problem = _docker_problem()
    if problem:
        pytest.skip(f"Docker image not built: {problem}")
    tag = f"gpulab-test:{uuid.uuid4().hex[:8]}"
    build = ["docker", "build", "-t", tag, "."]
    if os.environ.get("GPULAB_DOCKER_BASE"):
        build[2:2] = ["--build-arg", f"BASE_IMAGE={os.environ['GPULAB_DOCKER_BASE']}"]
    out = subprocess.run(build, cwd=ROOT, capture_output=True, text=True, timeout=1800)
    assert out.returncode == 0, out.stderr[-3000:]
    port = free_port()
    container = subprocess.run(
        ["docker", "run", "-d", "--rm", "-p", f"127.0.0.1:{port}:8501", tag], capture_output=True, text=True, check=True
    ).stdout.strip()
    try:
        if not wait_healthy(f"http://127.0.0.1:{port}", 120, poll_s=1):
            logs = subprocess.run(["docker", "logs", container], capture_output=True, text=True).stderr
            pytest.fail(f"no health answer within 120 s; logs: {logs[-2000:]}")
        uid = subprocess.run(["docker", "exec", container, "id", "-u"], capture_output=True, text=True).stdout
        assert uid.strip() not in ("", "0")
        probe = subprocess.run(
            ["docker", "exec", container, "python", "-m", "core", "probe", "--steps", "1", "--device", "cpu", "--json"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert probe.returncode == 0, probe.stderr[-2000:]  # the worker runs and the store in /data is writable
    finally:
        subprocess.run(["docker", "rm", "-f", container], capture_output=True)
        subprocess.run(["docker", "rmi", "-f", tag], capture_output=True)

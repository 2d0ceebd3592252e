"""Every CUDA call that would otherwise act on the *current* device names its device.

On ``cuda:N`` with N ≥ 1, ``torch.cuda.synchronize()``, ``max_memory_allocated()``, an event's bare
``record()`` … act on cuda:0 unless N is made current. The worker makes N current for the whole job;
this scan makes sure the code does not rely on it either. What it checks, read from torch 2.13's own
sources (``torch/cuda/__init__.py``, ``torch/cuda/memory.py``, ``torch/cuda/streams.py``):

- the functions below take ``device=None`` and then use ``torch.cuda.current_device()``: each call
  passes a device (positionally or ``device=``), and none is aliased (``sync = torch.cuda.synchronize``);
- ``Event.record(stream=None)`` records on ``torch.cuda.current_stream()`` (the current device's):
  a bare ``.record()`` is refused, pass ``torch.cuda.current_stream(device)``;
- ``torch.cuda.is_bf16_supported()`` has no device parameter: it must sit inside
  ``with torch.cuda.device(...)``;
- ``torch.cuda.empty_cache()`` has no device parameter and releases the cache of every device: allowed.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import ROOT

DEVICE_DEFAULTING = frozenset(
    {
        "synchronize",
        "reset_peak_memory_stats",
        "reset_max_memory_allocated",
        "reset_accumulated_memory_stats",
        "max_memory_allocated",
        "memory_allocated",
        "memory_reserved",
        "max_memory_reserved",
        "memory_stats",
        "memory_summary",
        "mem_get_info",
        "current_stream",
        "default_stream",
        "get_device_properties",
        "get_device_name",
        "get_device_capability",
    }
)
NEEDS_DEVICE_CONTEXT = frozenset({"is_bf16_supported"})
SCANNED = (
    "core/experiments",
    "core/measure",
    "core/hardware",
    "core/transformer",
    "core/worker.py",
    "core/checks",
    "core/distributed",
    "core/workload",
)


def _on_cuda(node: ast.expr) -> bool:
    """``torch.cuda.X``, ``self.torch.cuda.X``, ``cuda.X`` or ``torch.cuda.memory.X``."""
    value = node.value if isinstance(node, ast.Attribute) else None
    while isinstance(value, ast.Attribute) and value.attr == "memory":
        value = value.value
    return (isinstance(value, ast.Attribute) and value.attr == "cuda") or (
        isinstance(value, ast.Name) and value.id == "cuda"
    )


def _inside_device_context(node: ast.AST, parents: dict) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.With):
            for item in node.items:
                call = item.context_expr
                if (
                    isinstance(call, ast.Call)
                    and isinstance(call.func, ast.Attribute)
                    and call.func.attr == "device"
                    and _on_cuda(call.func)
                ):
                    return True
    return False


def problems(source: str, filename: str = "<snippet>") -> list[str]:
    """Each call that would act on the current CUDA device instead of a named one, as 'file:line: why'."""
    tree = ast.parse(source)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in DEVICE_DEFAULTING | NEEDS_DEVICE_CONTEXT and _on_cuda(node):
            call = parents.get(node)
            if not (isinstance(call, ast.Call) and call.func is node):
                found.append(
                    f"{filename}:{node.lineno}: torch.cuda.{node.attr} is passed around without its call "
                    f"(an alias hides whether a device is given)"
                )
            elif node.attr in NEEDS_DEVICE_CONTEXT:
                if not _inside_device_context(call, parents):
                    found.append(
                        f"{filename}:{node.lineno}: torch.cuda.{node.attr}() reads the current device: "
                        f"call it inside `with torch.cuda.device(...)`"
                    )
            elif not call.args and not any(k.arg == "device" for k in call.keywords):
                found.append(
                    f"{filename}:{node.lineno}: torch.cuda.{node.attr}() without a device acts on the current device"
                )
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "record"
            and not node.args
            and not node.keywords
        ):
            found.append(
                f"{filename}:{node.lineno}: .record() without a stream records on the current device's "
                f"stream: pass torch.cuda.current_stream(device)"
            )
    return sorted(found, key=lambda text: int(text.split(":", 2)[1]))


def _sources() -> list[Path]:
    files = []
    for entry in SCANNED:
        path = ROOT / entry
        files += sorted(path.rglob("*.py")) if path.is_dir() else [path] if path.exists() else []
    return files


def test_the_scan_finds_each_kind_of_mistake():
    bad = """
import torch
def f(device, ev):
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated()
    ev.record()
    sync = torch.cuda.synchronize
    ok = torch.cuda.is_bf16_supported()
    cuda = torch.cuda
    cuda.reset_peak_memory_stats()
    torch.cuda.memory.memory_reserved()
"""
    found = problems(bad)
    assert [line.split(":")[1] for line in found] == ["4", "5", "6", "7", "8", "10", "11"]
    good = """
import torch
def f(device, ev, stream):
    torch.cuda.synchronize(device)
    peak = torch.cuda.max_memory_allocated(device=device)
    ev.record(torch.cuda.current_stream(device))
    with torch.cuda.device(device):
        ok = torch.cuda.is_bf16_supported()
    torch.cuda.empty_cache()
"""
    assert problems(good) == []


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(ROOT)))
def test_experiments_name_the_device_of_every_cuda_call(path):
    assert problems(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT))) == []


@pytest.mark.gpu
def test_a_job_on_the_second_gpu_reads_that_gpus_counters(manager):
    import torch

    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs: a job on cuda:1 must not read cuda:0's counters")
    run = manager.submit("train-memory", {"model": "tiny", "batch": 2, "context": 64}, "cuda:1").wait(600)
    assert run.status == "ok", run.error
    params = run.meta["params"]
    # fp32 weights alone are 4 bytes a parameter: a peak read from an idle cuda:0 would be ~0
    assert run.meta["peak_measured_bytes"] >= 4 * params
    assert run.device["torch_device"] == "cuda:1"

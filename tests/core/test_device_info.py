"""A run's device description read as fields (core.result.DeviceInfo): what the views ask of it instead of string
keys, with the stored dict left as it was."""

import copy

from core.result import DeviceInfo, RunResult
from render.comparison import device_text
from render.report import device_pairs
from render.style import device_label
from render.trend import box_name

# The device of the first run of examples/nvidia-h200-2026-11-26.json, hand-copied (its datasheet cut to three keys).
H200 = {
    "kind": "cuda",
    "index": 0,
    "torch_device": "cuda:0",
    "host": "vm",
    "uuid": "GPU-c6238678-3932-62c6-ba7b-8c4060895b2c",
    "name": "NVIDIA H200",
    "label": "cuda:0 — NVIDIA H200",
    "compute_capability": "9.0",
    "multiprocessors": 132,
    "l2_cache_bytes": 62914560,
    "total_memory_bytes": 150109880320,
    "free_memory_bytes": 149557477376,
    "bf16_supported": True,
    "tf32": {
        "cuda_matmul_allow_tf32": False,
        "cudnn_allow_tf32": True,
        "float32_matmul_precision": "highest",
        "NVIDIA_TF32_OVERRIDE": None,
    },
    "spec": {"key": "h200-sxm", "name": "NVIDIA H200 SXM", "tflops": {"bf16": 989.4, "fp8": 1978.9}},
}


def _run(device: dict) -> RunResult:
    return RunResult("matmul", {}, device, {}, "2026-11-26T10:00:00+00:00", None, "ok")


def test_a_stored_device_reads_as_fields_and_stays_as_stored():
    run = _run(copy.deepcopy(H200))
    info = run.device_info
    assert (info.kind, info.name, info.torch_device, info.index, info.host) == (
        "cuda",
        "NVIDIA H200",
        "cuda:0",
        0,
        "vm",
    )
    assert info.is_cuda and not info.is_cpu
    assert info.shown == "cuda:0 — NVIDIA H200"
    assert (info.multiprocessors, info.l2_cache_bytes, info.compute_capability) == (132, 62914560, "9.0")
    assert run.to_dict()["device"] == H200  # nothing added, nothing dropped (the uuid is no field, still stored)


def test_a_description_missing_keys_reads_with_defaults():
    info = DeviceInfo.of({"kind": "cpu", "name": "AMD EPYC 9654"})
    assert info.is_cpu and not info.is_cuda
    assert (info.label, info.torch_device, info.index, info.spec, info.devices) == (None, None, None, None, ())
    assert info.shown == "AMD EPYC 9654"  # no label: the name


def test_an_all_gpu_runs_parts_are_read_and_anything_else_there_ignored():
    two = {"kind": "cuda", "name": "2 × NVIDIA H200", "host": "vm", "devices": [H200, H200 | {"index": 1}]}
    assert [d["index"] for d in DeviceInfo.of(two).devices] == [0, 1]
    assert box_name(DeviceInfo.of(two)) == "vm: 2 × NVIDIA H200"
    assert DeviceInfo.of(two | {"devices": "not a list"}).devices == ()


def test_the_views_read_the_kind_and_label_fields():
    gpu, cpu = _run(copy.deepcopy(H200)), _run(copy.deepcopy(H200) | {"kind": "cpu"})
    assert device_text(gpu) == "NVIDIA H200" and device_text(cpu) == "CPU"
    assert device_label(gpu) == "cuda:0 — NVIDIA H200" and device_label(cpu) == "CPU — NVIDIA H200"
    unlabelled = _run({k: v for k, v in H200.items() if k != "label"})
    assert dict(device_pairs(unlabelled))["device"] == "NVIDIA H200"
    assert dict(device_pairs(gpu))["SMs"] == 132
    assert dict(device_pairs(gpu))["L2 cache"] == "60 MiB"

"""Box identity: the host and GPU UUIDs a run is compared by (as nvidia-smi prints them), else the description."""

from types import SimpleNamespace

from core.hardware.device import _uuid, describe_cpu, describe_no_device, host_name
from core.hardware.identity import box_identity, box_key, box_label


def test_a_cuda_uuid_reads_as_nvidia_smi_prints_it_and_a_blank_one_is_none():
    assert _uuid(SimpleNamespace(uuid="58389b8e-5c4d-11ef-b4c2-0123456789ab")) == (
        "GPU-58389b8e-5c4d-11ef-b4c2-0123456789ab"
    )
    assert _uuid(SimpleNamespace(uuid="GPU-1234")) == "GPU-1234"
    assert _uuid(SimpleNamespace(uuid="00000000-0000-0000-0000-000000000000")) is None
    assert _uuid(SimpleNamespace()) is None  # a torch build without the attribute


def test_every_description_carries_the_host():
    import socket

    assert host_name() == socket.gethostname()
    assert describe_cpu()["host"] == socket.gethostname()
    assert describe_no_device("cpu")["host"] == describe_no_device("cuda:0")["host"] == socket.gethostname()


def test_the_box_key_tells_boxes_and_gpus_apart():
    a0 = {"kind": "cuda", "host": "a", "uuid": "GPU-1", "name": "NVIDIA H100 80GB HBM3", "index": 0}
    a1 = a0 | {"uuid": "GPU-2", "index": 1}
    assert box_key(a0) == "a|GPU-1" and box_key(a1) != box_key(a0) and box_key(a0 | {"host": "b"}) != box_key(a0)
    no_uuid = a0 | {"uuid": None}
    assert box_identity(no_uuid) == {"host": "a", "devices": ["NVIDIA H100 80GB HBM3 (cuda:0)"]}
    every_gpu = {"kind": "cuda", "host": "a", "devices": [a0, a1]}  # a merged all-GPU run (core.fanout)
    assert box_identity(every_gpu) == {"host": "a", "devices": ["GPU-1", "GPU-2"]}
    cpu = {"kind": "cpu", "host": "a", "name": "AMD EPYC 7B13", "index": None}
    assert box_label(cpu) == "a: AMD EPYC 7B13"
    assert box_key({"kind": "cuda", "name": "x"}) is None and box_label({}).startswith("unknown box")

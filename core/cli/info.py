"""``info``: the devices of this box, with their datasheet peaks."""

from __future__ import annotations

from core.cli.output import dump
from core.result import DeviceInfo
from core.units import bytes_text

ORDER = 10


def register(sub, common) -> None:
    p = sub.add_parser("info", parents=[common], help="describe the devices of this box (with datasheet peaks)")
    p.add_argument(
        "--no-gpu-query",
        action="store_true",
        help="versions from package metadata and the CPU from /proc only: no GPU is queried, torch is not imported",
    )
    p.set_defaults(handler=run)


def run(args) -> int:
    from core.hardware.device import describe_all, describe_no_device, versions_no_device

    if args.no_gpu_query:
        cpu = describe_no_device("cpu")
        cpu["label"] = f"CPU — {cpu['name']}"
        info = {"versions": versions_no_device(), "devices": [cpu], "cuda_available": None}
    else:
        info = describe_all()
    if args.json:
        print(dump(info))
        return 0
    v = info["versions"]
    print(f"torch {v['torch']}  CUDA {v['cuda']}  cuDNN {v['cudnn']}  driver {v['driver']}  python {v['python']}")
    if info["cuda_available"] is None:
        print("GPUs not queried (--no-gpu-query)")
    elif not info["cuda_available"]:
        print(f"No GPU: {info['cuda_unavailable_reason']}")
    for d in map(DeviceInfo.of, info["devices"]):
        mem = d.total_memory_bytes
        print(f"- {d.label}  memory {bytes_text(mem)}" if mem else f"- {d.label}")
        if d.is_cuda:
            spec = d.spec
            print(
                f"  compute capability {d.compute_capability}, {d.multiprocessors} SMs, "
                f"bf16 {'yes' if d.bf16_supported else 'no'}, TF32 flags {d.tf32}"
            )
            print(f"  datasheet: {spec['name'] + ' ' + str(spec['tflops']) if spec else 'no datasheet entry'}")
    return 0

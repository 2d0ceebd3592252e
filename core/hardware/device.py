"""What the lab runs on: every device of the box, its versions and its TF32 flags.

Only ever called in a worker process or the CLI: the Streamlit server must make no CUDA call
(CUDA cannot be used after fork, and even ``device_count()`` can initialise it), so the dashboard
asks a worker for this description (:func:`core.workerprocess.query_devices`). torch is imported by the
functions that need it, so the device-string check and the torch-free :func:`describe_no_device`
cost nothing (the CLI's planner answers without importing torch).
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
from contextlib import nullcontext

from core import __version__
from core.errors import ConfigError
from core.hardware.specs import match_spec


def versions() -> dict:
    """Library and driver versions, for the result schema and the device card."""
    import torch

    cudnn = None
    if torch.backends.cudnn.is_available():
        cudnn = torch.backends.cudnn.version()
    return {
        "gpulab": __version__,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": cudnn,
        "driver": _driver_version(),
        "platform": platform.platform(),
    }


def _driver_version() -> str | None:
    import torch

    if not torch.cuda.is_available():
        return None
    try:
        import pynvml  # nvidia-ml-py, optional

        pynvml.nvmlInit()
        version = pynvml.nvmlSystemGetDriverVersion()
        return version.decode() if isinstance(version, bytes) else version
    except Exception:
        pass
    if shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=10,
            )
            if out.returncode == 0 and out.stdout.strip():
                return out.stdout.strip().splitlines()[0]
        except (OSError, subprocess.SubprocessError):
            pass
    return None


def tf32_flags() -> dict:
    """The process-wide switches that decide whether fp32 matmuls/convolutions use TF32."""
    import torch

    return {
        "cuda_matmul_allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
        "cudnn_allow_tf32": bool(torch.backends.cudnn.allow_tf32),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "NVIDIA_TF32_OVERRIDE": os.environ.get("NVIDIA_TF32_OVERRIDE"),
    }


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def _meminfo() -> tuple[int | None, int | None]:
    """Total and available system memory in bytes (Linux /proc/meminfo, else sysconf)."""
    try:
        values = {}
        with open("/proc/meminfo", encoding="utf-8") as fh:
            for line in fh:
                key, rest = line.split(":", 1)
                values[key] = int(rest.split()[0]) * 1024
        return values.get("MemTotal"), values.get("MemAvailable")
    except (OSError, ValueError):
        try:
            total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
            return total, None
        except (ValueError, OSError, AttributeError):
            return None, None


def host_name() -> str:
    """The box's name, part of every run's box identity (:mod:`core.hardware.identity`): the host name, as
    ``socket.gethostname`` gives it, without importing sockets into every worker."""
    return platform.node()


def describe_cpu() -> dict:
    import torch

    total, free = _meminfo()
    return {
        "kind": "cpu",
        "index": None,
        "torch_device": "cpu",
        "host": host_name(),
        "name": _cpu_model(),
        "label": f"CPU — {_cpu_model()}",
        "cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "total_memory_bytes": total,
        "free_memory_bytes": free,
        "torch_build": {
            "cuda_build": torch.version.cuda is not None,
            "mkldnn": torch.backends.mkldnn.is_available(),
            "openmp": torch.backends.openmp.is_available(),
            "debug": bool(torch.version.debug),
        },
        "bf16_supported": True,  # CPU kernels exist for bf16 (speed varies by ISA)
        "tf32": tf32_flags(),
        "spec": None,
    }


def cuda_bf16_supported(device: str | int) -> bool:
    """``torch.cuda.is_bf16_supported()`` asks the *current* device; this asks ``device``."""
    import torch

    with torch.cuda.device(device):
        return bool(torch.cuda.is_bf16_supported())


def describe_cuda(index: int) -> dict:
    import torch

    props = torch.cuda.get_device_properties(index)
    free, total = torch.cuda.mem_get_info(index)
    bf16 = cuda_bf16_supported(index)
    spec = match_spec(props.name, props.total_memory)
    return {
        "kind": "cuda",
        "index": index,
        "torch_device": f"cuda:{index}",
        "host": host_name(),
        "uuid": _uuid(props),
        "name": props.name,
        "label": f"cuda:{index} — {props.name}",
        "compute_capability": f"{props.major}.{props.minor}",
        "multiprocessors": props.multi_processor_count,
        "l2_cache_bytes": getattr(props, "L2_cache_size", None),
        "total_memory_bytes": total,
        "free_memory_bytes": free,
        "bf16_supported": bool(bf16),
        "tf32": tf32_flags(),
        "spec": spec.to_dict() if spec else None,
    }


def _uuid(props) -> str | None:
    """The GPU's UUID (as nvidia-smi prints it, ``GPU-…``): it names one card across reboots and slots;
    None where this torch build or driver does not report it."""
    uuid = str(getattr(props, "uuid", "") or "")
    return (uuid if uuid.startswith("GPU-") else f"GPU-{uuid}") if uuid.strip("0-") else None


def cuda_unavailable_reason() -> str | None:
    import torch

    if torch.cuda.is_available():
        return None
    if torch.version.cuda is None:
        return f"this PyTorch ({torch.__version__}) is a CPU-only build"
    return "PyTorch has CUDA support but found no usable GPU (no device or no driver)"


def describe_all() -> dict:
    """Every device of the box (CPU first, then each GPU), the default and the versions."""
    import torch

    cuda_count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    devices = [describe_cpu()] + [describe_cuda(i) for i in range(cuda_count)]
    return {
        "devices": devices,
        "default": "cuda:0" if cuda_count else "cpu",
        "cuda_available": bool(cuda_count),
        "cuda_unavailable_reason": cuda_unavailable_reason(),
        "versions": versions(),
        "executable": sys.executable,
    }


_DEVICE_RE = re.compile(r"^(auto|all|cpu|cuda(:\d+)?)$")


def check_device_string(device: str) -> str:
    """Syntax check usable anywhere (no CUDA call): 'auto', 'cpu', 'cuda', 'cuda:N' or 'all' (every GPU)."""
    if not isinstance(device, str) or not _DEVICE_RE.match(device.strip()):
        raise ConfigError(f"device {device!r} is not one of: auto, cpu, cuda, cuda:N, all")
    return device.strip()


def resolve(device: str) -> str:
    """Turn a requested device into a torch device string, checking it exists (worker side)."""
    import torch

    device = check_device_string(device)
    if device == "all":
        raise ConfigError("device all is split into one job per GPU by the job manager, not run by one worker")
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if device == "auto":
        return "cuda:0" if count else "cpu"
    if device == "cpu":
        return "cpu"
    index = int(device.split(":")[1]) if ":" in device else 0
    if count == 0:
        raise ConfigError(f"device {device} requested but CUDA is unavailable: {cuda_unavailable_reason()}")
    if index >= count:
        raise ConfigError(f"device {device} does not exist: this box has {count} GPU(s), cuda:0..cuda:{count - 1}")
    return f"cuda:{index}"


def describe_no_device(requested: str, in_process: bool = True) -> dict:
    """The description a torch-free run stores (in-process arithmetic, or a file read by a worker): what was
    asked for, and that no device ran it. The CPU's facts come from /proc without torch; a GPU is not
    touched, so it is not described."""
    how = "computed in-process" if in_process else "read by a worker"
    if requested == "cpu":
        total, free = _meminfo()
        return {
            "kind": "cpu",
            "index": None,
            "torch_device": "cpu",
            "host": host_name(),
            "name": _cpu_model(),
            "label": f"CPU — {_cpu_model()} (no device used: {how})",
            "cores": os.cpu_count(),
            "total_memory_bytes": total,
            "free_memory_bytes": free,
            "spec": None,
            "in_process": in_process,
        }
    return {
        "kind": "none",
        "index": None,
        "torch_device": requested,
        "host": host_name(),
        "name": f"{requested} (not used)",
        "label": f"{requested} — not used: {how} without touching the GPU",
        "total_memory_bytes": None,
        "spec": None,
        "in_process": in_process,
    }


def versions_no_device() -> dict:
    """Versions without importing torch (its installed version from the package metadata)."""
    return {
        "gpulab": __version__,
        "python": platform.python_version(),
        "torch": installed_version("torch"),
        "cuda": None,
        "cudnn": None,
        "driver": None,
        "platform": platform.platform(),
    }


def installed_version(name: str) -> str | None:
    """An installed distribution's version, as ``importlib.metadata.version`` gives it: the ``Version`` of the first
    ``<name>-….dist-info`` or ``.egg-info`` on ``sys.path``, read directly; importlib.metadata itself only where a
    path entry is a zip file it alone can look into. Why not it always: its import (email, zipfile, csv…) is a
    tenth of an import worker's start, on the way to every import's answer."""
    prefix, zipped = name.lower().replace("-", "_") + "-", False
    for entry in sys.path:
        folder = entry or "."
        if os.path.isfile(folder):
            zipped = True
            continue
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        for found in names:
            if found.lower().startswith(prefix) and found.endswith((".dist-info", ".egg-info")):
                return _metadata_version(os.path.join(folder, found))
    if not zipped:
        return None
    import importlib.metadata

    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _metadata_version(path: str) -> str | None:
    """The ``Version:`` header of a dist-info's METADATA (an egg-info's PKG-INFO, or the egg-info file itself)."""
    for candidate in (os.path.join(path, "METADATA"), os.path.join(path, "PKG-INFO"), path):
        try:
            with open(candidate, encoding="utf-8", errors="replace") as f:
                for line in f:
                    if line.startswith("Version:"):
                        return line.split(":", 1)[1].strip()
                    if not line.strip():  # the headers end at the first empty line
                        break
        except OSError:
            continue
    return None


def describe(torch_device: str) -> dict:
    """Description of one resolved device."""
    if torch_device == "cpu":
        return describe_cpu()
    return describe_cuda(int(torch_device.split(":")[1]))


def current_device(torch_device: str):
    """Make the job's GPU the current one: a library call that takes no device (autocast's scaler, a
    kernel launched without a tensor) then lands on cuda:N, not on cuda:0. The lab's own calls name the
    device anyway (tests/core/test_cuda_device_explicit.py)."""
    if not torch_device.startswith("cuda"):
        return nullcontext()
    import torch

    return torch.cuda.device(torch_device)

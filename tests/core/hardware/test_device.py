"""Device description and datasheet matching."""

from dataclasses import fields

import pytest

from core.errors import ConfigError
from core.hardware import device, specs
from core.result import SPEC_FIELDS


def test_describe_all_lists_cpu_and_every_gpu():
    import torch

    info = device.describe_all()
    kinds = [d["kind"] for d in info["devices"]]
    assert kinds[0] == "cpu" and kinds.count("cuda") == torch.cuda.device_count()
    cpu = info["devices"][0]
    assert cpu["cores"] >= 1 and cpu["total_memory_bytes"] > 2**28 and cpu["spec"] is None
    assert set(cpu["tf32"]) == {
        "cuda_matmul_allow_tf32",
        "cudnn_allow_tf32",
        "float32_matmul_precision",
        "NVIDIA_TF32_OVERRIDE",
    }
    assert info["versions"]["torch"] == torch.__version__
    if not torch.cuda.is_available():
        assert info["default"] == "cpu" and info["cuda_unavailable_reason"]


@pytest.mark.parametrize("text, expected", [("cpu", "cpu"), ("auto", None), (" cpu ", "cpu")])
def test_resolve(text, expected):
    import torch

    assert device.resolve(text) == (expected or ("cuda:0" if torch.cuda.is_available() else "cpu"))


@pytest.mark.parametrize("bad", ["gpu", "cuda:x", "cuda:-1", "", "cpu;rm -rf /", "CUDA"])
def test_bad_device_strings_are_refused(bad):
    with pytest.raises(ConfigError, match="not one of: auto, cpu, cuda, cuda:N"):
        device.check_device_string(bad)


def test_nonexistent_gpu_index_names_the_range():
    import torch

    with pytest.raises(ConfigError, match="CUDA is unavailable|does not exist"):
        device.resolve(f"cuda:{torch.cuda.device_count() + 3}")


@pytest.mark.parametrize(
    "name, memory_gib, key",
    [
        ("NVIDIA H100 80GB HBM3", 80, "h100-sxm"),
        ("NVIDIA H100 PCIe", 80, "h100-pcie"),
        ("NVIDIA H100 NVL", 94, "h100-nvl"),
        ("NVIDIA H200", 141, "h200-sxm"),
        ("NVIDIA A100-SXM4-80GB", 80, "a100-sxm-80"),
        ("NVIDIA A100-SXM4-40GB", 40, "a100-sxm-40"),
        ("NVIDIA A100 80GB PCIe", 80, "a100-pcie-80"),
        ("NVIDIA A100-PCIE-40GB", 40, "a100-pcie-40"),
        ("NVIDIA L4", 24, "l4"),
        ("NVIDIA L40S", 48, "l40s"),
        ("NVIDIA A10", 24, "a10"),
        ("NVIDIA GeForce RTX 3090", 24, "rtx-3090"),
        ("NVIDIA GeForce RTX 4090", 24, "rtx-4090"),
    ],
)
def test_datasheet_entry_matched_from_the_torch_device_name(name, memory_gib, key):
    assert specs.match_spec(name, memory_gib * 2**30).key == key


@pytest.mark.parametrize(
    "name",
    ["NVIDIA GeForce GTX 1080", "Tesla V100-SXM2-16GB", "NVIDIA L40", "AMD Instinct MI325X", "NVIDIA GH200 480GB"],
)  # a Grace Hopper superchip is not an H200 card; the MI325X (256 GB, other clocks) is not the MI300X
def test_unknown_devices_get_no_entry(name):
    assert specs.match_spec(name, 16 * 2**30) is None


def test_peaks_are_dense_figures_from_the_datasheets():
    """Spot values from the vendor sheets (sparse figures halved), typed in by hand here."""
    h100 = specs.match_spec("NVIDIA H100 80GB HBM3", 80 * 2**30)
    assert h100.tflops["bf16"] == pytest.approx(1979 / 2, rel=1e-3)
    assert h100.tflops["tf32"] == pytest.approx(989 / 2, rel=1e-3)
    a100 = specs.match_spec("NVIDIA A100-SXM4-80GB", 80 * 2**30)
    assert (a100.tflops["fp64"], a100.tflops["tf32"], a100.tflops["bf16"], a100.tflops["int8"]) == (9.7, 156, 312, 624)
    assert a100.bandwidth_gbs == 2039
    # AMD's ROCm page "AMD Instinct MI300 series microarchitecture": matrix FP16/BF16 1307.4, FP8 2614.9, TF32 653.7
    # TFLOPS, vector FP64 81.7, 5.3 TB/s; both names traces give it, and not the MI325X
    for name in ("AMD Instinct MI300X", "AMD Instinct MI300X VF"):
        mi300x = specs.match_spec(name, 206_141_652_992)
        assert (mi300x.tflops["bf16"], mi300x.tflops["fp8"], mi300x.tflops["tf32"], mi300x.tflops["fp64"]) == (
            1307.4, 2614.9, 653.7, 81.7)  # fmt: skip
        assert mi300x.bandwidth_gbs == 5300
    for spec in specs.SPECS:
        assert spec.source and set(spec.tflops) <= set(specs.DTYPE_UNITS)
        assert spec.tflops.get("bf16", 0) >= spec.tflops.get("fp32", 0)  # tensor units beat FP32 everywhere


def test_unit_for_matmul_dtypes():
    assert specs.unit_for("fp64") == "fp64_tc" and specs.unit_for("bf16") == "bf16"
    assert specs.spec_for_device({"kind": "cpu", "name": "x"}) is None


def test_device_peak_names_why_there_is_none():
    h100 = {
        "kind": "cuda",
        "name": "NVIDIA H100 80GB HBM3",
        "spec": specs.match_spec("NVIDIA H100 80GB HBM3", 80 * 2**30).to_dict(),
    }
    assert specs.device_peak(h100, "bf16") == (989.4, None)
    l4 = {"kind": "cuda", "name": "NVIDIA L4", "spec": specs.match_spec("NVIDIA L4").to_dict()}
    assert specs.device_peak(l4, "fp64") == (None, "the NVIDIA L4 datasheet lists no fp64 peak")
    assert (
        specs.device_peak({"kind": "cuda", "name": "GTX 1080", "spec": None}, "fp32")[1]
        == "no datasheet entry for GTX 1080"
    )
    assert specs.device_peak({"kind": "cpu", "name": "x"}, "fp32") == (None, "CPU: no datasheet peak")


def test_the_stored_description_s_peak_table_is_the_datasheet_entry_s():
    """The run schema names the table by the entry's own field, so a renamed field fails here, not in a page."""
    assert set(SPEC_FIELDS) == {f.name for f in fields(specs.DeviceSpec)}
    h100 = specs.match_spec("NVIDIA H100 80GB HBM3", 80 * 2**30)
    peaks = specs.datasheet_peaks({"kind": "cuda", "name": h100.name, "spec": h100.to_dict()})
    assert peaks["bf16"] == 989.4 and peaks == h100.tflops
    assert specs.datasheet_peaks({"kind": "cpu", "name": "x", "spec": None}) == {}


@pytest.mark.parametrize("name", ["torch", "numpy", "msgspec", "psutil", "nvidia-ml-py", "no-such-distribution"])
def test_an_installed_version_is_the_one_importlib_metadata_gives(name):
    import importlib.metadata

    from core.hardware.device import installed_version

    try:
        expected = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        expected = None
    assert installed_version(name) == expected


def test_an_installed_version_reads_a_dist_info_s_or_an_egg_info_s_header(tmp_path, monkeypatch):
    from core.hardware.device import installed_version

    (tmp_path / "torch-9.9.9.dist-info").mkdir()
    (tmp_path / "torch-9.9.9.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: torch\nVersion: 9.9.9+cu999\n\nVersion: not a header\n"
    )
    (tmp_path / "tiny_pkg-0.1.egg-info").write_text("Metadata-Version: 1.0\nName: tiny-pkg\nVersion: 0.1.post2\n")
    monkeypatch.setattr("sys.path", [str(tmp_path / "missing"), str(tmp_path)])
    assert installed_version("torch") == "9.9.9+cu999"  # the header, not the folder's name
    assert installed_version("tiny-pkg") == "0.1.post2"
    assert installed_version("absent") is None

"""An all-GPU run's node comparison typed: what the fan-out stores reads back whole, and a GPU without clock samples
says why."""

from core import registry
from core.fanout import compare
from core.result import RunResult
from core.rows.node import NodeComparison, NodeDevice, concurrency_note
from render.node import clock_text
from tests.core.test_fanout import matmul_rows


def run_with(node: dict, concurrency: dict | None = None) -> RunResult:
    meta = {"node": node} | ({"concurrency": concurrency} if concurrency else {})
    device = {"kind": "cuda", "torch_device": "all", "name": "2 × Fake GPU"}
    return RunResult("matmul", {}, device, {}, "2026-11-29T00:00:00+00:00", None, "ok", meta=meta)


def test_the_fan_out_s_comparison_reads_back_whole():
    rows = [
        {"device": "cuda:0", "gpu_index": 0, "gpu_name": "Fake GPU", **r}
        for r in matmul_rows({1024: 100.0}, clock=1980, temp=60, reasons=("sw_power_cap",))
    ] + [{"device": "cuda:1", "gpu_index": 1, "gpu_name": "Fake GPU", "dtype": "bf16", "m": 1024, "n": 1024,
          "k": 1024, "label": "square", "tflops": 80.0}]  # fmt: skip
    stored = compare(registry.get("matmul").device_metric, rows, {"cuda:0": {}, "cuda:1": {"clocks_note": "no NVML"}})
    node = NodeComparison.from_run(run_with(stored))
    assert node is not None and node.to_dict() == stored
    fast, slow = node.per_device
    # the median of 100 and 80 is 90: 100 / 90 and 80 / 90; 0.889 is more than 5 % below
    assert (fast.relative, slow.relative) == (100.0 / 90.0, 80.0 / 90.0) and node.flagged == ("cuda:1",)
    assert fast.throttle_reasons == ("sw_power_cap",) and not slow.sampled
    assert clock_text(slow) == "no NVML"
    assert clock_text(fast).startswith("SM clock 1980 MHz") and clock_text(fast).endswith("sw_power_cap")


def test_a_run_on_one_device_has_no_comparison_and_a_gpu_read_from_a_frame_with_nan_has_no_sample():
    one = RunResult("matmul", {}, {"kind": "cpu"}, {}, "2026-11-29T00:00:00+00:00", None, "ok")
    assert NodeComparison.from_run(one) is None and concurrency_note(one) is None
    assert not NodeDevice("cuda:0", sm_clock_mhz=float("nan")).sampled
    note = "the GPUs did not all run at the same time"
    assert concurrency_note(run_with({"per_device": []}, {"all_at_once": False, "note": note})) == note

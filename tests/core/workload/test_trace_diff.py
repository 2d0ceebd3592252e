"""trace-diff: two traces compared by group, operator and kernel, against sums done by hand and TraceLens's
comparison of an H100 and an MI300 trace; a trace against itself changes nothing; stored runs and files alike."""

import json

import pytest

from core import cli
from core.workload.trace.diff import mismatches, normalised
from core.workload.trace.ops import NO_OP
from tests.conftest import ROOT
from tests.core.workload.traces import QWEN_H100, QWEN_MI300
from tests.factories import make_run

V100 = ROOT / "tests" / "data" / "workload" / "kineto_v100_trace.json"


def kernel(name: str, ts: float, dur: float) -> dict:
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur,
            "args": {"device": 0, "stream": 7}}  # fmt: skip


def write(path, *kernels) -> str:
    path.write_text(json.dumps({"traceEvents": list(kernels)}))
    return str(path)


@pytest.fixture
def pair(tmp_path):
    # base: two 128x64 SGEMMs of 10 µs and an add of 5 µs; new: the same SGEMM with other tiles (15 µs each)
    # and an NCCL all-reduce of 4 µs, no add
    base = write(
        tmp_path / "base.json",
        kernel("ampere_sgemm_128x64_tn", 0, 10),
        kernel("ampere_sgemm_128x64_tn", 20, 10),
        kernel("void at::native::vectorized_elementwise_kernel<4, add>(int)", 40, 5),
    )
    new = write(
        tmp_path / "new.json",
        kernel("ampere_sgemm_64x64_tn", 0, 15),
        kernel("ampere_sgemm_64x64_tn", 20, 15),
        kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)", 40, 4),
    )
    return base, new


def test_groups_and_kernels_by_hand(pair, store, capsys):
    pytest.importorskip("msgspec")  # the CLI reads both traces with it
    assert cli.main(["trace-diff", *pair, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    groups = {r["group"]: (r["base_us"], r["new_us"], r["delta_us"]) for r in out["rows"] if r["kind"] == "group"}
    assert groups == {"matmul": (20, 30, 10), "elementwise": (5, 0, -5), "communication": (0, 4, 4)}
    assert [r["group"] for r in out["rows"] if r["kind"] == "group"] == ["matmul", "communication", "elementwise"]
    kernels = {
        r["kernel"]: (r["base_count"], r["new_count"], r["delta_us"]) for r in out["rows"] if r["kind"] == "kernel"
    }
    assert kernels["ampere_sgemm_#x#_tn"] == (2, 2, 10)  # other tiles, the same kernel
    assert out["total"] == {"base_us": 25, "new_us": 34, "delta_us": 9, "delta_pct": 36.0}
    assert out["base"] == "base.json" and out["new"] == "new.json"
    assert store.list() == []  # the sides are read, not stored


def test_a_trace_against_itself_changes_nothing(store, capsys):
    pytest.importorskip("msgspec")
    assert cli.main(["trace-diff", str(V100), str(V100), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    rows = out["rows"]
    assert rows and all(r["delta_us"] == 0 and r.get("base_count") == r.get("new_count") for r in rows)
    assert {r["kind"] for r in rows} == {"whole", "step", "cause", "group", "op", "kernel"} and out["mismatches"] == []
    # the V100 file's groups (tests/data/workload/README.md): 48 µs of kernels and 2 µs of copies
    assert sum(r["base_us"] for r in rows if r["kind"] == "group") == pytest.approx(50.0)


def test_stored_runs_compare_like_files_and_other_runs_are_refused(pair, store, capsys):
    pytest.importorskip("msgspec")
    assert cli.main(["trace", pair[0], "--json"]) == 0
    stored = json.loads(capsys.readouterr().out)["run_id"]
    assert cli.main(["trace-diff", stored[:10], pair[1], "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["total"]["delta_us"] == 9
    other = make_run("probe")
    store.save(other)
    assert cli.main(["trace-diff", other.id, pair[1]]) == 2
    assert "not a profiler trace import" in capsys.readouterr().err
    assert cli.main(["trace-diff", "no-such-run", pair[1]]) == 2


def test_names_are_matched_without_call_arguments_and_numbers():
    assert normalised("void k<4, float>(int, float*)") == "k<#, float>"
    assert normalised("sm90_xmma_gemm_f32f32_tilesize128x128x64") == normalised(
        "sm90_xmma_gemm_f32f32_tilesize64x64x32"
    )
    assert normalised("a<float>") != normalised("a<half>")


def launched(name: str, ts: float, dur: float, corr: int) -> list[dict]:
    """A kernel and its launch call 1 µs before it (a step holds the kernels its launches fall in)."""
    k = kernel(name, ts, dur)
    k["args"]["correlation"] = corr
    call = {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": ts - 1,
            "dur": 0.5, "args": {"correlation": corr}}  # fmt: skip
    return [call, k]


def step(n: int, ts: float, dur: float) -> dict:
    return {"ph": "X", "cat": "cpu_op", "name": f"ProfilerStep#{n}", "pid": 1, "tid": 1, "ts": ts, "dur": dur}


def test_the_whole_trace_and_its_steps_are_compared_by_hand(tmp_path, store, capsys):
    """Beyond GPU time: span, busy, idle, copies, exposed communication and the steps' medians."""
    pytest.importorskip("msgspec")
    # base: kernels 10–20 and 30–40 (step 1, 0–50 µs), 60–65 (step 2, 50–70 µs); span 55, busy 25, idle 30
    base = write(
        tmp_path / "base.json", step(1, 0, 50), step(2, 50, 20),
        *launched("ampere_sgemm_128x64_tn", 10, 10, 1), *launched("ampere_sgemm_128x64_tn", 30, 10, 2),
        *launched("add_kernel", 60, 5, 3),
    )  # fmt: skip
    # new: one step 0–60 µs: an SGEMM 10–25, an all-reduce 20–40 (5 µs under the SGEMM: 15 exposed); span 30
    new = write(
        tmp_path / "new.json", step(1, 0, 60),
        *launched("ampere_sgemm_128x64_tn", 10, 15, 1), *launched("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 20, 20, 2),
    )  # fmt: skip
    assert cli.main(["trace-diff", base, new, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    figures = {r["figure"]: (r["base_us"], r["new_us"]) for r in out["rows"] if r["kind"] in ("whole", "step")}
    assert figures == {
        "span": (55, 30),
        "GPU busy (union of activity)": (25, 30),
        "GPU idle": (30, 0),
        "kernel time": (25, 35),
        "copies and memsets": (0, 0),
        "exposed communication": (0, 15),
        "step wall time (median)": ((50 + 20) / 2, 60),  # base's two steps, 50 and 20 µs
        "step GPU busy (median)": ((20 + 5) / 2, 30),  # step 1: two 10 µs SGEMMs; step 2: the 5 µs add
        # on each step's GPU window: step 1 from its first kernel (10) to step 2's (60), 50 − 20 busy = 30 idle;
        # step 2 [60, 65], none
        "step GPU idle (median)": ((30 + 0) / 2, 0),
        # each step's start to its first kernel: base 0 → 10 and 50 → 60; new 0 → 10
        "host before the first kernel (median)": (10, 10),
    }
    assert out["mismatches"] == [
        "the windows differ: 2 → 1 profiled steps, so totals (span, busy, idle, GPU time) differ by that alone; the "
        "step rows and the causes compare the median step"
    ]


def test_a_gpu_nobody_named_is_no_other_gpu():
    """A file naming no GPU stores none; a run stored before that holds "GPU <n>" there, which is no name either:
    neither is said to be a different GPU from a named one."""
    named = {"device_name": "AMD Instinct MI300X", "world_size": 8, "steps": 1}
    for unnamed in (None, "GPU 2"):
        assert mismatches(named, named | {"device_name": unnamed}, []) == []
    assert mismatches(named, named | {"device_name": "GPU 2 of 8"}, [])[0].startswith("different GPUs (")


def test_unlike_traces_are_named_before_the_deltas(tmp_path, store, capsys):
    pytest.importorskip("msgspec")

    def traced(name: str, gpu: str, world: int) -> str:
        path = tmp_path / name
        path.write_text(json.dumps({
            "deviceProperties": [{"id": 0, "name": gpu}],
            "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": world},
            "traceEvents": [kernel("ampere_sgemm_128x64_tn", 0, 10)],
        }))  # fmt: skip
        return str(path)

    pair = traced("h100.json", "NVIDIA H100 80GB HBM3", 8), traced("mi300.json", "AMD Instinct MI300X", 4)
    assert cli.main(["trace-diff", *pair]) == 0
    said = capsys.readouterr().out.splitlines()
    assert said[:2] == [
        "note: different GPUs (NVIDIA H100 80GB HBM3 → AMD Instinct MI300X): kernels of other vendors or "
        "architectures rarely share a name, so compare the groups and the operators, not the kernel rows",
        "note: different world sizes (8 → 4 ranks): communication time is not comparable",
    ]
    assert said[2] == "h100.json → mi300.json: GPU time (kernels, copies and memsets) 10.0 µs → 10.0 µs (+0.0%)"


# TraceLens's own comparison of these two files (tests/data/workload/README.md): per operator, the GPU time of
# the kernels it launched directly (``total_direct_kernel_time_ms``, here in µs) and its calls, H100 then MI300
TRACELENS_OPS = {
    "aten::mul": (6752.8999, 220, 4541.2886, 220),
    "aten::mm": (6668.6816, 96, 8663.6152, 96),
    "aten::copy_": (5101.9348, 197, 3190.6943, 197),
    "aten::_flash_attention_forward": (2722.7043, 24, 3908.7983, 24),
    "aten::add": (2607.5151, 145, 1895.6035, 145),
    "aten::addmm": (2329.0759, 72, 2954.7627, 72),
    "aten::cat": (2017.7830, 49, 1356.0698, 49),
    "aten::pow": (1300.7949, 49, 928.0801, 49),
    "aten::silu": (925.1147, 24, 777.6426, 24),
    "aten::mean": (743.3274, 49, 619.0522, 49),
    "aten::neg": (587.3271, 48, 517.0981, 48),
    "aten::rsqrt": (79.0764, 49, 215.4478, 49),
    "aten::index_select": (51.7759, 1, 21.0078, 1),
    "aten::all": (4.1279, 1, 2.3252, 1),
    "aten::bmm": (3.5200, 1, 27.3418, 1),
    "aten::_local_scalar_dense": (2.3679, 1, 0.7598, 1),
    "aten::cos": (2.0801, 1, 4.6899, 1),
    "aten::sin": (2.0161, 1, 4.2490, 1),
    "aten::eq": (1.8560, 1, 5.5718, 1),
    "aten::arange": (1.5039, 1, 2.2842, 1),
    "aten::fill_": (0.0, 0, 107.5449, 24),  # the MI300's flash attention fills its output first
}


def test_an_h100_and_an_mi300_meet_through_their_operators_as_tracelens_finds(store, capsys):
    """The same model on two vendors: hardly a kernel shares a name (cuBLAS ``sm90_xmma`` against hipBLASLt
    ``Cijk_``), so the kernel rows say little and the diff says so; the operator rows match every operator,
    each side's time and calls equal to TraceLens's (its float32 ms: within 0.01 µs)."""
    pytest.importorskip("msgspec")
    assert cli.main(["trace-diff", str(QWEN_H100), str(QWEN_MI300), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    ops = {r["op"]: r for r in out["rows"] if r["kind"] == "op"}
    assert set(ops) == set(TRACELENS_OPS) | {NO_OP}
    for name, (h100_us, h100_calls, mi300_us, mi300_calls) in TRACELENS_OPS.items():
        row = ops[name]
        assert row["base_us"] == pytest.approx(h100_us, abs=0.01), name
        assert row["new_us"] == pytest.approx(mi300_us, abs=0.01), name
        assert row["delta_us"] == pytest.approx(mi300_us - h100_us, abs=0.02), name
        assert (row["base_count"], row["new_count"]) == (h100_calls, mi300_calls), name
    assert [r["op"] for r in out["rows"] if r["kind"] == "op"][:2] == ["aten::mm", "aten::_flash_attention_forward"]
    # kernels launched before the profiler saw the host (no launch call in the file): TraceLens leaves them out too
    assert ops[NO_OP]["base_count"] == ops[NO_OP]["new_count"] == 0
    gpus, names = out["mismatches"]  # the MI300 file lists one GPU, id 0, and its kernels say device 2 (one step each)
    assert gpus.startswith("different GPUs (NVIDIA H100 80GB HBM3 → AMD Instinct MI300X VF)")
    assert names.startswith("few kernels share a name (")


WORKERS_0 = ROOT / "tests" / "data" / "workload" / "kineto_v100_resnet50_workers0_step.json.gz"
WORKERS_4 = ROOT / "tests" / "data" / "workload" / "kineto_v100_resnet50_workers4_step.json.gz"


def test_a_dataloader_with_workers_is_said_to_remove_the_data_loading_stall(store, capsys):
    """PyTorch's profiler tutorial's ResNet-50 on a V100 with ``num_workers=0`` and ``4`` (one step each): the GPU
    time barely moves (+1.5 %) — the headline was "GPU time +1.5 %" — while the step is 28 % shorter because the
    DataLoader's ``__next__`` no longer holds the GPU idle. By hand: that event's duration in each file (the GPU
    ran nothing during it, checked here), 73,418 µs → 87 µs."""
    pytest.importorskip("msgspec")
    from tests.core.workload.traces import trace_events

    loading = []
    for path in (WORKERS_0, WORKERS_4):
        events = trace_events(path)
        (load,) = [e for e in events if e["name"].startswith("enumerate(DataLoader)#")]
        gpu = [e for e in events if e.get("cat") in ("Kernel", "Memcpy", "Memset")]
        assert not any(e["ts"] < load["ts"] + load["dur"] and e["ts"] + e["dur"] > load["ts"] for e in gpu)
        loading.append(load["dur"])
    assert loading == [73_418, 87]
    assert cli.main(["trace-diff", str(WORKERS_0), str(WORKERS_4), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    (data,) = [r for r in out["rows"] if r["kind"] == "cause" and r["figure"] == "data loading"]
    assert (data["base_us"], data["new_us"]) == (73_418, 87)
    assert out["rows"][0]["kind"] == "whole" and out["mismatches"] == []
    assert out["headline"].startswith("step wall (median) 176.9 ms → 126.8 ms (-28.3%); per step, the host's data "
                                      "loading 73.4 ms → 87.0 µs")  # fmt: skip
    assert [r for r in out["rows"] if r["kind"] == "cause"][0]["figure"] == "data loading"  # the largest change


def test_windows_of_different_steps_are_said_first(store, capsys):
    """TraceLens' MI300X ResNet (three host steps) against its TimeSformer (one): before any delta, that the totals
    are of windows of 3 and 1 steps and the step rows are per step."""
    pytest.importorskip("msgspec")
    from tests.core.workload.test_host_steps import CHECKPOINTING, VIDEO_MI300

    assert cli.main(["trace-diff", str(CHECKPOINTING), str(VIDEO_MI300)]) == 0
    said = capsys.readouterr().out.splitlines()
    assert said[0].startswith("note: the windows differ: 3 → 1 profiled steps")


def test_windows_without_steps_are_said_to_differ_where_their_spans_do(tmp_path, store, capsys):
    """No ProfilerStep on either side: a 10 µs window against a 40 µs one may hold other numbers of iterations."""
    pytest.importorskip("msgspec")
    short = write(tmp_path / "a.json", kernel("ampere_sgemm_128x64_tn", 0, 10))
    long = write(tmp_path / "b.json", kernel("ampere_sgemm_128x64_tn", 0, 10), kernel("ampere_sgemm_128x64_tn", 30, 10))
    assert cli.main(["trace-diff", short, long, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["mismatches"] == [
        "neither trace marks its steps (no ProfilerStep) and their spans differ (10.0 µs → 40.0 µs): the totals "
        "compare two recorded windows, which may hold different numbers of iterations"
    ]

"""trace-diff: two traces compared by group and kernel, against sums done by hand; a trace against itself
changes nothing; stored runs and files alike."""

import json

import pytest

from core import cli
from core.workload.trace_diff import normalised
from tests.conftest import ROOT
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
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert rows and all(r["delta_us"] == 0 and r["base_count"] == r["new_count"] for r in rows)
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

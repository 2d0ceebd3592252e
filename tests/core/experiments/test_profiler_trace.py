"""``profiler-trace`` and ``python -m core trace``: a real trace becomes a stored run whose JSON has the kernel
and idle time; something that is not a trace exits 2 and stores nothing."""

import json
import pickle

import pytest

from core import cli
from tests.conftest import ROOT

V100 = ROOT / "tests" / "data" / "workload" / "kineto_v100_trace.json"


def test_cli_json_on_a_real_trace(store, capsys):
    assert cli.main(["trace", str(V100), "--json", "--top", "5"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["kernel_time_us"] == 48.0 and out["idle_us"] == 11_896.0  # HTA 0.5.0: 48 and 11,896 (README)
    assert len(out["kernels"]) == 5 and out["kernels"][0]["total_us"] >= out["kernels"][-1]["total_us"]
    run = store.get(out["run_id"])
    assert run.experiment == "profiler-trace" and run.meta["device_name"] == "Tesla V100-DGXS-32GB"


def test_cli_text(capsys):
    assert cli.main(["trace", str(V100), "--no-save"]) == 0
    text = capsys.readouterr().out
    assert "kernel time 0.048 ms (sum of durations)" in text and "idle 11.896 ms" in text
    assert "step     2" in text


@pytest.mark.parametrize(
    "content, reason",
    [
        (b"", "empty"),
        (b'{"hello": "world"}', "not a Chrome/Kineto profiler trace"),
        (pickle.dumps({"segments": [], "device_traces": []}), "not UTF-8"),
        (b'{"traceEvents": [', "not valid JSON"),
    ],
)
def test_not_a_trace_exits_2_and_stores_nothing(tmp_path, store, capsys, content, reason):
    path = tmp_path / "t.json"
    path.write_bytes(content)
    assert cli.main(["trace", str(path)]) == 2
    err = capsys.readouterr().err
    assert reason in err and "Traceback" not in err
    assert store.count() == 0

"""The files recorded elsewhere that ship in examples/: the catalogue's facts read back from the files
themselves (digest, GPU, ranks, steps, the model the two ResNet traces share), their README, their size,
and their import from the CLI, labelled recorded elsewhere with the GPU and the source."""

import gzip
import hashlib
import json
import re
from collections import Counter

import pytest

from core.errors import ConfigError
from core.workload import examples
from tests.conftest import ROOT
from tests.core.workload import snapshots

EXAMPLES_DIR = ROOT / "examples"
TRACES = [e for e in examples.EXAMPLES if e.kind == "trace"]
SIZE_BOUND = 5_000_000  # examples/ stays small: a laptop's clone, the Docker image


def load_trace(path) -> dict:
    with gzip.open(path) as f:
        return json.load(f)


def kernel_devices(trace: dict) -> set[int]:
    return {e["args"]["device"] for e in trace["traceEvents"] if e.get("cat") == "kernel"}


@pytest.mark.parametrize("example", examples.EXAMPLES, ids=lambda e: e.name)
def test_each_file_is_the_one_the_catalogue_names(example):
    files = examples.files(example)
    assert all(f.is_file() for f in files) and examples.present(example)
    assert [hashlib.sha256(f.read_bytes()).hexdigest() for f in files] == list(example.sha256)
    if example.origin == examples.THIS_LAB:  # recorded here, by a script of this repository, never "elsewhere"
        assert (ROOT / example.source_path).is_file() and example.label.startswith("recorded by this lab: ")
        assert sorted(p.name for p in examples.location(example).iterdir()) == list(example.ranks)
    else:
        assert example.licence.startswith("MIT") and re.fullmatch(r"[0-9a-f]{40}", example.commit)
        assert example.label.startswith("recorded elsewhere on ")


@pytest.mark.parametrize("example", TRACES, ids=lambda e: e.name)
def test_a_trace_names_the_gpu_the_catalogue_says_or_none(example):
    for path in examples.files(example):
        trace = load_trace(path)
        names = {p["id"]: p["name"] for p in trace.get("deviceProperties", [])}
        if example.gpu_in_file:
            assert {names[d] for d in kernel_devices(trace)} == {example.gpu}
        else:  # the label is the catalogue's: the file has nothing to read it from
            assert not names
        steps = {e["name"] for e in trace["traceEvents"] if e.get("name", "").startswith("ProfilerStep#")}
        worked = launching_steps(trace)  # the analysis reads a step that launched nothing as no step's work
        assert f"{worked} step{'s' if worked > 1 else ''}" in example.title
        assert (len(steps) > worked) == ("profiler stopped" in example.title)  # a cut step is said, not counted


def launching_steps(trace: dict) -> int:
    """The host's ProfilerStep spans inside which a kernel or copy was launched (a cudaLaunchKernel, hipMemcpy…)."""
    events = trace["traceEvents"]
    launches = [e["ts"] for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver") and "aunch" in e["name"]]
    spans = [(e["ts"], e["ts"] + e["dur"]) for e in events if str(e.get("name", "")).startswith("ProfilerStep#")
             and e.get("cat") != "gpu_user_annotation"]  # fmt: skip
    return sum(any(start <= t <= end for t in launches) for start, end in spans)


def test_the_rank_set_is_ranks_0_and_1_of_128_built_for_sm_80():
    example = examples.find("recsys-a100-ranks")
    infos = [load_trace(p)["distributedInfo"] for p in examples.files(example)]
    assert [(i["rank"], i["world_size"], i["backend"]) for i in infos] == [(0, 128, "nccl"), (1, 128, "nccl")]
    assert "ranks 0 and 1 of 128" in example.title
    kernels = {e["name"] for e in load_trace(examples.import_path(example))["traceEvents"] if e.get("cat") == "kernel"}
    assert any("cutlass_80" in k for k in kernels) and any(k.startswith("ampere_") for k in kernels)


def test_the_two_resnet_traces_run_the_same_model_on_two_gpus():
    """ResNet-50 per step: 53 convolutions, 53 batch norms, one linear (the fc layer), SGD under DDP."""
    per_step = {}
    for name in ("resnet50-v100", "resnet50-a100"):
        events = load_trace(examples.import_path(examples.find(name)))["traceEvents"]
        ops = Counter(e["name"] for e in events if e.get("cat") == "cpu_op")
        steps = sum(1 for e in events if e.get("name", "").startswith("ProfilerStep#"))
        per_step[name] = {
            op: ops[op] / steps for op in ("aten::cudnn_convolution", "aten::batch_norm", "aten::linear")
        } | {"ddp": ops["DistributedDataParallel.forward"] / steps, "sgd": ops["Optimizer.step#SGD.step"] / steps}
    assert per_step["resnet50-v100"] == per_step["resnet50-a100"]
    assert per_step["resnet50-v100"]["aten::cudnn_convolution"] == 53 == per_step["resnet50-v100"]["aten::batch_norm"]
    assert examples.find("resnet50-v100").gpu != examples.find("resnet50-a100").gpu


def test_the_train_step_snapshot_has_cpp_stacks():
    data = snapshots.load_any(str(examples.import_path(examples.find("train-step-snapshot"))))
    frames = [f["filename"] for trace in data["device_traces"] for e in trace for f in e.get("frames", [])]
    assert any(not name.endswith(".py") for name in frames) and any(name.endswith(".py") for name in frames)


def test_the_readme_lists_every_file_with_its_source_commit_and_licence():
    readme = (EXAMPLES_DIR / "README.md").read_text()
    for e in examples.EXAMPLES:
        if e.origin == examples.THIS_LAB:  # a set's folder, its rank files and what recorded them
            assert f"`{e.name}` | `{e.file}/rank{{0..{len(e.ranks) - 1}}}`" in readme and e.source_path in readme
            continue
        for fact in (e.file, e.gpu, e.repository, e.commit, e.licence.split(" ")[0], e.name):
            assert fact in readme, (e.name, fact)
        for path in examples.files(e):
            assert f"{path.stat().st_size:,}" in readme, path.name
    assert "recorded elsewhere" in readme


def test_examples_stay_small():
    total = sum(p.stat().st_size for p in EXAMPLES_DIR.rglob("*") if p.is_file())
    assert total < SIZE_BOUND, f"examples/ holds {total:,} bytes"


def test_unknown_wrong_kind_and_missing_examples_are_clear_errors(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match="no example is called 'nope'.*resnet50-v100"):
        examples.config_path("nope", "trace", "")
    with pytest.raises(ConfigError, match="resnet50-v100 is a trace, not a snapshot"):
        examples.config_path("resnet50-v100", "snapshot", "")
    with pytest.raises(ConfigError, match="a file or an example, not both"):
        examples.config_path("resnet50-v100", "trace", str(examples.import_path(examples.find("resnet50-a100"))))
    monkeypatch.setenv("GPULAB_EXAMPLES_DIR", str(tmp_path))
    with pytest.raises(ConfigError, match="not on this machine.*without examples/"):
        examples.config_path("resnet50-v100", "trace", "")


def test_the_cli_imports_a_trace_example_labelled_recorded_elsewhere(store, capsys):
    from core import cli

    example = examples.find("resnet50-a100")
    trace = load_trace(examples.import_path(example))
    kernels = sum(1 for e in trace["traceEvents"] if e.get("cat") == "kernel")
    assert cli.main(["trace", "--example", example.name, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    run = store.get(out["run_id"])
    assert run.meta["kernel_count"] == kernels == 2700
    assert run.meta["device_name"] == trace["deviceProperties"][0]["name"] == run.recorded_elsewhere
    assert run.meta["example"]["name"] == example.name and run.meta["example"]["commit"] == example.commit
    assert run.config["example"] == example.name and "path" not in run.config and run.name == "example resnet50-a100"
    assert run.meta["file"] == examples.import_path(example).name and run.meta["file_sha256"] == example.sha256[0]
    assert cli.main(["runs", "list"]) == 0
    assert "recorded elsewhere: NVIDIA A100-PG509-200" in capsys.readouterr().out


def test_the_cli_imports_a_snapshot_example_and_says_where_it_comes_from(store, capsys):
    from core import cli

    example = examples.find("train-step-snapshot")
    expected = snapshots.plain_replay(snapshots.load_any(str(examples.import_path(example))), 0)
    assert cli.main(["snapshot", "--example", example.name]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"example {example.name}: ") and f"recorded elsewhere on {example.gpu}" in out
    assert example.repository in out and example.commit[:12] in out
    (run,) = store.list(experiment="memory-snapshot")
    assert run.recorded_elsewhere == example.gpu and run.meta["example"]["licence"] == example.licence
    assert run.meta["peak_allocated_bytes"] == pytest.approx(expected["peak"], rel=1e-3)


def test_the_cli_lists_the_examples_and_refuses_a_missing_one(tmp_path, monkeypatch, capsys):
    from core import cli

    assert cli.main(["examples", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    files = [e for e in listed if e["kind"] in ("snapshot", "trace", "hang")]
    assert [e["name"] for e in files] == [e.name for e in examples.EXAMPLES] and all(e["present"] for e in files)
    assert files[3]["open"] == "python -m core trace --example resnet50-v100"
    # the hang dump sets and the lab's own GPU runs the README uses are listed too, each with its command
    hangs = {e["name"]: e["open"] for e in listed if e["kind"] == "hang"}
    assert hangs == {n: f"python -m core hang --example {n}" for n in ("hang-skipped-rank", "hang-desync-op")}
    (runs,) = [e for e in listed if e["kind"] == "runs"]
    assert runs["name"] == "nvidia-h200-2026-11-26.json" and runs["open"].startswith("python -m core runs import ")
    monkeypatch.setenv("GPULAB_EXAMPLES_DIR", str(tmp_path))
    assert cli.main(["examples"]) == 0
    assert "missing: example resnet50-v100" in capsys.readouterr().out
    assert cli.main(["trace", "--example", "resnet50-v100"]) == 2
    assert "not on this machine" in capsys.readouterr().err
    assert cli.main(["trace"]) == 2 and "not neither" in capsys.readouterr().err


def test_the_rank_set_example_opens_as_one_job_of_two_ranks(store, capsys):
    from core.cli import main

    assert main(["trace", "--example", "recsys-a100-ranks", "--json"]) == 0, capsys.readouterr().err
    out = json.loads(capsys.readouterr().out)
    assert [r["rank"] for r in out["ranks"]] == [0, 1] and out["straggler_rank"] in (0, 1)
    (run,) = store.list(experiment="profiler-trace-ranks")
    assert run.meta["example"]["name"] == "recsys-a100-ranks" and run.name == "example recsys-a100-ranks"

"""The planner: parameter counts against an independent count, category arithmetic by hand, the CLI."""

import json
import os
import re
import subprocess
import sys

import pytest

from core.errors import ConfigError
from core.transformer.planner import EstimateConfig, max_batch, optimizer_state_bytes, plan
from core.transformer.presets import PRESETS, get_preset
from tests.conftest import ROOT


def independent_count(d, f, layers, heads, vocab=10_000):
    """Weight shapes listed one by one (not the preset's formula)."""
    shapes = [(vocab, d), (d, vocab), (d,)]  # embedding, lm_head, final norm
    for _ in range(layers):
        shapes += [(d, d)] * 4 + [(d, f), (f, d), (d, f)] + [(d,), (d,)]
    total = 0
    for s in shapes:
        n = 1
        for x in s:
            n *= x
        total += n
    return total


@pytest.mark.parametrize(
    "name,d,f,layers,heads",
    [
        ("tiny", 64, 256, 2, 4),
        ("mini", 128, 512, 4, 4),
        ("small", 768, 3072, 12, 12),
        ("medium", 1024, 4096, 24, 16),
        ("large", 1280, 5120, 36, 20),
        ("xl", 1600, 6400, 48, 25),
        ("2.7B", 2560, 10240, 32, 32),
    ],
)
def test_param_counts_match_architecture(name, d, f, layers, heads):
    assert plan(EstimateConfig(model=name)).params == independent_count(d, f, layers, heads)


def test_param_count_matches_built_model():
    from core.transformer.model import build_model

    model = build_model(get_preset("mini"), 16)
    assert sum(p.numel() for p in model.parameters()) == plan(EstimateConfig(model="mini")).params


def test_optimizer_state_per_optimizer_and_precision():
    p = PRESETS["small"]
    n = independent_count(768, 3072, 12, 12)
    assert optimizer_state_bytes(p, "sgd", "fp32") == 0
    assert optimizer_state_bytes(p, "sgd-momentum", "fp32") == 4 * n
    assert optimizer_state_bytes(p, "sgd-momentum", "bf16") == 2 * n
    # AdamW: two fp32 moments on the GPU; its per-tensor step counters (9 per layer + 3) are CPU scalars
    # (torch/optim/adam.py keeps `step` on the host unless capturable or fused): 4 bytes each, on a CPU only.
    assert optimizer_state_bytes(p, "adamw", "bf16-autocast") == 8 * n
    assert optimizer_state_bytes(p, "adamw", "fp32", "cpu") == 8 * n + (9 * 12 + 3) * 4


def test_other_holds_one_cublas_workspace_per_thread_that_runs_matmuls():
    # tiny, batch 2 x 16 tokens: int64 inputs and targets 2·2·16·8, RoPE cos/sin 2·16·(16/2)·4,
    # and 32 MiB of cuBLAS workspace per handle: forward (caller's thread) + backward (autograd's thread).
    small = 2 * 2 * 16 * 8 + 2 * 16 * 8 * 4
    train = plan(EstimateConfig(model="tiny", batch=2, context=16)).breakdown_bytes["other"]
    forward = plan(EstimateConfig(model="tiny", batch=2, context=16, forward_only=True)).breakdown_bytes["other"]
    cpu = plan(EstimateConfig(model="tiny", batch=2, context=16, target="cpu")).breakdown_bytes["other"]
    assert (train, forward, cpu) == (small + 2 * 32 * 2**20, small + 32 * 2**20, small)


@pytest.mark.gpu
def test_adam_step_counters_are_no_gpu_memory():
    import torch

    model = torch.nn.Linear(4, 4, device="cuda:0")
    opt = torch.optim.AdamW(model.parameters(), foreach=False)
    model(torch.randn(2, 4, device="cuda:0")).sum().backward()
    opt.step()
    assert all(state["step"].device.type == "cpu" for state in opt.state.values())  # as the planner assumes


def test_weights_grads_state_at_optimizer_peak_by_hand():
    # batch 1, 8 tokens: activations are negligible, so AdamW's step is the peak:
    # params 4n + grads 4n + state 8n + 2 temporaries of the largest tensor (10000 x 64 fp32).
    n = independent_count(64, 256, 2, 4)
    out = plan(EstimateConfig(model="tiny", batch=1, context=8, target="cpu"))
    b = out.breakdown_bytes or {}
    assert out.peak_phase == "optimizer"
    assert (b["parameters"], b["gradients"]) == (4 * n, 4 * n)
    assert b["optimizer_state"] == 8 * n + (9 * 2 + 3) * 4
    assert b["temporaries"] == 2 * 10_000 * 64 * 4


def test_softmax_scores_scale_with_context_squared():
    small = plan(EstimateConfig(model="small", context=256)).activations_bytes["per_layer_attention"]
    big = plan(EstimateConfig(model="small", context=512)).activations_bytes["per_layer_attention"]
    # b·a·s² (fp32, 4 bytes) quadruples, the rest doubles: difference is exactly known.
    b, a = 4, 12
    assert big - 2 * small == 4 * b * a * (512**2 - 2 * 256**2) + (512**2 - 2 * 256**2)


def test_checkpointing_and_mixed_precision_change_activations():
    base = dict(model="medium", batch=8, context=512)
    full = plan(EstimateConfig(**base)).breakdown_bytes["activations"]
    ckpt = plan(EstimateConfig(**base, checkpointing=True)).breakdown_bytes["activations"]
    assert ckpt < full / 3


def test_max_batch_is_monotonic_and_consistent():
    cfg = EstimateConfig(model="small", precision="bf16-autocast")
    b80, b24 = max_batch(cfg, 80 * 2**30), max_batch(cfg, 24 * 2**30)
    assert b80 > b24 > 0
    from dataclasses import replace

    from core.transformer.planner import device_total_bytes, peak

    assert device_total_bytes(peak(replace(cfg, batch=b24)).total_bytes, "cuda") <= 24 * 2**30
    assert device_total_bytes(peak(replace(cfg, batch=b24 + 1)).total_bytes, "cuda") > 24 * 2**30
    assert max_batch(EstimateConfig(model="2.7B"), 8 * 2**30) == 0  # 2.7B weights + Adam alone exceed 8 GiB


def test_bad_config_names_the_limit():
    with pytest.raises(ConfigError, match="batch"):
        EstimateConfig(batch=0)
    with pytest.raises(ConfigError, match="preset"):
        EstimateConfig(model="huge")


def test_cli_answers_in_process_quickly_with_breakdown(tmp_path):
    """Quick because nothing imports torch (a torch worker took ~5 s here): a ``torch`` that refuses to import, first
    on the path, must not be reached — a check that holds on a loaded box, where a wall-clock limit would not."""
    refusing = tmp_path / "torch"
    refusing.mkdir()
    (refusing / "__init__.py").write_text("raise ImportError('the estimate imported torch')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT)]))
    args = [
        sys.executable,
        "-m",
        "core",
        "estimate",
        "--model",
        "xl",
        "--precision",
        "bf16-autocast",
        "--optimizer",
        "adamw",
        "--batch",
        "4",
        "--context",
        "512",
        "--device",
        "cpu",
        "--no-save",
        "--json",
    ]
    out = subprocess.run(args, capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    run = json.loads(out.stdout)
    assert run["meta"]["worker"]["in_process"] is True and run["device"]["in_process"] is True
    meta = run["meta"]
    assert meta["params"] == independent_count(1600, 6400, 48, 25)
    assert set(meta["breakdown_bytes"]) == {
        "parameters",
        "gradients",
        "optimizer_state",
        "activations",
        "temporaries",
        "other",
    }
    assert meta["breakdown_bytes"]["parameters"] == 4 * meta["params"]


def test_cli_estimate_imports_no_torch_and_speaks_mib_and_gib():
    code = (
        "import sys, core.cli; code = core.cli.main(['estimate', '--model', 'small', '--device', 'cpu', "
        "'--no-save']); assert 'torch' not in sys.modules, 'torch was imported'; sys.exit(code)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    assert out.returncode == 0, out.stderr
    # small, fp32: 128,625,408 parameters × 4 bytes = 490.67 MiB of weights (counted shape by shape above)
    n = independent_count(768, 3072, 12, 12)
    assert n == 128_625_408
    assert "490.7 MiB" in out.stdout and "GiB" in out.stdout
    assert not re.search(r"\b\d{9,}\b", out.stdout.replace(str(n), "")), "raw byte counts in the text output"


def test_the_answer_says_what_attention_it_models_and_whether_it_fits():
    """Llama 3 8B at batch 1 × 4,096 on 80 GiB, the README's example: by hand, the written-out attention saves
    32 layers × 32 heads × 4,096² × (4 bytes of fp32 softmax + its 2-byte bf16 copy) = 96.0 GiB of scores."""
    from core.experiment import Context, drive
    from core.experiments.estimate import answer_lines, run

    cfg = EstimateConfig(model="llama-3-8b", precision="bf16-autocast", batch=1, context=4096, memory_gib=80)
    out, _ = drive(run(cfg, Context("cpu", "CPU")))
    assert out.meta["attention_scores_bytes"] == 32 * 32 * 4096**2 * 6
    lines = answer_lines(out.rows, out.meta)
    assert "attention written out: scores, causal mask, softmax, @V (saves the b·h·s² scores)" in lines[0]
    assert lines[1].startswith("Does not fit in 80.0 GiB, not even batch 1: it needs ")
    assert lines[2].startswith("96.0 GiB of it is the b·h·s² attention scores")
    assert out.meta["fused_attention_peak_estimated_bytes"] < out.meta["peak_estimated_bytes"] - 90 * 2**30
    fused, _ = drive(run(EstimateConfig(**(cfg.setup() | {"attention": "sdpa"}), memory_gib=80), Context("cpu", "CPU")))
    assert fused.meta["attention_scores_bytes"] == 0 and len(answer_lines(fused.rows, fused.meta)) == 2

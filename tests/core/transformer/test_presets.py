"""Your own model: published architectures whose counts the shapes reproduce exactly, custom dimensions with
grouped-query attention and tied embeddings, and the course model built from them."""

import json

import pytest

from core import cli
from core.errors import ConfigError
from core.transformer.presets import PRESETS, custom_spec, get_preset

# Published parameter counts (the Hugging Face model pages' safetensors counts; llama.cpp reports the same
# general.parameter_count): meta-llama/Llama-2-7b-hf, meta-llama/Meta-Llama-3-8B, mistralai/Mistral-7B-v0.1,
# meta-llama/Llama-3.2-1B.
PUBLISHED = {
    "llama-2-7b": 6_738_415_616,
    "llama-3-8b": 8_030_261_248,
    "mistral-7b": 7_241_732_096,
    "llama-3.2-1b": 1_235_814_400,
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_published_architectures_count_exactly(name):
    arch = get_preset(name)
    assert arch.param_count() == PUBLISHED[name] == arch.published_params
    assert arch.source


def test_the_course_presets_keep_their_counts():
    assert get_preset("xl").param_count() == 1_998_235_200  # 2·v·d + L·(4d² + 3d·f + 2d) + d, as before
    assert all(p.kv_heads == p.num_heads and not p.tied_embeddings for p in PRESETS.values())


@pytest.mark.parametrize(
    "spec",
    [
        custom_spec(64, 2, 8, 160, vocab=300, kv_heads=2, tied=True),
        custom_spec(96, 3, 6, 256, vocab=500, kv_heads=3),
        custom_spec(32, 1, 4, 64, vocab=100),
    ],
)
def test_the_torch_model_has_the_counted_parameters(spec):
    import torch

    from core.transformer.model import build_model

    preset = get_preset(spec)
    model = build_model(preset, 16)
    assert sum(p.numel() for p in model.parameters()) == preset.param_count()
    assert len(list(model.parameters())) == preset.param_tensors()
    assert model(torch.randint(0, preset.vocab_size, (2, 16))).shape == (2, 16, preset.vocab_size)
    if preset.tied_embeddings:
        assert model.lm_head.weight is model.token_embeddings.weight


@pytest.mark.parametrize(
    "spec, reason",
    [
        ("custom:d_model=1000,layers=2,heads=3,d_ff=10", "not divisible"),
        ("custom:d_model=96,layers=2,heads=32,d_ff=10", "must be even"),
        ("custom:d_model=64,layers=2,heads=8,kv_heads=3,d_ff=10", "not a multiple"),
        ("custom:d_model=64,layers=2,d_ff=10", "needs heads"),
        ("custom:d_model=64,layers=2,heads=8,d_ff=10,colour=red", "is not one of"),
        ("custom:d_model=64,layers=x,heads=8,d_ff=10", "whole number"),
        ("custom:d_model=64,layers=0,heads=8,d_ff=10", "between"),
        ("gpt-17", "unknown model preset"),
    ],
)
def test_bad_specs_say_why(spec, reason):
    with pytest.raises(ConfigError, match=reason):
        get_preset(spec)


def test_specs_are_canonical():
    spec = get_preset("custom: heads=8 ,d_model=64,layers=2,d_ff=160").name
    assert (
        spec
        == custom_spec(64, 2, 8, 160)
        == "custom:d_model=64,layers=2,heads=8,kv_heads=8,d_ff=160,vocab=10000,tied=0"
    )


def test_estimate_cli_plans_an_architecture_and_a_custom_model(capsys):
    assert (
        cli.main(
            [
                "estimate",
                "--model",
                "llama-3-8b",
                "--precision",
                "bf16",
                "--batch",
                "1",
                "--context",
                "128",
                "--no-save",
                "--json",
                "--device",
                "cpu",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["meta"]["params"] == 8_030_261_248
    assert out["meta"]["breakdown_bytes"]["parameters"] == 2 * 8_030_261_248  # bf16 weights
    spec = custom_spec(512, 4, 8, 1408, vocab=32000, kv_heads=2, tied=True)
    assert cli.main(["estimate", "--model", spec, "--no-save", "--json", "--device", "cpu"]) == 0
    # by hand: head 64, kv dim 2·64 = 128; per layer q 512² + k, v 512·128 each + out 512² + SwiGLU 3·512·1408
    # + two norms 2·512 = 2,819,072; 4 layers + tied embedding 32000·512 + final norm 512
    assert json.loads(capsys.readouterr().out)["meta"]["params"] == 4 * 2_819_072 + 32_000 * 512 + 512 == 27_660_800
    assert cli.main(["estimate", "--model", "custom:d_model=10", "--no-save", "--device", "cpu"]) == 2
    assert "needs layers, heads, d_ff" in capsys.readouterr().err

"""Measured training-step memory on CPU (profiler events) against the estimate and hand arithmetic."""

import pytest

from core.experiment import Context, drive
from core.experiments.train_memory import TrainMemoryConfig, measure, run
from core.transformer.planner import plan

CPU = Context("cpu", "CPU")


def _run(cfg):
    return drive(run(cfg, CPU))[0]


OPTIMIZERS = ("sgd", "sgd-momentum", "adamw")
PRECISIONS = ("fp32", "bf16-autocast", "fp16-autocast", "bf16")
MODELS = (("tiny", 2, 128), ("mini", 2, 64))
# every optimizer with every precision, the model alternating so that each pair of any two of the three settings
# is measured at least once (a pairwise design: 12 measured steps where the full product is 24)
PAIRWISE = [(o, p, *MODELS[(i + j) % 2]) for i, o in enumerate(OPTIMIZERS) for j, p in enumerate(PRECISIONS)]


def test_the_design_meets_every_pair_of_settings():
    pairs = (
        {(o, p) for o, p, *_ in PAIRWISE},
        {(o, m) for o, _, m, *_ in PAIRWISE},
        {(p, m) for _, p, m, *_ in PAIRWISE},
    )
    models = [m for m, *_ in MODELS]
    assert pairs == (
        {(o, p) for o in OPTIMIZERS for p in PRECISIONS},
        {(o, m) for o in OPTIMIZERS for m in models},
        {(p, m) for p in PRECISIONS for m in models},
    )


@pytest.mark.parametrize("optimizer,precision,model,batch,context", PAIRWISE)
def test_estimate_within_10_percent_on_cpu(model, batch, context, precision, optimizer):
    cfg = TrainMemoryConfig(model=model, precision=precision, optimizer=optimizer, batch=batch, context=context)
    measured = measure(cfg, "cpu")
    estimated = plan(cfg.estimate_config("cpu")).peak_estimated_bytes
    assert abs(estimated - measured["peak_bytes"]) <= 0.10 * measured["peak_bytes"]


def test_peak_in_backward_detected_and_cross_entropy_sized():
    # tiny at 4 x 256: the logits are 4·256·10000 fp32 = 41 MB; at the start of backward the saved log-probs,
    # their gradient and the logits' gradient coexist, which is more than anything in the forward pass.
    out = _run(TrainMemoryConfig(model="tiny", optimizer="sgd", batch=4, context=256))
    assert out.meta["peak_phase"] == "backward"
    assert out.meta["breakdown_measured_bytes"]["temporaries"] >= 2 * 4 * 256 * 10_000 * 4
    assert out.meta["peak_measured_bytes"] == out.meta["trace_peak_bytes"]


def test_peak_in_optimizer_detected_for_tiny_batch():
    # batch 1 x 8 tokens: no activations to speak of; AdamW's sqrt(v) temporaries on top of weights+grads+state.
    out = _run(TrainMemoryConfig(model="tiny", optimizer="adamw", batch=1, context=8))
    n = 2 * 10_000 * 64 + 2 * (4 * 64 * 64 + 3 * 64 * 256 + 2 * 64) + 64
    m = out.meta["breakdown_measured_bytes"]
    assert out.meta["peak_phase"] == "optimizer"
    assert m["parameters"] == 4 * n and m["gradients"] == 4 * n
    assert 8 * n <= m["optimizer_state"] <= 8 * n + 1024  # two moments + per-tensor step scalars


def test_set_to_none_false_keeps_gradients_and_timeline_has_phases():
    out = _run(TrainMemoryConfig(model="tiny", optimizer="sgd", batch=1, context=16, set_to_none=False, steps=2))
    phases = {b["phase"] for b in out.meta["bands"]}
    assert phases == {"forward", "backward", "optimizer", "zero_grad"}
    assert min(r["gradients"] for r in out.rows) > 0  # never freed between steps
    assert {"t_ms", "total_bytes", "parameters", "activations"} <= set(out.rows[0])


def test_tf32_is_unsupported_on_cpu():
    from core.errors import Unsupported

    with pytest.raises(Unsupported, match="unsupported on CPU"):
        _run(TrainMemoryConfig(precision="tf32"))


@pytest.mark.gpu
@pytest.mark.parametrize("model", ["small", "medium", "large", "xl"])
@pytest.mark.parametrize("precision", ["fp32", "tf32", "bf16-autocast", "fp16-autocast", "bf16"])
@pytest.mark.parametrize("optimizer", ["sgd", "sgd-momentum", "adamw"])
def test_estimate_within_10_percent_on_gpu(model, precision, optimizer):
    import torch

    from core.transformer.planner import device_total_bytes, peak

    cfg = TrainMemoryConfig(model=model, precision=precision, optimizer=optimizer, batch=4, context=256)
    need = device_total_bytes(peak(cfg.estimate_config("cuda")).total_bytes, "cuda")
    if need > torch.cuda.get_device_properties(0).total_memory:
        pytest.skip(f"{model} {precision} {optimizer} needs ~{need / 2**30:.1f} GiB by the estimate")
    out = _run_gpu(cfg)
    assert abs(out.meta["error_pct"]) <= 10.0, out.meta


def _run_gpu(cfg):
    return drive(run(cfg, Context("cuda:0", "GPU")))[0]


def test_gpu_recording_takes_no_stack_traces_and_bounds_its_buffer(monkeypatch):
    """torch's defaults (context="all", stacks="all", max_entries=sys.maxsize) unwind C++ stacks on every
    allocation; a public report measured one dump at 461 s against 4 s with stacks="python"."""
    import torch

    from core.experiments.train_memory import HISTORY_MAX_ENTRIES, _Recorder

    calls = []
    monkeypatch.setattr(torch.cuda.memory, "_record_memory_history", lambda *a, **k: calls.append((a, k)))
    recorder = _Recorder("cuda:0")
    recorder.__enter__()
    recorder.__exit__(RuntimeError, RuntimeError("a step failed"), None)
    (args, start), (_, stop) = calls
    assert args == () and start == {
        "enabled": "all",
        "context": None,
        "stacks": "python",
        "max_entries": HISTORY_MAX_ENTRIES,
    }
    assert HISTORY_MAX_ENTRIES <= 10_000_000 and stop == {"enabled": None}


def test_a_full_history_buffer_is_called_incomplete():
    from core.measure.history import overflowed

    assert overflowed([{}] * 5, 5) and not overflowed([{}] * 4, 5)


def test_a_step_that_cannot_fit_is_refused_before_the_model_is_built(monkeypatch):
    """Issue 15 finding 1: 2.7B at batch 64 × 4096 (6.9 TB planned) grew to 19 GiB RSS and kept going."""
    from core.errors import DoesNotFit

    monkeypatch.setattr(
        "core.experiments.train_memory.measure", lambda *a: pytest.fail("the step was measured although it cannot fit")
    )
    cfg = TrainMemoryConfig(model="2.7B", batch=64, context=4096)
    with pytest.raises(DoesNotFit) as refused:
        drive(run(cfg, CPU))
    planned = plan(cfg.estimate_config("cpu")).device_total_estimated_bytes
    assert refused.value.meta["refused"]["need_bytes"] == planned > 6 * 2**40
    assert refused.value.meta["refused"]["limit_bytes"] < planned and "only" in str(refused.value)

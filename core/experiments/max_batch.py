"""``max-batch``: the planner's "max batch that fits", confirmed with real steps.

A binary search around the planner's answer where every probe is a fresh Python process (so no
cached block or CUDA context survives from the previous probe) and every allocation failure is "does
not fit" — near the limit it may surface as ``torch.cuda.OutOfMemoryError`` or as another error
(cuBLAS workspace, a lazily loaded kernel module); each row says which one it was.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Literal

from core.errors import ConfigError
from core.experiment import Context, Experiment, Output, Progress
from core.hardware.device import current_device
from core.hardware.memory import allocation_failure
from core.rows.max_batch import BatchProbe, MaxBatchSummary
from core.text import first_line
from core.transformer.planner import EstimateConfig, MeasuredStep, need_bytes, plan
from core.transformer.presets import PRESET_NAMES, OptimizerName, Precision, get_preset

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclass(frozen=True)
class MaxBatchConfig:
    # The CLI and config_from_dict read the choices from this Literal, built at run time from the preset table.
    model: Literal[PRESET_NAMES] = field(default="small", metadata={"help": "model preset"})  # pyright: ignore[reportInvalidTypeForm]
    precision: Precision = field(default="bf16-autocast", metadata={"help": "precision mode"})
    optimizer: OptimizerName = field(default="adamw", metadata={"help": "optimizer"})
    context: int = field(default=256, metadata={"help": "tokens per sequence"})
    checkpointing: bool = field(default=False, metadata={"help": "activation checkpointing per layer"})
    max_probes: int = field(default=12, metadata={"help": "real steps the binary search may run"})

    def __post_init__(self) -> None:
        get_preset(self.model)
        if not 1 <= self.context <= 65_536:
            raise ConfigError(f"context must be between 1 and 65536 tokens, got {self.context}")
        if not 1 <= self.max_probes <= 40:
            raise ConfigError(f"max_probes must be between 1 and 40, got {self.max_probes}")


def binary_search_max(fits: Callable[[int], bool], guess: int, max_probes: int) -> tuple[int, list[tuple[int, bool]]]:
    """Largest b with fits(b), searching around ``guess``; returns it (0: not even 1) and the probes run."""
    probes: list[tuple[int, bool]] = []

    def probe(b: int) -> bool:
        ok = fits(b)
        probes.append((b, ok))
        return ok

    guess = max(1, guess)
    if probe(guess):
        lo, hi = guess, None
        while hi is None and len(probes) < max_probes:
            nxt = lo * 2
            if probe(nxt):
                lo = nxt
            else:
                hi = nxt
        if hi is None:
            return lo, probes
    else:
        hi, lo = guess, 0
    while hi - lo > 1 and len(probes) < max_probes:
        mid = (lo + hi) // 2
        if probe(mid):
            lo = mid
        else:
            hi = mid
    return lo, probes


def probe_step(values: dict, device: str) -> dict:
    """One warm-up and one measured step in *this* process (run by :func:`_fresh_probe` in a child)."""
    import torch

    cfg = MeasuredStep(**values)
    from core.transformer.model import random_batch
    from core.transformer.training import build_step

    try:
        with current_device(device):
            step = build_step(cfg, device)
            x, y = random_batch(cfg.batch, cfg.context, get_preset(cfg.model).vocab_size, device)
            for _ in range(2):
                step.run(x, y)
            torch.cuda.synchronize(device)
            return {"fits": True, "peak_bytes": torch.cuda.max_memory_allocated(device)}
    except Exception as exc:  # noqa: BLE001 - every allocation failure is "does not fit"; the rest is raised
        kind = allocation_failure(exc)
        if kind is None:
            raise
        return {"fits": False, "failure": kind, "error": first_line(exc)}


def _fresh_probe(values: dict, device: str) -> dict:
    code = (
        "import json, sys; from core.experiments.max_batch import probe_step; "
        "print(json.dumps(probe_step(json.loads(sys.argv[1]), sys.argv[2])))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, json.dumps(values), device],
        capture_output=True,
        text=True,
        cwd=_REPO_ROOT,
        timeout=600,
    )
    if proc.returncode != 0:
        # A child killed while allocating (a CUDA error raised outside Python, at context or module load)
        # is still "does not fit" when its last words say an allocation failed.
        last = (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
        kind = allocation_failure(proc.stderr)
        if kind is None:
            raise RuntimeError(f"probe at batch {values['batch']} crashed: {last}")
        return {"fits": False, "failure": kind, "error": f"probe process ended: {last[:300]}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_max_batch(cfg: MaxBatchConfig, ctx: Context):
    if not ctx.is_cuda:
        raise ctx.unsupported(
            "a CPU has no device-memory limit to search (system RAM would swap or be killed); "
            "the planner's estimate is shown instead"
        )
    from core.hardware.device import describe

    total = describe(ctx.device)["total_memory_bytes"]
    est_cfg = EstimateConfig(
        model=cfg.model,
        precision=cfg.precision,
        optimizer=cfg.optimizer,
        batch=1,
        context=cfg.context,
        checkpointing=cfg.checkpointing,
        target="cuda",
    )
    ctx.check_fits(
        need_bytes(est_cfg),
        f"max-batch of {cfg.model} at batch 1 (context {cfg.context}, {cfg.precision}) by the memory planner",
    )
    guess = plan(est_cfg, total).max_batch_estimated or 0  # a GPU always gives its memory: an int
    rows: list[dict] = []
    base = {
        "model": cfg.model,
        "precision": cfg.precision,
        "optimizer": cfg.optimizer,
        "context": cfg.context,
        "checkpointing": cfg.checkpointing,
    }

    def fits(b: int) -> bool:
        result = _fresh_probe(base | {"batch": b}, ctx.device)
        est = plan(replace(est_cfg, batch=b)).peak_estimated_bytes
        probe = BatchProbe(b, result["fits"], result.get("peak_bytes"), est, result.get("failure"), result.get("error"))
        rows.append(probe.to_row())
        return result["fits"]

    found, _ = binary_search_max(fits, guess, cfg.max_probes)
    yield Progress(len(rows), len(rows), f"max batch {found}", rows=tuple(rows))
    return Output(
        rows=rows,
        meta=MaxBatchSummary(found, guess, total, asdict(cfg)).to_meta(),
    )


EXPERIMENTS = [
    Experiment(
        name="max-batch",
        title="Max batch that fits (real steps)",
        config_type=MaxBatchConfig,
        run=run_max_batch,
        description="binary search of real steps, each in a fresh process",
    )
]

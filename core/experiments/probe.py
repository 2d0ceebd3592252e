"""``probe``: a diagnostic experiment that misbehaves on purpose.

It exists so the tests (and a doubting user, ``python -m core probe --mode segfault``) can watch the
worker frame survive a child that raises, exits, segfaults, hangs, runs out of memory or prints
garbage to stdout. Hidden from the dashboard.
"""

from __future__ import annotations

import ctypes
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Literal

from core.errors import ConfigError
from core.experiment import Context, Experiment, Output, Progress
from core.rows.probe import ProbeStep

Mode = Literal["ok", "sleep", "raise", "exit", "segfault", "oom", "unsupported", "print"]


@dataclass(frozen=True)
class ProbeConfig:
    mode: Mode = field(default="ok", metadata={"help": "how the probe behaves"})
    steps: int = field(default=3, metadata={"help": "progress events before misbehaving"})
    seconds: float = field(default=0.0, metadata={"help": "sleep per step"})

    def __post_init__(self) -> None:
        if not 0 <= self.steps <= 10_000:
            raise ConfigError(f"steps must be between 0 and 10000, got {self.steps}")
        if not 0 <= self.seconds <= 3600:
            raise ConfigError(f"seconds must be between 0 and 3600, got {self.seconds}")


def run(cfg: ProbeConfig, ctx: Context):
    import torch

    for i in range(cfg.steps):
        time.sleep(cfg.seconds)
        yield Progress(i + 1, cfg.steps, f"step {i + 1}", rows=(ProbeStep(i + 1, time.time()).to_row(),))
    if cfg.mode == "sleep":
        time.sleep(3600)
    elif cfg.mode == "raise":
        raise RuntimeError("probe raised on purpose")
    elif cfg.mode == "exit":
        sys.stderr.write("probe exiting with os._exit(1)\n")
        sys.stderr.flush()
        os._exit(1)
    elif cfg.mode == "segfault":
        ctypes.string_at(0)
    elif cfg.mode == "oom":
        torch.empty(2**50, dtype=torch.uint8, device=ctx.device)  # 1 PiB: no device has it
    elif cfg.mode == "unsupported":
        raise ctx.unsupported("the probe pretends this device lacks a feature")
    elif cfg.mode == "print":
        print("garbage on stdout from Python")
        os.write(1, b"garbage on fd 1 from C-level code\n")
    rows = [ProbeStep(i + 1).to_row() for i in range(cfg.steps)]
    return Output(rows=rows, meta={"pid": os.getpid(), "env_alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF")})


EXPERIMENTS = [
    Experiment(
        name="probe",
        title="Worker probe",
        config_type=ProbeConfig,
        run=run,
        description=(__doc__ or "").partition("\n")[0],
        command=False,
    )
]

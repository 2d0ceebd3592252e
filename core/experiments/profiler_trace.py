"""``profiler-trace``: import a Chrome/Kineto profiler trace recorded anywhere and report what its GPU did.

Parsed in this worker process (never in the dashboard's) through the bounded reader: kernel groups (the
step benchmark's), top kernels, busy vs idle, compute / copy / communication overlap and a per-step
breakdown where the trace has ``ProfilerStep`` annotations (:mod:`core.workload.trace` defines each
figure). A file that is not a trace is refused and nothing is stored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from core.errors import ConfigError
from core.experiment import Context, Output, Progress, file_import
from core.workload import examples
from core.workload.files import check_file, read_imported


@dataclass(frozen=True)
class ProfilerTraceConfig:
    path: str = field(
        default="",
        metadata={
            "help": "trace file: .json or .json.gz (export_chrome_trace, tensorboard_trace_handler)",
            "stored": False,  # where it lay: the run names the file in its meta (name, size, digest)
        },
    )
    top_kernels: int = field(default=20, metadata={"help": "kernels listed"})
    example: str = field(
        default="", metadata={"help": "a trace shipped in examples/, recorded elsewhere (python -m core examples)"}
    )

    def __post_init__(self) -> None:
        if not 1 <= self.top_kernels <= 500:
            raise ConfigError(f"top_kernels must be between 1 and 500, got {self.top_kernels}")
        if self.example:
            object.__setattr__(self, "path", examples.config_path(self.example, "trace", self.path))
        check_file(self.path, "trace")  # last: a bad option is named even when no file is given


def run(cfg: ProfilerTraceConfig, ctx: Context):
    from core.workload.collective_calls import collective_rows
    from core.workload.findings import ranked, trace_findings
    from core.workload.host_gaps import (
        before_first_kernel_findings,
        host_gap_findings,
        host_gaps,
        host_in_steps,
        step_stall_findings,
    )
    from core.workload.op_flops import tensor_core_findings, tensor_core_use
    from core.workload.ops import op_breakdown, op_findings
    from core.workload.trace import analyse_trace, read_trace

    path = Path(cfg.path)
    data, file = yield from read_imported(path, read_trace, 2)
    yield Progress(1, 2, f"analysing {data.events:,} events")
    rows, meta = analyse_trace(data, cfg.top_kernels)
    steps = [r for r in rows if r["kind"] == "step"]
    if meta.get("gpu_activities"):
        meta["host_gaps"], by_step = host_gaps(data, meta["device"], steps=steps)
        for step, held in zip(steps, by_step):
            step.update(held)
        meta["host_before_first_kernel"], lived = host_in_steps(data, meta["device"], steps)
        for step, held in zip(steps, lived):
            step.update(held)
        meta.update(op_breakdown(data, meta["device"], cfg.top_kernels))
        meta["tensor_cores"] = tensor_core_use(data, meta["device"])
        rows += collective_rows(data, meta["device"])
    # the answer first, the most time first and at most three: what the host did before the kernels and while the
    # GPU idled, the operators' patterns and the tensor cores left unused (each naming an operator, a module or a
    # kernel), the summary's findings
    meta["findings"] = ranked(
        before_first_kernel_findings(meta)
        + step_stall_findings(steps)  # of equal times, the one step's stall says more than the whole trace's cause
        + host_gap_findings(meta, steps)
        + op_findings(meta)
        + tensor_core_findings(meta)
        + trace_findings(meta, rows)
    )
    meta.update({**file, "recorded_on": "the machine that recorded the trace (imported file)"})
    if cfg.example:
        examples.label(meta, cfg.example)
    yield Progress(2, 2, "done")
    return Output(rows=rows, meta=meta)


EXPERIMENTS = [
    file_import(
        "profiler-trace", "Profiler trace (imported)", ProfilerTraceConfig, run, __doc__, lambda cfg: (cfg.path,)
    )
]

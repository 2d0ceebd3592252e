"""``profiler-trace``: import a Chrome/Kineto profiler trace recorded anywhere and report what its GPU did.

Parsed in this worker process (never in the dashboard's) through the bounded reader: kernel groups (the
step benchmark's), top kernels, busy vs idle, compute / copy / communication overlap and a per-step
breakdown where the trace has ``ProfilerStep`` annotations (:mod:`core.workload.trace.timeline` defines each
figure). A file that is not a trace is refused and nothing is stored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from core.errors import ConfigError
from core.experiment import Context, Output, Progress, file_import
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
        if self.example:  # the catalogue only then: a file's import never loads it
            from core.workload import examples

            object.__setattr__(self, "path", examples.config_path(self.example, "trace", self.path))
        check_file(self.path, "trace")  # last: a bad option is named even when no file is given


def run(cfg: ProfilerTraceConfig, ctx: Context):
    from core.workload.trace.analysis import analyse
    from core.workload.trace.timeline import read_trace

    path = Path(cfg.path)
    data, file = yield from read_imported(path, read_trace, 2)
    yield Progress(1, 2, f"analysing {data.events:,} events")
    tables, meta = analyse(data, cfg.top_kernels)
    meta.update({**file, "recorded_on": "the machine that recorded the trace (imported file)"})
    if cfg.example:
        from core.workload import examples

        examples.label(meta, cfg.example)
    yield Progress(2, 2, "done")
    return Output(rows=tables.rows(), meta=meta)  # each kind of row typed, in its table


EXPERIMENTS = [
    file_import(
        "profiler-trace", "Profiler trace (imported)", ProfilerTraceConfig, run, __doc__, lambda cfg: (cfg.path,)
    )
]

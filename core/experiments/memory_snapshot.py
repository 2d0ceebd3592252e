"""``memory-snapshot``: import a CUDA memory snapshot recorded anywhere and replay what it says.

The file (``torch.cuda.memory._dump_snapshot`` pickle of any protocol, its JSON, or gzip of either) is
read in this worker process — never in the dashboard's — through the bounded, class-refusing reader,
streamed so a 1 GB file stays within a few GB of RAM. The run keeps the summary (peak allocated and
reserved with their time and stack, the baseline from before recording, categories and the rule behind
each, the top allocation sites at the peak) and a few thousand points of the timeline; the whole trace
is kept beside the store (:mod:`core.workload.snapshot.detail`) for the page's zoom and segment maps. A refused
file is not stored at all (``store_failures=False``): the message says what is wrong with it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from core.errors import ConfigError
from core.experiment import Context, Output, Progress, file_import
from core.workload.files import check_file, read_imported

OVERVIEW_POINTS = 2000


@dataclass(frozen=True)
class MemorySnapshotConfig:
    path: str = field(
        default="",
        metadata={
            "help": "snapshot file: a _dump_snapshot pickle (any protocol), its JSON, or .gz of either",
            "stored": False,  # where it lay: the run names the file in its meta (name, size, digest)
        },
    )
    trace_device: int | None = field(
        default=None, metadata={"help": "device index whose trace to replay (default: the one with the most events)"}
    )
    keep_detail: bool = field(
        default=True,
        metadata={"help": "keep the whole trace beside the store for zoom and segment maps (off: nothing is written)"},
    )
    example: str = field(
        default="", metadata={"help": "a snapshot shipped in examples/, recorded elsewhere (python -m core examples)"}
    )

    def __post_init__(self) -> None:
        if self.trace_device is not None and not 0 <= self.trace_device <= 1024:
            raise ConfigError(f"trace_device must be a device index between 0 and 1024, got {self.trace_device}")
        if self.example:  # the catalogue only then: a file's import never loads it
            from core.workload import examples

            object.__setattr__(self, "path", examples.config_path(self.example, "snapshot", self.path))
        check_file(self.path, "snapshot")  # last: a bad option is named even when no file is given


def overview_rows(analysis, max_points: int = OVERVIEW_POINTS) -> list[dict]:
    """The timeline at ≤ ``max_points`` points (each bin's highest and lowest allocated kept), with categories."""
    from core.memory.series import thin_indices  # numpy: loaded by the import's worker, not by `--help`

    points = thin_indices(analysis.allocated, max_points, envelope=True)
    t_ms = analysis.point_time_ms(points)
    cats = analysis.category_series(points)
    rows = []
    for j, p in enumerate(points):
        row = {
            "point": int(p),
            "t_ms": float(t_ms[j]),
            "allocated_bytes": int(analysis.allocated[p]),
            "reserved_bytes": int(analysis.reserved[p]),
            "fragmentation_bytes": int(analysis.reserved[p] - analysis.allocated[p]),
        }
        row.update({f"{name}_bytes": int(values[j]) for name, values in cats.items()})
        rows.append(row)
    return rows


def run(cfg: MemorySnapshotConfig, ctx: Context):
    from core.workload.findings import snapshot_findings, to_store
    from core.workload.snapshot import detail
    from core.workload.snapshot.analysis import analyse
    from core.workload.snapshot.reader import read_snapshot

    path = Path(cfg.path)
    snapshot, file = yield from read_imported(path, read_snapshot, 3)
    if cfg.trace_device is not None and cfg.trace_device not in snapshot.devices():
        raise ConfigError(f"trace_device: {path.name} has no device {cfg.trace_device}; it has {snapshot.devices()}")
    yield Progress(1, 3, f"replaying {sum(len(t) for t in snapshot.traces.values()):,} events")
    analysis = analyse(snapshot, cfg.trace_device)
    summary = analysis.summary()
    rows = overview_rows(analysis)
    yield Progress(2, 3, "keeping the full trace beside the store" if cfg.keep_detail else "nothing kept (no save)")
    trace = snapshot.traces.get(analysis.device)
    summary.update(
        {
            **file,
            "quirks": {**(trace.quirks if trace is not None else {}), **snapshot.quirks},
            "detail_id": detail.save(snapshot, analysis.device) if cfg.keep_detail else None,
            "recorded_on": "the machine that recorded the snapshot (imported file)",
            "x_axis": "ms since the first event" if analysis.has_times else "event number",
        }
    )
    if cfg.example:
        from core.workload import examples

        examples.label(summary, cfg.example)
    summary["findings"] = to_store(snapshot_findings(summary))
    yield Progress(3, 3, "done")
    return Output(rows=rows, meta=summary)


EXPERIMENTS = [
    file_import(
        "memory-snapshot",
        "Memory snapshot (imported)",
        MemorySnapshotConfig,
        run,
        __doc__,
        lambda cfg: (cfg.path,),
        fresh_process=True,
    )
]

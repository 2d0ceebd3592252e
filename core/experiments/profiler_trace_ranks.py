"""``profiler-trace-ranks``: import every rank's profiler trace of one job and put the ranks side by side.

A sibling of ``profiler-trace`` rather than a mode of it: its config is a list of files (or a folder), its
rows are per rank and per rank's step, and its figures compare ranks, so it has its own plot module. Each
rank is read and analysed by the single-trace analysis in this worker, one at a time, and only its summary
kept (:mod:`core.workload.trace.ranks`); the straggler and the findings are derived once, here. Files that are not
ranks of one job, a file that is not a trace, or more files than the limit are refused: nothing is stored.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from core.errors import ConfigError
from core.experiment import Context, Output, Progress, file_import


@dataclass(frozen=True)
class ProfilerTraceRanksConfig:
    paths: tuple[str, ...] = field(
        default=(),
        metadata={
            "help": "a folder of rank traces (rank-N.json[.gz]), or the rank trace files",
            "stored": False,  # where they lay: the run names each file in its meta (names, digests)
        },
    )
    example: str = field(default="", metadata={"help": "a set of rank traces shipped in examples/, recorded elsewhere"})

    def __post_init__(self) -> None:
        from core.workload import examples
        from core.workload.trace.ranks import rank_files

        if self.example:
            object.__setattr__(self, "paths", examples.rank_paths(self.example, self.paths))
        if not self.paths:
            raise ConfigError("paths: name a folder of rank traces, or the rank trace files")
        rank_files(self.paths)  # exist, not too many: judged before the job is queued


def run(cfg: ProfilerTraceRanksConfig, ctx: Context):
    from core.workload.files import names_of, sha256
    from core.workload.findings import ranks_findings, to_store
    from core.workload.trace.ranks import check_one_job, combine, rank_files, read_rank

    files = rank_files(cfg.paths)
    total = len(files) + 1
    ranks, seen, digests = [], {}, {}
    for i, path in enumerate(files):
        yield Progress(i, total, f"reading {path.name} ({i + 1} of {len(files)})")
        rank = read_rank(path)
        if ranks:
            check_one_job(ranks[0], rank, seen)
        seen[rank.row.rank] = path.name
        digests[rank.row.rank] = sha256(path)
        ranks.append(rank)
    tables, meta = combine(ranks)
    rows = tables.rows()  # each kind of row typed, in its table
    meta["findings"] = to_store(ranks_findings(meta, tables))
    meta.update(
        {
            "file": names_of(files),
            "file_bytes": sum(p.stat().st_size for p in files),
            "files_sha256": [digests[r] for r in meta["ranks"]],  # in the order of meta["files"]: by rank
            "recorded_on": "the machines that recorded the traces (imported files)",
        }
    )
    if cfg.example:
        from core.workload import examples

        examples.label(meta, cfg.example)
    yield Progress(total, total, "done")
    return Output(rows=rows, meta=meta)


def _files(cfg: ProfilerTraceRanksConfig) -> list[str]:
    from core.workload.trace.ranks import rank_files

    return [str(p) for p in rank_files(cfg.paths)]


EXPERIMENTS = [
    file_import(
        "profiler-trace-ranks",
        "Profiler traces of a job's ranks (imported)",
        ProfilerTraceRanksConfig,
        run,
        __doc__,
        _files,
    )
]

"""``flight-recorder``: read every rank's flight-recorder dump of a hung job and name the collective and the
rank that stopped it.

An import like ``profiler-trace-ranks``: its config is the dumps (a folder or the files), read one at a time in
a worker that imports no torch (:mod:`core.workload.hang.dump`), matched across ranks by sequence id
(:mod:`core.workload.hang.analysis`), the diagnosis derived once (:mod:`core.workload.hang.findings`). Files that are not
one job's dumps are refused: nothing is stored.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass, field

from core.errors import ConfigError
from core.experiment import Context, Output, Progress, file_import


@dataclass(frozen=True)
class FlightRecorderConfig:
    paths: tuple[str, ...] = field(
        default=(),
        metadata={
            "help": "a folder of one job's per-rank dumps (TORCH_FR_DUMP_TEMP_FILE + rank), or the dump files",
            "stored": False,  # where they lay: the run names each file in its meta (names, digests)
        },
    )
    path: str = field(default="", metadata={"help": "one dump file (one rank)", "stored": False})
    example: str = field(default="", metadata={"help": "a set of dumps shipped in examples/"})

    def __post_init__(self) -> None:
        from core.workload import examples
        from core.workload.hang.dump import dump_files

        if self.example:
            object.__setattr__(self, "paths", examples.dump_paths(self.example, self.paths or (self.path,)))
        elif self.path:
            object.__setattr__(self, "paths", (*self.paths, self.path))
        if not self.paths:
            raise ConfigError("paths: name a folder of one job's flight-recorder dumps, or the dump files")
        dump_files(self.paths)  # exist, not too many: judged before the job is queued


def run(cfg: FlightRecorderConfig, ctx: Context):
    from core.workload.files import names_of, sha256
    from core.workload.findings import to_store
    from core.workload.hang.analysis import analyse
    from core.workload.hang.dump import Tally, check_names, check_one_job, dump_files, read_dump
    from core.workload.hang.findings import hang_findings

    files = dump_files(cfg.paths)
    check_names(files)
    total = len(files) + 1
    dumps, digests, tally = [], {}, Tally()  # one tally: the caps hold over the whole import
    collecting = gc.isenabled()
    gc.disable()  # the entries read are kept, none is garbage: passes over millions of them only cost time
    try:
        for i, path in enumerate(files):
            yield Progress(i, total, f"reading {path.name} ({i + 1} of {len(files)})")
            dump = read_dump(path, tally)
            digests[path.name] = sha256(path)
            dumps.append(dump)
        check_one_job(dumps)
        dumps.sort(key=lambda d: d.rank)
        ranks, summary = analyse(dumps)
    finally:
        if collecting:
            gc.enable()
    rows, meta = [r.to_row() for r in ranks], summary.to_meta()
    meta["findings"] = to_store(hang_findings(summary, ranks))
    meta.update(
        {
            "file": names_of(files),
            "files": [d.file for d in dumps],
            "file_bytes": sum(p.stat().st_size for p in files),
            "files_sha256": [digests[d.file] for d in dumps],  # in the order of meta["files"]: by rank
            "recorded_on": "the machines that ran the job (imported files)",
        }
    )
    if cfg.example:
        from core.workload import examples

        meta["example"] = examples.provenance(examples.find(cfg.example))
    yield Progress(total, total, "done")
    return Output(rows=rows, meta=meta)


def _files(cfg: FlightRecorderConfig) -> list[str]:
    from core.workload.hang.dump import dump_files

    return [str(p) for p in dump_files(cfg.paths)]


EXPERIMENTS = [
    file_import(
        "flight-recorder", "Flight-recorder dumps of a hung job (imported)", FlightRecorderConfig, run, __doc__, _files
    )
]

"""``snapshot FILE``, ``trace FILE``, ``record -o FILE -- CMD``, ``examples``: bring your own workload.

``snapshot`` and ``trace`` import a file recorded anywhere as a stored run, through the same worker
experiment the pages use (``memory-snapshot``, ``profiler-trace``): the file is parsed in a worker
process, and a refused file (a pickle naming a class, a truncated file, something that is not a
snapshot or trace) exits 2 with the reason and stores nothing; ``--example NAME`` imports a file shipped in
``examples/``, recorded elsewhere on a real GPU (``examples`` lists them). ``record`` runs a script with the
allocator's history recording on and dumps a snapshot when it ends (:mod:`core.workload.snapshot.recorder`).
"""

from __future__ import annotations

import dataclasses
import os
import sys
from typing import TYPE_CHECKING

from core.cli.imports import import_options, print_json, run_import, say, stored_text
from core.cli.output import dump
from core.rows.provenance import Provenance
from core.workload.findings import finding_lines

if TYPE_CHECKING:
    from core.result import RunResult

ORDER = 40


def register(sub, common) -> None:
    _register_snapshot(sub, common)
    _register_trace(sub, common)
    _register_trace_diff(sub, common)
    _register_examples(sub, common)
    _register_record(sub, common)


def _register_snapshot(sub, common) -> None:
    p = sub.add_parser(
        "snapshot",
        parents=[common],
        help="import a CUDA memory snapshot (pickle, JSON, .gz)",
        description="Import a torch.cuda.memory._dump_snapshot file recorded on any machine and "
        "report its peak, the stack at the peak, who holds memory there and what was "
        "allocated before recording began. Stored as a run (see `runs list`).",
    )
    p.add_argument("file", nargs="?", help="the snapshot: pickle of any protocol, JSON, or .gz of either")
    _example_option(p, "snapshot")
    p.add_argument("--trace-device", type=int, help="device index to replay (default: the one with the most events)")
    import_options(p)
    p.set_defaults(handler=snapshot)


def _register_trace(sub, common) -> None:
    p = sub.add_parser(
        "trace",
        parents=[common],
        help="import a Chrome/Kineto profiler trace (.json, .json.gz), or every rank of a job (a folder)",
        description="Import a torch.profiler / Kineto Chrome trace recorded on any machine: kernel "
        "groups, top kernels, GPU busy vs idle, compute/memcpy/communication overlap and "
        "a per-step breakdown. A folder or several files are the ranks of one job: per-rank times, exposed "
        "communication, each step on each rank, and the straggler. Stored as a run.",
    )
    p.add_argument(
        "file",
        nargs="*",
        help="the trace: .json or .json.gz as export_chrome_trace / tensorboard_trace_handler write; a folder of "
        "rank traces (rank-N.json[.gz]) or several files: the ranks of one job",
    )
    _example_option(p, "trace")
    p.add_argument("--top", type=int, default=20, help="kernels listed [default: 20]")
    import_options(p)
    p.set_defaults(handler=trace)


def _register_trace_diff(sub, common) -> None:
    p = sub.add_parser(
        "trace-diff",
        parents=[common],
        help="compare two profiler traces: what got slower, by kernel group and kernel",
        description="Compare two profiler traces (files, read as `trace` reads them, or ids of stored trace "
        "imports): kernel time and launches per group and per kernel on each side and the change, the largest "
        "slow-down first. Kernels are matched by a normalised name, groups across vendors.",
    )
    p.add_argument("base", help="the trace before: a .json/.json.gz file or a stored run id")
    p.add_argument("new", help="the trace after: a .json/.json.gz file or a stored run id")
    p.add_argument(
        "--top",
        type=int,
        default=15,
        help="operator and kernel rows printed, the largest changes [default: 15; --json gives all]",
    )
    p.set_defaults(handler=trace_diff, no_save=True, name="")


def _register_examples(sub, common) -> None:
    p = sub.add_parser(
        "examples",
        parents=[common],
        help="list the snapshots and traces recorded on real GPUs that ship in examples/",
        description="Memory snapshots and profiler traces recorded elsewhere, on real GPUs, by others (public, "
        "permissively licensed): what each is, its GPU, its source and licence, and the command that opens it. "
        "A run imported from one is labelled recorded elsewhere with its GPU and source.",
    )
    p.set_defaults(handler=list_examples, no_save=True, name="")


def _register_record(sub, common) -> None:
    p = sub.add_parser(
        "record",
        help="run a script with CUDA memory recording on and dump a snapshot",
        description="Runs COMMAND (e.g. `python train.py --epochs 1`) with the caching allocator's "
        "history recorded and writes a snapshot pickle when it ends. Without CUDA it says "
        "so and runs the command unchanged. -o is checked first: a folder, a missing folder or a file that is not "
        "a regular file exits 2 before anything runs. Ctrl-C/SIGTERM stop the command and the snapshot is still "
        "written. Exit code: the command's.",
    )
    p.add_argument(
        "-o", "--output", default="snapshot.pickle", help="snapshot file to write [default: snapshot.pickle]"
    )
    p.add_argument("--max-entries", type=int, help="events kept (a ring buffer) [default: 100000]")
    p.add_argument(
        "--stacks",
        choices=("python", "all"),
        default="python",
        help="python: Python frames only (fast); all: C++ frames too (slow to dump) [default: python]",
    )
    p.add_argument(
        "--flight-recorder",
        metavar="DIR",
        help="instead: run a (torchrun) job with torch's flight recorder on, every rank's dump landing in DIR when a "
        "collective times out; `python -m core hang DIR` reads them (core/workload/hang/recorder.py)",
    )
    p.add_argument("--buffer", type=int, help="with --flight-recorder: collectives kept per rank [default: 2000]")
    p.add_argument("command", nargs="+", help="the command to run, after `--`")
    p.set_defaults(handler=record)


def _example_option(p, kind: str) -> None:
    p.add_argument(
        "--example",
        metavar="NAME",
        help=f"import a {kind} shipped in examples/, recorded elsewhere on a real GPU, instead of FILE "
        "(`python -m core examples` lists them)",
    )


def _source(args, kind: str) -> dict | int:
    """The import's file or example as config values, or exit 2 when neither or both are given."""
    if bool(args.file) == bool(args.example):
        print(
            f"error: name a {kind} FILE or --example NAME (`python -m core examples` lists them), not "
            f"{'both' if args.file else 'neither'}",
            file=sys.stderr,
        )
        return 2
    if args.example:
        args.name = args.name or f"example {args.example}"  # the stored run's name, as the pages give it
        return {"example": args.example}
    return {"path": os.path.abspath(args.file)}


def _say_example(meta: dict) -> None:
    if e := Provenance.from_meta(meta).example:
        say(f"example {e.name}: {e.title} — {e.label}, {e.source_path} at {e.commit[:12]}, {e.licence}")


def _runs_import(path) -> str:
    return f"python -m core runs import {path}"


def list_examples(args) -> int:
    from core.paths import examples_dir
    from core.units import bytes_text
    from core.workload import examples

    runs = sorted(examples_dir().glob("*.json"))
    if args.json:
        shipped = [
            examples.provenance(e)
            | {
                "path": str(examples.location(e)),
                "present": examples.present(e),
                "bytes": examples.size_bytes(e),
                "open": e.command,
            }
            for e in examples.EXAMPLES
        ]
        listed = [
            {"name": p.name, "kind": "runs", "path": str(p), "bytes": p.stat().st_size, "open": _runs_import(p)}
            for p in runs
        ]
        print(dump(shipped + listed))
        return 0
    say("Recorded elsewhere, on real GPUs, by others (examples/README.md: sources and licences):")
    for e in (e for e in examples.EXAMPLES if e.origin == examples.ELSEWHERE):
        size = bytes_text(examples.size_bytes(e)) if examples.present(e) else "missing"
        say(f"  {e.name:<22} {e.kind:<9} {e.gpu:<28} {size:>10}  {e.title}")
        say(f"  {'':<22} {e.command}   ({e.repository}, {e.licence})")
    say("Hung jobs recorded by this lab (real gloo jobs on a CPU), for the hang reader:")
    for e in (e for e in examples.EXAMPLES if e.origin == examples.THIS_LAB):
        say(f"  {e.name:<22} {e.title}")
        say(f"  {'':<22} {e.command}")
    say("The lab's own runs on real GPUs, to import into the history and compare (examples/README.md):")
    for p in runs:
        say(f"  {p.name:<40} {bytes_text(p.stat().st_size):>10}  {_runs_import(p)}")
    for e in examples.EXAMPLES:
        if not examples.present(e):
            say(f"missing: {examples.missing_text(e)}")
    return 0


def snapshot(args) -> int:
    source = _source(args, "snapshot")
    if isinstance(source, int):
        return source
    values = {**source, "keep_detail": not args.no_save}  # --no-save: nothing written
    if args.trace_device is not None:
        values["trace_device"] = args.trace_device
    code, run = run_import(args, "memory-snapshot", values)
    if code:
        return code
    if args.json:
        print_json(args, run)
        return 0
    from core.workload.snapshot.text import snapshot_lines

    _say_example(run.meta)
    for line in snapshot_lines(run.meta, stored_text(args, run)):
        say(line)
    return 0


def trace(args) -> int:
    if not args.example and (len(args.file) > 1 or (args.file and os.path.isdir(args.file[0]))):
        return trace_ranks(args)
    if args.example and not args.file and _rank_set(args.example):
        return trace_ranks(args)
    args.file = args.file[0] if len(args.file) == 1 else (args.file or None)  # several with --example: "both"
    source = _source(args, "trace")
    if isinstance(source, int):
        return source
    if not args.json:  # the text's modules load while the worker reads the file, not after it answers
        import core.workload.trace.text  # noqa: F401
    code, run = run_import(args, "profiler-trace", {**source, "top_kernels": args.top})
    if code:
        return code
    from core.rows.trace import TraceTables

    m, tables = run.meta, TraceTables.from_run(run)
    if args.json:
        kernels, steps, collectives = (
            [r.to_row() for r in t] for t in (tables.kernels, tables.steps, tables.collectives)
        )
        print_json(args, run, kernels=kernels, steps=steps, collectives=collectives)
        return 0
    from core.rows.trace_summary import TraceSummary
    from core.workload.trace.text import trace_lines

    _say_example(m)
    say(f"{TraceSummary.from_meta(m).file}: {stored_text(args, run)}")
    for line in finding_lines(m) + trace_lines(m, tables):
        say(line)
    return 0


def _rank_set(name: str) -> bool:
    from core.workload import examples

    return any(e.name == name and e.rank_set for e in examples.EXAMPLES)


def trace_ranks(args) -> int:
    """``trace DIR`` / ``trace A B …`` / ``trace --example SET``: the ranks of one job as one stored run."""
    if args.example:
        args.name = args.name or f"example {args.example}"
        values: dict = {"example": args.example}
    else:
        values = {"paths": [os.path.abspath(f) for f in args.file]}
    code, run = run_import(args, "profiler-trace-ranks", values)
    if code:
        return code
    from core.rows.trace_ranks import RankTables
    from core.rows.trace_summary import RankSetSummary

    m, t, s = run.meta, RankTables.from_run(run), RankSetSummary.from_run(run)
    if args.json:
        print_json(  # the meta's arrivals summary keeps its key: the rows have their own
            args,
            run,
            **{
                name: [r.to_row() for r in getattr(t, table)]
                for name, table in (
                    ("ranks", "ranks"),
                    ("steps", "steps"),
                    ("groups", "groups"),
                    ("host_gaps", "host_gaps"),
                    ("ops", "ops"),
                    ("arrival_ranks", "arrivals"),
                    ("collective_waits", "collective_waits"),
                )
            },
        )
        return 0
    from core.workload.trace.text import ranks_lines

    say(
        f"{s.file}: {len(t.ranks)} rank(s) of world size {s.world_size or 'unknown'} ({s.backend or 'backend unknown'}) — "
        f"{stored_text(args, run)}"
    )
    _say_example(m)
    for line in finding_lines(m) + ranks_lines(m, t):
        say(line)
    return 0


def record(args) -> int:
    from core.workload.snapshot.recorder import DEFAULT_MAX_ENTRIES, run_recorded

    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if args.flight_recorder:
        from core.workload.hang.recorder import DEFAULT_BUFFER, run_with_recorder

        return run_with_recorder(command, args.flight_recorder, args.buffer or DEFAULT_BUFFER)
    return run_recorded(command, args.output, max_entries=args.max_entries or DEFAULT_MAX_ENTRIES, stacks=args.stacks)


def _trace_side(args, what: str) -> tuple[str, RunResult] | int:
    """A side of a diff: a file imported without storing it (the most kernels an import lists), or a stored
    trace import; (label, its run), or an exit code when it cannot be read."""
    if os.path.isfile(what):
        code, run = run_import(args, "profiler-trace", {"path": os.path.abspath(what), "top_kernels": 500})
        return code if code else (os.path.basename(what), run)
    from core.cli.output import open_store

    run = open_store(args, write=False).find(what)
    if run.experiment != "profiler-trace":
        print(f"error: run {run.id[:12]} is a {run.experiment} run, not a profiler trace import", file=sys.stderr)
        return 2
    return (run.name or Provenance.from_run(run).file or run.id[:12]), run


def trace_diff(args) -> int:
    from core.rows.trace import TraceTables
    from core.workload.trace.diff import compare
    from core.workload.trace.text import diff_lines

    sides = [_trace_side(args, what) for what in (args.base, args.new)]
    for side in sides:
        if isinstance(side, int):
            return side
    (base_label, base), (new_label, new) = sides  # type: ignore[misc]
    compared = compare(TraceTables.from_run(base), base.meta, TraceTables.from_run(new), new.meta)
    if args.json:
        print(
            dump(
                {
                    "base": base_label,
                    "new": new_label,
                    "total": dataclasses.asdict(compared.total),
                    "mismatches": compared.mismatches,
                    "headline": compared.headline,
                    "rows": compared.tables.rows(),
                }
            )
        )
        return 0
    for line in diff_lines(base_label, new_label, compared, args.top):
        say(line)
    return 0

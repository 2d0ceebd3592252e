"""``snapshot FILE``, ``trace FILE``, ``record -o FILE -- CMD``, ``examples``: bring your own workload.

``snapshot`` and ``trace`` import a file recorded anywhere as a stored run, through the same worker
experiment the pages use (``memory-snapshot``, ``profiler-trace``): the file is parsed in a worker
process, and a refused file (a pickle naming a class, a truncated file, something that is not a
snapshot or trace) exits 2 with the reason and stores nothing; ``--example NAME`` imports a file shipped in
``examples/``, recorded elsewhere on a real GPU (``examples`` lists them). ``record`` runs a script with the
allocator's history recording on and dumps a snapshot when it ends (:mod:`core.workload.snapshot.recorder`).
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from core.cli.imports import import_options, print_json, run_import, say
from core.cli.output import dump
from core.text import quirk_lines
from core.workload.findings import against_text, finding_lines

if TYPE_CHECKING:
    from core.result import RunResult

ORDER = 40


def register(sub, common) -> None:
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
    p = sub.add_parser(
        "examples",
        parents=[common],
        help="list the snapshots and traces recorded on real GPUs that ship in examples/",
        description="Memory snapshots and profiler traces recorded elsewhere, on real GPUs, by others (public, "
        "permissively licensed): what each is, its GPU, its source and licence, and the command that opens it. "
        "A run imported from one is labelled recorded elsewhere with its GPU and source.",
    )
    p.set_defaults(handler=list_examples, no_save=True, name="")
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
    example = meta.get("example")
    if example:
        say(
            f"example {example['name']}: {example['title']} — {example['label']}, {example['source_path']} at "
            f"{example['commit'][:12]}, {example['licence']}"
        )


def list_examples(args) -> int:
    from core.paths import examples_dir
    from core.units import bytes_text
    from core.workload import examples, hang_examples

    listed = [
        {
            **examples.provenance(e),
            "path": str(examples.location(e)),
            "present": examples.present(e),
            "bytes": examples.size_bytes(e),
            "open": f"python -m core {e.kind} --example {e.name}",
        }
        for e in examples.EXAMPLES
    ]
    hangs = [
        {**hang_examples.provenance(s.name), "kind": "hang", "open": f"python -m core hang --example {s.name}"}
        for s in hang_examples.SETS
    ]
    runs = [
        {
            "name": p.name,
            "kind": "runs",
            "path": str(p),
            "bytes": p.stat().st_size,
            "open": f"python -m core runs import {p}",
        }
        for p in sorted(examples_dir().glob("*.json"))
    ]
    if args.json:
        print(dump(listed + hangs + runs))
        return 0
    say("Recorded elsewhere, on real GPUs, by others (examples/README.md: sources and licences):")
    for e in listed:
        size = bytes_text(e["bytes"]) if e["present"] else "missing"
        say(f"  {e['name']:<22} {e['kind']:<9} {e['gpu']:<28} {size:>10}  {e['title']}")
        say(f"  {'':<22} {e['open']}   ({e['repository']}, {e['licence']})")
    say("Hung jobs recorded by this lab (real gloo jobs on a CPU), for the hang reader:")
    for h in hangs:
        say(f"  {h['name']:<22} {h['title']}")
        say(f"  {'':<22} {h['open']}")
    say("The lab's own runs on real GPUs, to import into the history and compare (examples/README.md):")
    for r in runs:
        say(f"  {r['name']:<40} {bytes_text(r['bytes']):>10}  {r['open']}")
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
    for line in snapshot_lines(run.meta, _stored_text(args, run)):
        say(line)
    return 0


def _stored_text(args, run: RunResult) -> str:
    return "stored as run " + run.id[:12] if not args.no_save else "not stored (--no-save)"


def trace(args) -> int:
    if not args.example and (len(args.file) > 1 or (args.file and os.path.isdir(args.file[0]))):
        return trace_ranks(args)
    if args.example and not args.file and _rank_set(args.example):
        return trace_ranks(args)
    args.file = args.file[0] if len(args.file) == 1 else (args.file or None)  # several with --example: "both"
    source = _source(args, "trace")
    if isinstance(source, int):
        return source
    code, run = run_import(args, "profiler-trace", {**source, "top_kernels": args.top})
    if code:
        return code
    m = run.meta
    if args.json:
        kinds = {kind: [r for r in run.rows if r.get("kind") == kind] for kind in ("kernel", "step", "collective")}
        print_json(args, run, kernels=kinds["kernel"], steps=kinds["step"], collectives=kinds["collective"])
        return 0
    from core.workload.trace.collective_calls import collective_lines
    from core.workload.trace.host_gaps import before_first_kernel_lines, host_gap_lines
    from core.workload.trace.ops import op_lines
    from core.workload.trace.timeline import report_lines

    _say_example(m)
    say(f"{m['file']}: {'stored as run ' + run.id[:12] if not args.no_save else 'not stored (--no-save)'}")
    host = before_first_kernel_lines(m) + host_gap_lines(m)
    for line in finding_lines(m) + host + op_lines(m) + collective_lines(run.rows) + report_lines(m, run.rows):
        say(line)
    return 0


def _rank_set(name: str) -> bool:
    from core.workload import examples

    return any(e.name == name and e.ranks for e in examples.EXAMPLES)


def trace_ranks(args) -> int:
    """``trace DIR`` / ``trace A B …`` / ``trace --example SET``: the ranks of one job as one stored run."""
    from core.workload.trace.arrivals import matching_text

    if args.example:
        args.name = args.name or f"example {args.example}"
        values: dict = {"example": args.example}
    else:
        values = {"paths": [os.path.abspath(f) for f in args.file]}
    code, run = run_import(args, "profiler-trace-ranks", values)
    if code:
        return code
    m = run.meta
    ranks = [r for r in run.rows if r["kind"] == "rank"]
    if args.json:
        steps = [r for r in run.rows if r["kind"] == "step"]
        kinds = ("group", "host_gap", "op", "arrival", "collective_wait")
        of = {kind: [r for r in run.rows if r["kind"] == kind] for kind in kinds}
        print_json(  # the meta's arrivals summary keeps its key: the rows have their own
            args,
            run,
            ranks=ranks,
            steps=steps,
            groups=of["group"],
            host_gaps=of["host_gap"],
            ops=of["op"],
            arrival_ranks=of["arrival"],
            collective_waits=of["collective_wait"],
        )
        return 0
    from core.units import duration_text

    def ms(us: float) -> str:
        return duration_text(us / 1e6)

    say(
        f"{m['file']}: {len(ranks)} rank(s) of world size {m['world_size'] or 'unknown'} ({m['backend'] or 'backend unknown'}) — "
        f"{'stored as run ' + run.id[:12] if not args.no_save else 'not stored (--no-save)'}"
    )
    _say_example(m)
    for line in finding_lines(m):
        say(line)
    say(f"{'rank':>5} {'compute':>10} {'comm':>10} {'exposed':>10} {'idle':>10} {'span':>10} {'kernels':>10}  file")
    for r in ranks:
        mark = " ← straggler" if r["rank"] == m["straggler_rank"] else ""
        say(
            f"{r['rank']:>5} {ms(r['compute_us']):>10} {ms(r['communication_us']):>10} "
            f"{ms(r['exposed_communication_us']):>10} {ms(r['idle_us']):>10} {ms(r['span_us']):>10} "
            f"{ms(r['kernel_time_us']):>10}  {r['file']}{mark}"
        )
    s = m["straggler"]
    verdict = m.get("verdict") or {}
    if verdict:  # runs stored before the judgement name the rank with the most compute alone
        held = verdict["rank"]
        said = ", ".join(r.replace("_", " ") for r in verdict["reasons"])
        say(f"holding the job back: rank {held} ({said})" if held is not None else "no rank holds the job back")
    say(
        f"most compute: rank {s['rank']}, {ms(s['compute_us'])} against {against_text(s, len(m['ranks']))} "
        f"{ms(s['median_compute_us'])}: {ms(s['margin_us'])} ({s['margin_pct']:+.1f}%)"
    )
    steps = [r for r in run.rows if r["kind"] == "step"]
    if steps:
        say("step wall time per rank:")
        for step in sorted({r["step"] for r in steps}):
            on = sorted((r for r in steps if r["step"] == step), key=lambda r: r["rank"])
            say(f"  step {step:>6}: " + ", ".join(f"rank {r['rank']} {ms(r['wall_us'])}" for r in on))
    gaps = [r for r in run.rows if r["kind"] == "host_gap"]
    if gaps:
        say("the host while each rank's GPU idled (launching thread):")
        for rank in sorted({r["rank"] for r in gaps}):
            mine = sorted((r for r in gaps if r["rank"] == rank), key=lambda r: -r["time_us"])
            say(f"  rank {rank}: " + ", ".join(f"{r['cause']} {ms(r['time_us'])}" for r in mine))
    waits = [r for r in run.rows if r["kind"] == "arrival"]
    if matching := matching_text(m.get("arrivals") or {}):
        say(matching)
    if waits:
        a = m["arrivals"]
        say(
            f"rank {a['last_rank']} arrived last at {a['last_arrivals']:,}; each rank's wait for the last to arrive: "
            + ", ".join(f"rank {r['rank']} {ms(r['waited_us'])}" for r in waits)
        )
    if per_call := [r for r in run.rows if r["kind"] == "collective_wait"]:
        say("each collective's kernel time waiting for the last rank (over its calls and ranks):")
        for r in per_call[:10]:
            share = f" ({r['waited_share']:.1%})" if r["waited_share"] is not None else ""
            say(f"  {ms(r['waited_us']):>10} of {ms(r['kernel_time_us'])}{share}  ×{r['calls']:,} {r['collective']}")
    ops = [r for r in run.rows if r["kind"] == "op"]
    if extra := s.get("ops"):
        say(f"the straggler's operators against {against_text(s, len(m['ranks']))} (summed GPU time):")
        for o in extra:
            say(f"  {ms(o['extra_us']):>10}  {o['op']} ({ms(o['gpu_time_us'])} against {ms(o['median_gpu_time_us'])})")
    if ops:
        say("top operators per rank (GPU time):")
        for rank in sorted({r["rank"] for r in ops}):
            mine = sorted((r for r in ops if r["rank"] == rank), key=lambda r: -r["gpu_time_us"])[:3]
            say(f"  rank {rank}: " + ", ".join(f"{r['op']} {ms(r['gpu_time_us'])}" for r in mine))
    for line in quirk_lines(m):
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
    return (run.name or run.meta.get("file") or run.id[:12]), run


def trace_diff(args) -> int:
    from core.units import duration_text
    from core.workload.trace.diff import (
        causes,
        diff,
        headline,
        largest_changes,
        mismatches,
        operators,
        steps,
        totals,
        whole,
    )

    sides = [_trace_side(args, what) for what in (args.base, args.new)]
    for side in sides:
        if isinstance(side, int):
            return side
    (base_label, base), (new_label, new) = sides  # type: ignore[misc]
    rows = diff(base.rows, new.rows)
    total = totals(rows)
    figures = whole(base.meta, new.meta) + steps(base.rows, new.rows)
    by_cause = causes(base.rows, new.rows)
    by_op = operators(base.meta, new.meta)
    unlike = mismatches(base.meta, new.meta, rows)
    if args.json:
        print(
            dump(
                {
                    "base": base_label,
                    "new": new_label,
                    "total": total,
                    "mismatches": unlike,
                    "headline": headline(base.rows, new.rows, total),
                    "rows": figures + by_cause + rows + by_op,
                }
            )
        )
        return 0

    def us(value: float) -> str:
        return duration_text(value / 1e6)

    for text in unlike:
        say(f"note: {text}")
    say(f"{base_label} → {new_label}: {headline(base.rows, new.rows, total)}")
    pct = f" ({total['delta_pct']:+.1f}%)" if total["delta_pct"] is not None else ""
    say(
        f"GPU time (kernels, copies and memsets) {us(total['base_us'])} → {us(total['new_us'])}: {us(total['delta_us'])}{pct}"
    )
    for r in figures:
        change = f" ({r['delta_pct']:+.1f}%)" if r["delta_pct"] is not None else ""
        say(f"  {r['figure']:<38} {us(r['base_us']):>11} → {us(r['new_us']):>11}  {us(r['delta_us']):>11}{change}")
    if by_cause:
        say("the GPU idle inside the median step, by the host's cause (largest change first):")
        for r in by_cause:
            say(f"  {r['figure']:<38} {us(r['base_us']):>11} → {us(r['new_us']):>11}  {us(r['delta_us']):>11}")
    say("by group (largest slow-down first):")
    for r in rows:
        if r["kind"] == "group":
            say(
                f"  {r['group']:<14} {us(r['base_us']):>11} → {us(r['new_us']):>11}  {us(r['delta_us']):>11}  ×{r['base_count']:,} → ×{r['new_count']:,}"
            )
    if by_op:
        say("by CPU operator (kernels matched through the operator that launched them):")
        for r in largest_changes(by_op, args.top):
            calls = f"  ×{r['base_count']:,} → ×{r['new_count']:,} calls" if r["base_count"] or r["new_count"] else ""
            say(f"  {us(r['delta_us']):>11}  {us(r['base_us']):>11} → {us(r['new_us']):>11}  {r['op']}{calls}")
    say("by kernel:")
    for r in largest_changes([r for r in rows if r["kind"] == "kernel"], args.top):
        name = r["kernel"] if len(r["kernel"]) <= 70 else r["kernel"][:69] + "…"
        say(f"  {us(r['delta_us']):>11}  {us(r['base_us']):>11} → {us(r['new_us']):>11}  [{r['group']}] {name}")
    return 0

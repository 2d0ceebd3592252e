"""``snapshot FILE``, ``trace FILE``, ``record -o FILE -- CMD``: bring your own workload.

``snapshot`` and ``trace`` import a file recorded anywhere as a stored run, through the same worker
experiment the pages use (``memory-snapshot``, ``profiler-trace``): the file is parsed in a worker
process, and a refused file (a pickle naming a class, a truncated file, something that is not a
snapshot or trace) exits 2 with the reason and stores nothing. ``record`` runs a script with the
allocator's history recording on and dumps a snapshot when it ends (:mod:`core.workload.recorder`).
"""

from __future__ import annotations

import os
import sys

from core.cli.output import dump
from core.text import terminal

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
    p.add_argument("file", help="the snapshot: pickle of any protocol, JSON, or .gz of either")
    p.add_argument("--trace-device", type=int, help="device index to replay (default: the one with the most events)")
    _import_options(p)
    p.set_defaults(handler=snapshot)
    p = sub.add_parser(
        "trace",
        parents=[common],
        help="import a Chrome/Kineto profiler trace (.json, .json.gz)",
        description="Import a torch.profiler / Kineto Chrome trace recorded on any machine: kernel "
        "groups, top kernels, GPU busy vs idle, compute/memcpy/communication overlap and "
        "a per-step breakdown. Stored as a run.",
    )
    p.add_argument("file", help="the trace: .json or .json.gz as export_chrome_trace / tensorboard_trace_handler write")
    p.add_argument("--top", type=int, default=20, help="kernels listed [default: 20]")
    _import_options(p)
    p.set_defaults(handler=trace)
    p = sub.add_parser(
        "record",
        help="run a script with CUDA memory recording on and dump a snapshot",
        description="Runs COMMAND (e.g. `python train.py --epochs 1`) with the caching allocator's "
        "history recorded and writes a snapshot pickle when it ends. Without CUDA it says "
        "so and runs the command unchanged. Exit code: the command's.",
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
    p.add_argument("command", nargs="+", help="the command to run, after `--`")
    p.set_defaults(handler=record)


def _import_options(p) -> None:
    p.add_argument("--name", default="", help="a label for the stored run")
    p.add_argument("--no-save", action="store_true", help="do not store the run")


def _import(args, experiment: str, values: dict):
    """Run the import experiment on the CPU queue, as every command runs a job; (exit code, result)."""
    from core.cli.experiments import submit_and_wait

    def show_failure(result) -> None:
        if result.status != "ok":
            print(f"error: {terminal(result.error_detail or result.status, multiline=True)}", file=sys.stderr)

    result, code = submit_and_wait(args, experiment, values, "cpu", show_failure)
    return code, result


def say(text: str) -> None:
    """A line of the report: names, frames and labels come from the imported file, so escaped."""
    print(terminal(text))


def snapshot(args) -> int:
    values = {"path": os.path.abspath(args.file), "keep_detail": not args.no_save}  # --no-save: nothing written
    if args.trace_device is not None:
        values["trace_device"] = args.trace_device
    code, run = _import(args, "memory-snapshot", values)
    if code:
        return code
    m = run.meta
    if args.json:
        print(
            dump(
                {
                    "run_id": run.id,
                    "stored": not args.no_save,
                    **{k: v for k, v in m.items() if k not in ("worker", "requested_device")},
                }
            )
        )
        return 0
    from core.units import bytes_text

    unit = "ms" if m["has_times"] else "(event number)"
    say(
        f"{m['file']}: {m['source']['format']}, {bytes_text(m['file_bytes'])} — "
        f"{'stored as run ' + run.id[:12] if not args.no_save else 'not stored (--no-save)'}"
    )
    actions = ", ".join(f"{k} {v:,}" for k, v in m["actions"].items())
    say(
        f"device {m['device']} of {m['devices']}: {m['trace_events']:,} events over {m['duration_ms']:,.1f} {unit}"
        + (f" ({actions})" if actions else "")
    )
    say(
        f"peak allocated {bytes_text(m['peak_allocated_bytes'])} at {m['peak_time_ms']:,.2f} {unit}"
        + (
            f" — {m['peak_event']['action']} of {bytes_text(m['peak_event']['size_bytes'])}"
            if m["peak_event"]
            else " (before the first event)"
        )
    )
    for frame in m["peak_stack"][:12]:
        say(f"    {frame}")
    say(
        f"peak reserved {bytes_text(m['peak_reserved_bytes'])}; reserved − allocated at the peak "
        f"{bytes_text(m['fragmentation_at_peak_bytes'])} (largest {bytes_text(m['peak_fragmentation_bytes'])} at "
        f"{m['peak_fragmentation_time_ms']:,.2f} {unit})"
    )
    say(
        f"allocated before recording began: {bytes_text(m['baseline_allocated_bytes'])} in "
        f"{m['baseline_allocated_blocks']:,} block(s) (baseline); reserved then {bytes_text(m['baseline_reserved_bytes'])}"
    )
    cats = ", ".join(f"{k} {bytes_text(v)}" for k, v in m["categories_at_peak_bytes"].items() if v)
    say(f"categories at the peak (inferred from stacks, see rules): {cats or 'none'}")
    for r in m["category_rules"]:
        if r["allocations"]:
            say(f"    rule {r['rule']:<20} → {r['category']:<16} {r['allocations']:>9,} allocations  ({r['means']})")
    say("top allocation sites live at the peak:")
    for s in m["top_sites_at_peak"][:10]:
        say(f"  {bytes_text(s['bytes']):>12}  {s['blocks']:>6,} block(s)  {s['label']}  [{s['category']}: {s['rule']}]")
    for note in m["notes"]:
        say(f"note: {note}")
    for why, count in (m.get("quirks") or {}).items():
        say(f"quirk: {count:,} × {why}")
    return 0


def trace(args) -> int:
    code, run = _import(args, "profiler-trace", {"path": os.path.abspath(args.file), "top_kernels": args.top})
    if code:
        return code
    m = run.meta
    if args.json:
        print(
            dump(
                {
                    "run_id": run.id,
                    "stored": not args.no_save,
                    **{k: v for k, v in m.items() if k not in ("worker", "requested_device")},
                    "kernels": [r for r in run.rows if r.get("kind") == "kernel"],
                }
            )
        )
        return 0
    from core.workload.trace import report_lines

    say(f"{m['file']}: {'stored as run ' + run.id[:12] if not args.no_save else 'not stored (--no-save)'}")
    for line in report_lines(m, run.rows):
        say(line)
    return 0


def record(args) -> int:
    from core.workload.recorder import DEFAULT_MAX_ENTRIES, run_recorded

    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    return run_recorded(command, args.output, max_entries=args.max_entries or DEFAULT_MAX_ENTRIES, stacks=args.stacks)

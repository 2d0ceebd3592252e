"""``runs list|show|export|import|delete``: the stored runs."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from pathlib import Path

from core.cli.output import check_writable, dump, open_store, print_run, write_file
from core.result import STATUSES
from core.text import terminal_text
from core.units import count_text, timestamp_text

ORDER = 20
MAX_LIMIT = 10**9


def _iso_date(text: str) -> str:
    """--since/--until: an ISO date or date-time (a typo must not silently list nothing)."""
    try:
        datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an ISO date such as 2026-11-01 or 2026-11-01T12:00"
        ) from None
    return text


def _limit(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if not 1 <= value <= MAX_LIMIT:
        raise argparse.ArgumentTypeError(f"must be between 1 and {MAX_LIMIT}, got {text}")
    return value


def register(sub, common) -> None:
    runs = sub.add_parser("runs", help="list, show, export, import or delete stored runs")
    rsub = runs.add_subparsers(dest="runs_command", required=True, metavar="ACTION")
    p = rsub.add_parser("list", parents=[common], help="stored runs, newest first")
    p.add_argument("--experiment")
    p.add_argument("--device", help="part of the device name")
    p.add_argument("--status", choices=STATUSES)
    p.add_argument("--since", type=_iso_date, help="ISO date, e.g. 2026-11-01 (runs started on or after it)")
    p.add_argument("--until", type=_iso_date, help="ISO date (runs started before it)")
    p.add_argument("--limit", type=_limit, help="at most this many runs")
    p.set_defaults(handler=list_runs)
    p = rsub.add_parser("show", parents=[common], help="one run with its rows")
    p.add_argument("id", help="run id or unique prefix")
    p.set_defaults(handler=show)
    p = rsub.add_parser("export", parents=[common], help="write runs as a JSON runs file")
    p.add_argument("ids", nargs="*", help="run ids or prefixes (default: all)")
    p.add_argument("-o", "--output", help="file to write (default: stdout)")
    p.set_defaults(handler=export)
    p = rsub.add_parser("import", parents=[common], help="add the runs of a runs file (marked imported)")
    p.add_argument("file")
    p.set_defaults(handler=import_runs)
    p = rsub.add_parser("delete", parents=[common], help="delete runs (damaged or moved aside too)")
    p.add_argument("ids", nargs="+")
    p.set_defaults(handler=delete)
    p = rsub.add_parser(
        "check",
        parents=[common],
        help="read every stored run back and name the damaged ones (exit 1 while any is left)",
    )
    p.add_argument(
        "--quarantine",
        action="store_true",
        help="move the damaged runs aside (kept in the database's quarantine table) and rebuild damaged summaries",
    )
    p.set_defaults(handler=check)


def list_runs(args) -> int:
    store = open_store(args, write=False)
    summaries = store.summaries(
        experiment=args.experiment,
        device=args.device,
        status=args.status,
        since=args.since,
        until=args.until,
        limit=args.limit,
    )
    if args.json:
        print(dump([s.to_dict() for s in summaries]))
    elif not summaries:
        print(terminal_text(f"no runs stored in {store.path}" + (" match these filters" if _filtered(args) else "")))
    else:
        for s in summaries:
            print(
                terminal_text(
                    f"{s.id[:12]}  {timestamp_text(s.started_at)}  {s.experiment:<14} "
                    f"{'damaged' if s.damaged else s.status:<12} {_device(s):<40} {s.name}"
                    f"{'  (imported)' if s.imported else ''}"
                )
            )
        damaged = sum(bool(s.damaged) for s in summaries)
        if damaged:
            print(
                f"{count_text(damaged, 'run')} listed as damaged cannot be opened: `python -m core runs check` says "
                "what is wrong",
                file=sys.stderr,
            )
    return 0


def _device(summary) -> str:
    """The device a run's numbers come from: an imported file's own GPU (in full), never the box that imported it."""
    if summary.recorded_elsewhere:
        return f"recorded elsewhere: {summary.recorded_elsewhere}"
    return summary.device_name[:40]


def _filtered(args) -> bool:
    return any(getattr(args, k) for k in ("experiment", "device", "status", "since", "until"))


def show(args) -> int:
    print_run(open_store(args, write=False).find(args.id), args.json)
    return 0


def export(args) -> int:
    if args.output:
        check_writable(args.output)
    store = open_store(args, write=False)
    ids = [store.resolve(i) for i in args.ids] if args.ids else None
    left_out: list = []  # the damaged runs left out (core.store.DamagedRun)
    text = store.export_json(ids, left_out)
    for damage in left_out:
        print(terminal_text(f"left out: {damage}"), file=sys.stderr)
    if args.output:
        write_file(args.output, text.encode("utf-8"))
        written = len(ids) if ids is not None else store.count() - len(left_out)
        print(terminal_text(f"wrote {count_text(written, 'run')} to {args.output}"), file=sys.stderr)
    else:
        print(text)
    return 0


def import_runs(args) -> int:
    from core.store import ImportRefused

    store = open_store(args)
    try:
        added, skipped = store.import_file(args.file)
    except ImportRefused as exc:
        print(f"import refused: {terminal_text(f'{Path(args.file).name}: {exc}')}", file=sys.stderr)
        return 2
    print(
        dump({"added": added, "already_present": skipped})
        if args.json
        else f"imported {count_text(added, 'run')}; {skipped:,} already present"
    )
    return 0


def delete(args) -> int:
    store = open_store(args)
    aside = {run_id for run_id, _, _ in store.quarantined()}
    removed = store.delete(i if i in aside else store.resolve(i) for i in args.ids)
    print(f"deleted {count_text(removed, 'run')}")
    return 0


def check(args) -> int:
    """Every stored run read back: the damaged ones named with what is wrong (exit 1 while any is left in the
    store), moved aside with ``--quarantine``."""
    store = open_store(args, write=args.quarantine)
    found = store.check()
    if args.quarantine:
        store.quarantine(found)
    left = [] if args.quarantine else found.damaged
    if args.json:
        print(
            dump(
                {
                    "damaged": [{"id": d.run_id, "problem": d.problem} for d in found.damaged],
                    "summaries_damaged": found.summaries,
                    "moved_aside": args.quarantine,
                    "quarantined": [{"id": i, "problem": p, "quarantined_at": t} for i, p, t in store.quarantined()],
                }
            )
        )
        return 1 if left else 0
    for damage in found.damaged:
        print(terminal_text(f"{damage.run_id}  damaged: {damage.problem}"))
    for run_id in found.summaries:
        print(terminal_text(f"{run_id}  summary damaged (its run reads){': rebuilt' if args.quarantine else ''}"))
    total = store.count() + (len(found.damaged) if args.quarantine else 0)
    print(
        f"{count_text(total, 'stored run')} read back: {count_text(len(found.damaged), 'damaged run')}"
        + (" moved aside" if args.quarantine and found.damaged else "")
        + f", {count_text(len(found.summaries), 'damaged summary', 'damaged summaries')}"
        + (" rebuilt" if args.quarantine and found.summaries else "")
    )
    aside = store.quarantined()
    if aside:
        print(
            f"{count_text(len(aside), 'run')} set aside (`runs delete ID` removes one): "
            + terminal_text(", ".join(run_id for run_id, _, _ in aside[:5]) + (", …" if len(aside) > 5 else ""))
        )
    if left:
        print("`python -m core runs check --quarantine` moves the damaged runs aside", file=sys.stderr)
    return 1 if left else 0

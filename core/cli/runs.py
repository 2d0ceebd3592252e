"""``runs list|show|export|import|delete``: the stored runs."""
from __future__ import annotations

import sys

from core.cli.output import dump, open_store, print_run
from core.text import terminal

ORDER = 20


def register(sub, common) -> None:
    runs = sub.add_parser("runs", help="list, show, export, import or delete stored runs")
    rsub = runs.add_subparsers(dest="runs_command", required=True, metavar="ACTION")
    p = rsub.add_parser("list", parents=[common], help="stored runs, newest first")
    p.add_argument("--experiment")
    p.add_argument("--device", help="part of the device name")
    p.add_argument("--status")
    p.add_argument("--since", help="ISO date, e.g. 2026-11-01")
    p.add_argument("--limit", type=int)
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
    p = rsub.add_parser("delete", parents=[common], help="delete runs")
    p.add_argument("ids", nargs="+")
    p.set_defaults(handler=delete)


def list_runs(args) -> int:
    store = open_store(args)
    runs = store.list(experiment=args.experiment, device=args.device, status=args.status, since=args.since,
                      limit=args.limit)
    if args.json:
        print(dump([{k: v for k, v in r.to_dict().items() if k != "rows"} | {"row_count": len(r.rows)}
                    for r in runs]))
    elif not runs:
        print(f"no runs stored in {store.path}")
    else:
        for r in runs:
            print(f"{r.id[:12]}  {r.started_at[:19]}  {r.experiment:<14} {r.status:<12} "
                  f"{r.device.get('name', '')[:40]:<40} {r.name}{'  (imported)' if r.imported else ''}")
    return 0


def show(args) -> int:
    print_run(open_store(args).find(args.id), args.json)
    return 0


def export(args) -> int:
    store = open_store(args)
    ids = [store.find(i).id for i in args.ids] if args.ids else None
    text = store.export_json(ids)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as fh:
            fh.write(text)
        print(f"wrote {len(store.export_data(ids)['runs'])} run(s) to {args.output}", file=sys.stderr)
    else:
        print(text)
    return 0


def import_runs(args) -> int:
    from core.store import ImportRefused

    store = open_store(args)
    try:
        added, skipped = store.import_file(args.file)
    except ImportRefused as exc:
        print(f"import refused: {terminal(exc)}", file=sys.stderr)
        return 2
    print(dump({"added": added, "already_present": skipped}) if args.json
          else f"imported {added} run(s); {skipped} already present")
    return 0


def delete(args) -> int:
    store = open_store(args)
    removed = store.delete(store.find(i).id for i in args.ids)
    print(f"deleted {removed} run(s)")
    return 0

"""``hang DIR``: read every rank's flight-recorder dump of a job that hung and name the collective and the rank.

Runs the ``flight-recorder`` import in a torch-free worker like every import; prints the diagnosis first, then
each rank's last collectives. Exit 0: a cause was found (a rank missing from a collective, a desync, or every
rank stuck inside one); 1: the dumps show no hang; 2: bad input (named on stderr, nothing stored).
"""

from __future__ import annotations

import os
import sys

from core.cli.imports import import_options, print_json, run_import, say
from core.text import quirk_lines
from core.workload.findings import finding_lines

ORDER = 41
MAX_ALSO = 10  # the other groups' disagreements printed; --json holds them all


def register(sub, common) -> None:
    p = sub.add_parser(
        "hang",
        parents=[common],
        help="read a hung job's flight-recorder dumps: which collective, which rank stopped it",
        description="Read one job's per-rank flight-recorder dumps (pickle or JSON, as torch writes them on a "
        "watchdog timeout or on demand; `record --flight-recorder DIR` makes them land in one folder), match the "
        "collectives across ranks by sequence id and say which collective stopped the job, which ranks never "
        "entered it or entered another (a desync), and where in the code. Exit 0: a cause found; 1: no hang in "
        "the dumps; 2: bad input. Stored as a run.",
    )
    p.add_argument("file", nargs="*", help="a folder of one job's dumps, or the dump files (one per rank)")
    p.add_argument("--example", metavar="NAME", help="read a set of dumps shipped in examples/ instead")
    import_options(p)
    p.set_defaults(handler=hang)


def hang(args) -> int:
    if bool(args.file) == bool(args.example):
        print(
            f"error: name a folder of dumps, the dump files, or --example NAME, not {'both' if args.file else 'neither'}",
            file=sys.stderr,
        )
        return 2
    if args.example:
        args.name = args.name or f"example {args.example}"
        values: dict = {"example": args.example}
    else:
        values = {"paths": [os.path.abspath(f) for f in args.file]}
    code, run = run_import(args, "flight-recorder", values)
    if code:
        return code
    m = run.meta
    found = 0 if m["stuck"] is not None else 1
    if args.json:
        print_json(args, run, ranks=run.rows)
        return found
    say(
        f"{m['file']}: {len(m['ranks'])} rank dump(s), recorder version {m['version']}, {m['backend'] or 'backend ?'}"
        f" — {'stored as run ' + run.id[:12] if not args.no_save else 'not stored (--no-save)'}"
    )
    if example := m.get("example"):
        say(f"example {example['name']}: {example['title']} — {example['label']}")
    for line in finding_lines(m):
        say(line)
    desc = next((g["desc"] for g in m["groups"] if g["group"] == m["group"] and g["desc"]), "")
    say(f"group {m['group']!r}{f' ({desc})' if desc else ''}, by rank:")
    say(f"{'rank':>5} {'state':<12} {'completed':>10} {'entered':>8}  last op  (where)")
    from core.workload.hang.findings import user_frame

    for r in run.rows:
        where = user_frame(r["last_frames"]) or ""
        done = "?" if r["last_completed_seq"] is None else f"#{r['last_completed_seq']}"
        entered = "?" if r["last_entered_seq"] is None else f"#{r['last_entered_seq']}"
        say(f"{r['rank']:>5} {r['state']:<12} {done:>10} {entered:>8}  {r['last_op'] or '-'}  {where}")
    others = m["disagreements"][1:]
    for other in others[:MAX_ALSO]:
        say(f"also: group {other['group']!r} disagrees at {other['op']} #{other['seq_id']}")
    if len(others) > MAX_ALSO:
        say(f"also: {len(others) - MAX_ALSO:,} more groups disagree (--json lists every one)")
    for line in quirk_lines(m):
        say(line)
    return found

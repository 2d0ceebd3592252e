"""``hang DIR``: read every rank's flight-recorder dump of a job that hung and name the collective and the rank.

Runs the ``flight-recorder`` import in a torch-free worker like every import; prints the diagnosis first, then
each rank's last collectives. Exit 0: a cause was found (a rank missing from a collective, a desync, or every
rank stuck inside one); 1: the dumps show no hang; 2: bad input (named on stderr, nothing stored).
"""

from __future__ import annotations

import os
import sys

from core.cli.imports import import_options, print_json, run_import, say, stored_text

ORDER = 41


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
    from core.rows.flight_recorder import HangRank, HangSummary

    found = 0 if HangSummary.from_run(run).stuck is not None else 1
    if args.json:
        print_json(args, run, ranks=run.rows)
        return found
    from core.workload.hang.text import hang_lines

    for line in hang_lines(run.meta, HangRank.from_run(run), stored_text(args, run)):
        say(line)
    return found

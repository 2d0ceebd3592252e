"""``doctor``: does everything work on this device? Every experiment at its smallest setting, cross-checked.

Prints one table (check, result, expected, verdict) or, with ``--json``, the bundle; ``-o`` writes the
bundle (versions, driver, device, every check and every run) to attach to a bug report. Exit code 1
when a check fails, 0 when every check passes or is unsupported with its reason, 2 for bad input.
"""

from __future__ import annotations

import json
import sys

from core.cli.output import check_writable, dump, open_store, write_file
from core.jsonable import json_ready
from core.text import terminal_text

ORDER = 15


def register(sub, common) -> None:
    p = sub.add_parser(
        "doctor",
        parents=[common],
        help="run every experiment at its smallest setting on a device "
        "and cross-check the numbers against independent references (exit 1 if a check fails)",
        description=(__doc__ or "").partition("\n")[0],
    )
    p.add_argument("--device", default="auto", help="auto (first GPU, else CPU), cpu, cuda or cuda:N")
    p.add_argument("-o", "--output", help="write the bundle (versions, driver, device, checks, runs) as JSON here")
    p.add_argument("--no-save", action="store_true", help="do not store the doctor's runs")
    p.add_argument("--timeout", type=float, default=600.0, help="wall-clock limit per experiment in seconds")
    p.set_defaults(handler=run)


def _progress(done: int, total: int, message: str) -> None:
    print(f"[{done}/{total}] {message}", file=sys.stderr, flush=True)


def run(args) -> int:
    from core.doctor import report_run, run_doctor
    from core.jobs import JobManager

    if args.output:
        check_writable(args.output)  # before minutes of checks, not after
    from core.store import StoreError

    try:
        store = None if args.no_save else open_store(args)
    except StoreError as exc:  # a full disk: the checks still run, nothing is stored
        print(f"warning: {terminal_text(exc)}; the checks run without storing their runs", file=sys.stderr)
        store = None
    manager = JobManager(store=store)
    try:
        report = run_doctor(args.device, manager, timeout_s=args.timeout, on_progress=_progress)
    finally:
        manager.shutdown()
    if store is not None:
        try:
            store.save(report_run(report))
        except StoreError as exc:
            print(f"warning: the doctor's report was not stored: {terminal_text(exc)}", file=sys.stderr)
    bundle = report.bundle()
    if args.output:
        write_file(args.output, json.dumps(json_ready(bundle), indent=1, allow_nan=False).encode())
        print(f"wrote the doctor's bundle to {args.output}", file=sys.stderr)
    print(dump(bundle) if args.json else report.table())
    return 1 if report.failed else 0

"""``health``: is this box as fast as it should be, and is it still? One verdict table and an exit code.

Runs the doctor's checks, the matmul soak and a bounded shape search on every GPU, host↔device copies and
all_reduce, and judges every figure against its like-for-like reference for the card's exact SKU and the same
box's earlier runs. Exit 0 healthy, 1 a figure below expected (or regressed, or a check failed), 2 bad input.
``--json`` prints the rows (``figure``, ``measured``, ``reference``, ``verdict``, ``clocks``, ``per_clock``, …)
and the top-level ``verdict``; ``--html`` writes a one-page report to attach to a ticket. ``--judge RUN_ID``
judges a stored check again by today's rules and references, measuring nothing.
"""

from __future__ import annotations

import json
import sys

from core.cli.output import check_writable, dump, open_store, write_file
from core.jsonable import json_ready
from core.text import terminal_text

ORDER = 16


def add_health_options(p) -> None:
    """The options of the check, shared by ``python -m core health`` and ``torchrun … -m core.cli.health_node``."""
    from core.health.config import PARTS, HealthConfig

    defaults = HealthConfig()
    p.add_argument(
        "--device",
        default="auto",
        help="auto (every GPU, else the CPU), all (every GPU), cpu, cuda or cuda:N (one GPU)",
    )
    p.add_argument(
        "--parts", default=",".join(PARTS), help=f"what to run, comma-separated [default: {','.join(PARTS)}]"
    )
    p.add_argument(
        "--soak-s", type=float, default=defaults.soak_s, help="seconds of sustained matmul per GPU [default: 60]"
    )
    p.add_argument(
        "--search-s",
        type=float,
        default=defaults.search_s,
        help="the bounded shape search's budget per GPU in seconds, what a published maximum judges [default: 30]",
    )
    p.add_argument(
        "--dtype", default="auto", help="the soak's and search's dtype [default: bf16 on a GPU, fp32 on the CPU]"
    )
    p.add_argument(
        "--quick", action="store_true", help="a 10 s soak, a 10 s search and small copies: seconds, not minutes"
    )
    p.add_argument("--timeout", type=float, default=defaults.timeout_s, help="wall-clock limit per job in seconds")
    p.add_argument("--no-save", action="store_true", help="store neither the check nor its runs")


def health_config(args):
    from core.health.config import HealthConfig

    parts = tuple(p.strip() for p in args.parts.split(",") if p.strip())
    return HealthConfig(
        device=args.device,
        parts=parts,
        soak_s=args.soak_s,
        search_s=args.search_s,
        dtype=args.dtype,
        quick=args.quick,
        timeout_s=args.timeout,
    )


def register(sub, common) -> None:
    p = sub.add_parser(
        "health",
        parents=[common],
        help="is this box as fast as it should be? doctor, soak, copies and all_reduce against "
        "the card's reference and the box's history (exit 1 if a figure is below expected)",
        description=(__doc__ or "").partition("\n")[0],
    )
    add_health_options(p)
    p.add_argument("-o", "--output", help="write the JSON bundle (verdict, rows, box, runs' ids) here")
    p.add_argument("--html", help="write a one-page HTML report here")
    p.add_argument(
        "--references",
        action="store_true",
        help="print the reference table (per SKU and figure, source, date, card) and every rule with its source",
    )
    p.add_argument(
        "--judge",
        metavar="RUN_ID",
        help="judge a stored health check again by today's rules (an imported one as the box it came from); "
        "measures and stores nothing",
    )
    p.set_defaults(handler=run)


def references(as_json: bool) -> int:
    from core.hardware.health_reference import REFERENCES, RULES, SAME_SHAPE, THRESHOLD_REASON

    if as_json:
        print(
            dump(
                {
                    "thresholds": THRESHOLD_REASON,
                    "rules": list(RULES),
                    "references": [r.to_dict() for r in REFERENCES],
                    "same_shape_per_clock": [r.to_dict() for r in SAME_SHAPE],
                }
            )
        )
        return 0
    for r in REFERENCES:
        card = f" — {r.card_words}" if r.card_words else ""
        print(terminal_text(f"{r.sku:24} {r.figure:18} {r.label():52} {r.source[:60]}… ({r.date}){card}"))
    for r in SAME_SHAPE:
        print(terminal_text(f"{', '.join(r.skus):24} per clock {r.label()}"))
    print(f"thresholds: {THRESHOLD_REASON}")
    for rule in RULES:
        print(terminal_text(f"rule — {rule['rule']}: {rule['says']} (source: {rule['source']})"))
    return 0


def _progress(done: int, total: int, message: str) -> None:
    print(f"[{done}/{total}] {terminal_text(message)}", file=sys.stderr, flush=True)


def run(args) -> int:
    from core.health.check import run_health
    from core.jobs import JobManager
    from core.store import StoreError

    if args.references:
        return references(args.json)
    if args.judge:
        return judge(args)
    cfg = health_config(args)
    for path in (args.output, args.html):
        if path:
            check_writable(path)  # before minutes of checks, not after
    html_report = None
    if args.html:
        from core.cli.report import renderer

        html_report = renderer()  # refused before minutes of checks where the renderers are missing
    try:
        store = open_store(args)
    except StoreError as exc:  # a full disk: the check still runs, nothing is stored or compared
        print(f"warning: {terminal_text(exc)}; the check runs without storing or comparing", file=sys.stderr)
        store = None
    manager = JobManager(store=None if args.no_save else store)
    try:
        report = run_health(cfg, manager, store=store, on_progress=_progress)
    finally:
        manager.shutdown()
    run_ = report.to_run()
    if store is not None and not args.no_save:
        try:
            store.save(run_)
        except StoreError as exc:
            print(f"warning: the health check was not stored: {terminal_text(exc)}", file=sys.stderr)
    return _answer(args, report, run_, run_.id, html_report)


def judge(args) -> int:
    """A stored check judged again: the same answer, table, bundle and report as a check just run."""
    from core.health.rejudge import rejudge

    for path in (args.output, args.html):
        if path:
            check_writable(path)
    html_report = None
    if args.html:
        from core.cli.report import renderer

        html_report = renderer()
    store = open_store(args, write=False)
    check = store.find(args.judge)
    report = rejudge(check, store)
    return _answer(args, report, report.to_run(check), check.id, html_report)


def _answer(args, report, run_, run_id: str, html_report) -> int:
    """The bundle (-o), the HTML report (--html) and the answer on stdout (text or --json); the exit code."""
    from core.health.check import report_text

    bundle = report.bundle() | {"id": run_id}
    if args.output:
        write_file(args.output, json.dumps(json_ready(bundle), indent=1, allow_nan=False).encode())
        print(f"wrote the health bundle to {args.output}", file=sys.stderr)
    if html_report is not None:
        write_file(args.html, html_report([run_]).encode("utf-8"))
        print(f"wrote the health report to {args.html}", file=sys.stderr)
    print(dump(bundle) if args.json else "\n".join(terminal_text(line) for line in report_text(report).splitlines()))
    return report.exit_code

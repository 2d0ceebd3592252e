"""``report``: one self-contained HTML report of stored runs (the pages' figures, so plotly is needed)."""

from __future__ import annotations

import sys

from core.cli.output import check_writable, open_store, write_file
from core.text import terminal

ORDER = 30


def register(sub, common) -> None:
    p = sub.add_parser("report", parents=[common], help="write one self-contained HTML report of stored runs")
    p.add_argument("ids", nargs="+", help="run ids or unique prefixes")
    p.add_argument("-o", "--output", default="report.html", help="HTML file to write [default: report.html]")
    p.set_defaults(handler=run)


def run(args) -> int:
    check_writable(args.output)  # before reading runs and drawing charts
    store = open_store(args, write=False)
    runs = [store.find(i) for i in args.ids]
    try:
        from pages.common.report import build_report  # plotly lives outside core, imported only here
    except ImportError as exc:
        print(
            f"error: the HTML report needs plotly and the GPU Lab pages package ({exc}); "
            f"pip install plotly pandas, and run from the repository root",
            file=sys.stderr,
        )
        return 2
    data = build_report(runs).encode("utf-8")
    write_file(args.output, data)
    print(
        terminal(f"wrote {len(runs)} run(s) to {args.output} ({len(data) / 2**20:.1f} MiB, opens offline)"),
        file=sys.stderr,
    )
    return 0

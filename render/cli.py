"""``python -m core report``: one self-contained HTML report of stored runs, drawn by the renderers.

The engine's CLI knows nothing of Plotly: it adds the command groups of the packages above it that are
installed (``core.cli.PLUGINS``), and this is the renderers' one. On a box with the engine alone the command
is absent rather than broken.
"""

from __future__ import annotations

import sys

from core.cli.output import check_writable, open_store, write_file
from core.text import terminal
from core.units import bytes_text

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
        import render.report  # noqa: F401 - imported only here: plotly costs a second at start-up
    except ImportError as exc:
        print(f"error: the HTML report needs plotly and pandas ({exc}): pip install plotly pandas", file=sys.stderr)
        return 2
    data = html_report(runs).encode("utf-8")
    write_file(args.output, data)
    print(
        terminal(f"wrote {len(runs)} run(s) to {args.output} ({bytes_text(len(data))}, opens offline)"),
        file=sys.stderr,
    )
    return 0


def html_report(runs) -> str:
    """The HTML of stored runs: one health run is its one-page report (also ``python -m core health --html``),
    anything else the full report with charts."""
    if len(runs) == 1 and runs[0].experiment == "health":
        from render.health import health_html

        return health_html(runs[0])
    from render.report import build_report

    return build_report(runs)

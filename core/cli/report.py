"""``python -m core report``: one self-contained HTML report of stored runs (and the HTML of ``health --html``).

The engine draws nothing: the HTML is the renderers' (``render.cli.html_report``). The command line sits above the
renderers in the import contracts (pyproject.toml), as the dashboard does, and below it nothing in ``core`` may
import them; :func:`renderer` imports them inside the function, when a command is about to write a report, so
``--help`` and every other command import neither the renderers nor Plotly, and on a box with the engine alone the
command says what it lacks instead of drawing.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from core.cli.output import check_writable, open_store, write_file
from core.errors import ConfigError
from core.text import terminal_text
from core.units import bytes_text, count_text

ORDER = 30


def register(sub, common) -> None:
    p = sub.add_parser("report", parents=[common], help="write one self-contained HTML report of stored runs")
    p.add_argument("ids", nargs="+", help="run ids or unique prefixes")
    p.add_argument("-o", "--output", default="report.html", help="HTML file to write [default: report.html]")
    p.set_defaults(handler=run)


def renderer() -> Callable[[list], str]:
    """The renderers' HTML of stored runs; a ConfigError (exit 2) where they are not installed."""
    try:
        from render.cli import html_report  # here, not at the top (see the module's docstring)
    except ImportError as exc:
        raise ConfigError(f"an HTML report needs the renderers ({exc}): pip install plotly pandas") from exc
    return html_report


def run(args) -> int:
    check_writable(args.output)  # before reading runs and drawing charts
    store = open_store(args, write=False)
    runs = [store.find(i) for i in args.ids]
    data = renderer()(runs).encode("utf-8")
    write_file(args.output, data)
    print(
        terminal_text(
            f"wrote {count_text(len(runs), 'run')} to {args.output} ({bytes_text(len(data))}, opens offline)"
        ),
        file=sys.stderr,
    )
    return 0

"""The HTML that ``python -m core report`` and ``python -m core health --html`` write, drawn by the renderers.

The command line imports this module inside those two commands only (``core/cli/report.py``), so its other
commands never load the renderers or Plotly.
"""

from __future__ import annotations

from core.errors import ConfigError


def html_report(runs) -> str:
    """The HTML of stored runs: one health run is its one-page report (no Plotly needed), anything else the full
    report with charts (a ConfigError, exit 2, where Plotly or pandas is missing)."""
    if len(runs) == 1 and runs[0].experiment == "health":
        from render.health import health_html

        return health_html(runs[0])
    try:
        from render.report import build_report  # here, not at the top: a health report needs no Plotly
    except ImportError as exc:
        raise ConfigError(f"the HTML report needs plotly and pandas ({exc}): pip install plotly pandas") from exc
    return build_report(runs)

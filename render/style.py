"""Chart styling shared by every figure: one colour per dtype, units on axes, titles that name the device.

Pure Plotly: the pages, the compare view and the HTML report (also from the CLI) style charts alike.
"""

from __future__ import annotations

import html
import math

import numpy as np
import plotly.graph_objects as go

from core.result import RunResult
from core.rows.provenance import Provenance

DTYPE_COLORS = {
    "fp64": "#1f77b4",
    "fp32": "#ff7f0e",
    "tf32": "#2ca02c",
    "bf16": "#d62728",
    "fp16": "#9467bd",
    "fp8": "#8c564b",
    "fp8-fast-accum": "#d4a373",
    "fp8_e4m3fn": "#8c564b",
    "fp8_e5m2": "#c49c94",
    "fp8_e4m3fnuz": "#6b3d2e",
    "fp8_e5m2fnuz": "#e0b9a8",
    "fp8_e8m0fnu": "#a0522d",
    "fp4_e2m1fn_x2": "#bcbd22",
    "int8": "#e377c2",
    "int4": "#7f7f7f",
    # autocast modes: a lighter shade of the dtype their matmuls run in (pure bf16 appears beside them)
    "bf16-autocast": "#ff9896",
    "fp16-autocast": "#c5b0d5",
}
# Training-memory categories (timeline, planner, estimate vs measured): the Okabe–Ito palette, distinct
# for colour-blind readers too; the hash fallback drew parameters and temporaries in the same brown.
CATEGORY_COLORS = {
    "parameters": "#0072B2",
    "gradients": "#E69F00",
    "optimizer_state": "#009E73",
    "activations": "#D55E00",
    "temporaries": "#CC79A7",
    "workspace": "#56B4E9",
    "other": "#999999",
    "unknown": "#c7c7c7",
}
_FALLBACK = ("#17becf", "#bcbd22", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173")


def color_for(name: str) -> str:
    if name in DTYPE_COLORS:
        return DTYPE_COLORS[name]
    if name in CATEGORY_COLORS:
        return CATEGORY_COLORS[name]
    return _FALLBACK[sum(map(ord, str(name))) % len(_FALLBACK)]


def device_label(run: RunResult) -> str:
    """'CPU — <model>' or 'cuda:0 — <GPU>': every chart says where its numbers come from. An imported file was
    recorded elsewhere: its charts name the file and say so (with its GPU where known, and the source of a
    shipped example, in the words of its own label: a hang the lab recorded says so, not "elsewhere"), never the
    importing box."""
    p = Provenance.from_run(run)
    if p.imported:
        file = p.file if p.file is not None else "file"
        if p.example and p.example.label:
            return f"imported {file} — {p.example.label}"
        source = p.example.repository if p.example else None
        return (
            f"imported {file} — recorded elsewhere"
            + (f" on {p.device_name}" if p.device_name else "")
            + (f" ({source})" if source else "")
        )
    device = run.device_info
    return f"CPU — {device.name}" if device.is_cpu else device.shown


def html_text(text: str) -> str:
    """Text for a Plotly title, legend or label: Plotly reads a subset of HTML there (links, bold), so
    user text (names, imported device names, column names) is escaped; Plotly shows the entities as
    the characters they stand for."""
    return html.escape(str(text), quote=False)


def short_html_text(name: str, limit: int = 70) -> str:
    """A long name (a C++ kernel with its template arguments, a stack frame) cut for an axis label and
    escaped: ``<module>`` or ``kernel<4, float>`` would otherwise be read as tags and vanish."""
    return html_text(name if len(name) <= limit else name[: limit - 3] + "…")


def html_lines(lines) -> str:
    """Lines of imported text (stack frames) as one escaped hover text."""
    return "<br>".join(html_text(line) for line in lines)


SUBTITLE_CHARS = 110  # a subtitle line that fits a chart 800 px wide (the page's column at 1280 px), at <sup>'s size
# A title hangs from the chart's top edge: Plotly centres a title's first line in the top margin and hangs the others
# below it, into the plot (a third subtitle line overprinted the top tick label). Measured in Chromium: a title hung
# with a 24 px pad starts 8 px under the edge, is 21 px tall and each subtitle line adds 21; the margin grows by 22 a
# line and keeps about 26 px under the title.
TITLE_LINE_PX, TITLE_TOP_PX, TITLE_PAD_PX = 22, 55, 24


def title(text: str, run: RunResult | None = None, detail: str = "") -> str:
    """A chart's title, with where its numbers come from and ``detail`` under it, wrapped into lines that fit the
    chart (Plotly never wraps a title: a long subtitle ran past the chart's edge, cut without a hint)."""
    sub = " · ".join(filter(None, [device_label(run) if run else "", detail]))
    lines = "<br>".join(f"<sup>{html_text(line)}</sup>" for line in wrapped(sub, SUBTITLE_CHARS))
    return f"{html_text(text)}<br>{lines}" if sub else html_text(text)


def wrapped(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` characters, broken at a " · " where a part fits a line, else at a space
    (a word longer than a line, a file path, keeps a line of its own)."""
    lines = [""]

    def add(piece: str, sep: str) -> None:
        if not lines[-1]:
            lines[-1] = piece
        elif len(lines[-1]) + len(sep) + len(piece) <= width:
            lines[-1] += sep + piece
        else:
            lines.append(piece)

    for part in text.split(" · "):
        if len(part) <= width:
            add(part, " · ")
            continue
        for i, word in enumerate(part.split(" ")):
            add(word, " " if i else " · ")
    return lines


def style(fig: go.Figure, title_text: str, x_title: str, y_title: str, **layout) -> go.Figure:
    """``title_text`` comes from :func:`title`; axis and legend titles (column names) are escaped here."""
    legend = layout.pop("legend_title", None)
    fig.update_layout(
        template="plotly_white",
        title=dict(text=title_text, yref="container", y=1, yanchor="top", pad=dict(t=TITLE_PAD_PX)),
        xaxis_title=html_text(x_title),
        yaxis_title=html_text(y_title),
        legend_title_text=html_text(legend) if legend else legend,
        margin=dict(t=TITLE_TOP_PX + TITLE_LINE_PX * title_text.count("<sup>")),
        **layout,
    )
    return fig


def number_axes(fig: go.Figure) -> go.Figure:
    """Axis numbers as the lab writes them: never an SI prefix (a relative error of 1e-15 is not "1f", a ULP
    of 1e10 not "10B", a rate not "100µ GB/s"): exponents as powers of ten. A log axis whose data span a decade
    or more labels its powers of ten only, not the digits between them ("3, 2, 1000, 9"); a narrower one writes
    its numbers whole ("2000, 3000")."""
    fig.update_xaxes(exponentformat="power")
    fig.update_yaxes(exponentformat="power")
    spans: dict[str, list[float]] = {}
    for trace in fig.data:
        for letter in ("x", "y"):
            values = getattr(trace, letter, None)
            if values is None:
                continue
            axis = (getattr(trace, f"{letter}axis", None) or letter).replace(letter, f"{letter}axis", 1)
            array = np.asarray(values)
            if array.dtype.kind in "iuf":
                positive = array[np.isfinite(array) & (array > 0)]
                if positive.size:
                    spans.setdefault(axis, []).extend((float(positive.min()), float(positive.max())))
    for axis, ends in spans.items():
        layout_axis = fig.layout[axis] if axis in fig.layout else None
        if layout_axis is not None and layout_axis.type == "log":
            # a decade or more: its powers of ten only; less: whole numbers ("2000, 3000"), never bare digits
            layout_axis.minorloglabels = "none" if math.log10(max(ends) / min(ends)) >= 1 else "complete"
    return fig

"""Charts on a page: the figure with the lab's toolbar settings and its export row under it (Streamlit).

The figures themselves and their export bytes come from the renderers (:mod:`render`).
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from render.export import csv_bytes, html_bytes, image_bytes, image_export_problem, json_bytes, slug, toolbar_config
from render.style import number_axes


def show(fig: go.Figure, data: pd.DataFrame | None, name: str, key: str) -> None:
    """Draw a chart with the shared toolbar settings and the export row under it (its axes' numbers the lab's
    way, for a figure that did not come as a :class:`render.chart.Chart`)."""
    number_axes(fig)
    st.plotly_chart(fig, width="stretch", config=toolbar_config(name), key=f"{key}.chart")
    export_buttons(fig, data, name, key)


def show_charts(charts, key: str) -> None:
    """Draw a list of :class:`render.plots.Chart` with their export rows."""
    for i, chart in enumerate(charts):
        show(chart.figure, chart.data, chart.name, f"{key}.{i}.{chart.name}")


def export_buttons(fig: go.Figure, data: pd.DataFrame | None, name: str, key: str) -> None:
    """One row of download buttons under a chart."""
    base = slug(name)
    problem = image_export_problem()
    cols = st.columns(5 if problem is None else 3)
    i = 0
    if problem is None:
        cols[0].download_button(
            "PNG", lambda: image_bytes(fig, "png"), f"{base}.png", "image/png", key=f"{key}.png", on_click="ignore"
        )
        cols[1].download_button(
            "SVG", lambda: image_bytes(fig, "svg"), f"{base}.svg", "image/svg+xml", key=f"{key}.svg", on_click="ignore"
        )
        i = 2
    cols[i].download_button(
        "HTML",
        lambda: html_bytes(fig),
        f"{base}.html",
        "text/html",
        key=f"{key}.html",
        on_click="ignore",
        help="interactive chart, opens offline",
    )
    if data is not None:
        cols[i + 1].download_button(
            "CSV", csv_bytes(data), f"{base}.csv", "text/csv", key=f"{key}.csv", on_click="ignore"
        )
        cols[i + 2].download_button(
            "JSON", json_bytes(data), f"{base}.json", "application/json", key=f"{key}.json", on_click="ignore"
        )
    if problem:
        st.caption(f"PNG: use the camera icon in the chart's toolbar ({problem}).")

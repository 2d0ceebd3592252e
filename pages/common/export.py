"""Export of a chart and its data, identical on every page: PNG/SVG, offline HTML, CSV, JSON.

PNG and SVG are rendered on the server with kaleido when it and a Chromium/Chrome are present
(kaleido's sync server is started once per process: a cold export costs ~2.5 s, a warm one ~0.2 s);
otherwise the Plotly toolbar's camera button still downloads a PNG from the browser. Files are
built only when the user clicks (``download_button`` with a callable).
"""
from __future__ import annotations

import json
import re
import shutil
import threading
from functools import lru_cache

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

_kaleido_lock = threading.Lock()
_kaleido_started = False


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()[:80] or "chart"


@lru_cache(maxsize=1)
def image_export_problem() -> str | None:
    """None when server-side PNG/SVG export works here, else why not."""
    try:
        import kaleido  # noqa: F401
    except ImportError:
        return "server-side PNG/SVG export needs the kaleido package"
    if not any(shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome", "chrome")):
        return "server-side PNG/SVG export needs Chromium or Chrome (apt-get install chromium)"
    return None


def image_bytes(fig: go.Figure, fmt: str, scale: float = 2.0) -> bytes:
    global _kaleido_started
    import kaleido

    with _kaleido_lock:
        if not _kaleido_started:
            kaleido.start_sync_server(silence_warnings=True)
            _kaleido_started = True
        return fig.to_image(format=fmt, scale=scale if fmt == "png" else 1, width=1100, height=600)


def html_bytes(fig: go.Figure) -> bytes:
    """Self-contained: plotly.js is embedded, so the file opens offline."""
    return fig.to_html(include_plotlyjs=True, full_html=True).encode("utf-8")


def csv_bytes(df: pd.DataFrame) -> bytes:
    return df.to_csv(index=False).encode("utf-8")


def json_bytes(df: pd.DataFrame) -> bytes:
    return json.dumps(json.loads(df.to_json(orient="records")), indent=1).encode("utf-8")


def toolbar_config(name: str) -> dict:
    return {"displaylogo": False,
            "toImageButtonOptions": {"format": "png", "filename": slug(name), "scale": 2}}


def export_buttons(fig: go.Figure, data: pd.DataFrame | None, name: str, key: str) -> None:
    """One row of download buttons under a chart."""
    base = slug(name)
    problem = image_export_problem()
    cols = st.columns(5 if problem is None else 3)
    i = 0
    if problem is None:
        cols[0].download_button("PNG", lambda: image_bytes(fig, "png"), f"{base}.png", "image/png", key=f"{key}.png",
                                on_click="ignore")
        cols[1].download_button("SVG", lambda: image_bytes(fig, "svg"), f"{base}.svg", "image/svg+xml",
                                key=f"{key}.svg", on_click="ignore")
        i = 2
    cols[i].download_button("HTML", lambda: html_bytes(fig), f"{base}.html", "text/html", key=f"{key}.html",
                            on_click="ignore", help="interactive chart, opens offline")
    if data is not None:
        cols[i + 1].download_button("CSV", csv_bytes(data), f"{base}.csv", "text/csv", key=f"{key}.csv",
                                    on_click="ignore")
        cols[i + 2].download_button("JSON", json_bytes(data), f"{base}.json", "application/json",
                                    key=f"{key}.json", on_click="ignore")
    if problem:
        st.caption(f"PNG: use the camera icon in the chart's toolbar ({problem}).")


__all__ = ["export_buttons", "html_bytes", "csv_bytes", "json_bytes", "image_bytes", "image_export_problem",
           "toolbar_config", "slug"]

"""Export of a chart and its data, identical on every page: PNG/SVG, offline HTML, CSV, JSON.

PNG and SVG are rendered on the server with kaleido when it and a Chromium/Chrome are present.
kaleido's sync server is started once per process (a cold export costs ~2.5 s, a warm one ~0.2 s);
without a browser the Plotly toolbar's camera button still downloads a PNG from the browser, and
the export row says so. No Streamlit here: the page's export row (``pages.common.charts``), the HTML
report and the CLI build their files with these functions.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
import warnings
from functools import lru_cache

import pandas as pd
import plotly.graph_objects as go

from core.jsonable import json_ready

IMAGE_WIDTH_PX, IMAGE_HEIGHT_PX = 1100, 600
PNG_SCALE = 2
_BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")

_kaleido_lock = threading.Lock()
_kaleido_started = False


class ImageExportError(RuntimeError):
    """Server-side PNG/SVG export is not possible here (the message says why)."""


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()[:80] or "chart"


@lru_cache(maxsize=1)
def image_export_problem() -> str | None:
    """None when server-side PNG/SVG export can work here, else why not."""
    try:
        import kaleido  # noqa: F401
    except ImportError:
        return "server-side PNG/SVG export needs the kaleido package"
    browser = os.environ.get("BROWSER_PATH")
    if not (browser and os.access(browser, os.X_OK)) and not any(shutil.which(b) for b in _BROWSERS):
        return "server-side PNG/SVG export needs Chromium or Chrome (apt-get install chromium)"
    return None


def _ensure_kaleido_server() -> None:
    """Start kaleido's browser once per process; later exports reuse it (call with the lock held)."""
    global _kaleido_started
    if _kaleido_started:
        return
    import kaleido

    kaleido.start_sync_server(silence_warnings=True)  # a singleton: a second start is a silent no-op
    _kaleido_started = True


def image_bytes(fig: go.Figure, fmt: str, scale: float = PNG_SCALE) -> bytes:
    """PNG or SVG rendered by kaleido: IMAGE_WIDTH_PX × IMAGE_HEIGHT_PX (PNG times ``scale``)."""
    if fmt not in ("png", "svg"):
        raise ValueError(f"image format must be png or svg, got {fmt!r}")
    problem = image_export_problem()
    if problem:
        raise ImageExportError(problem)
    with _kaleido_lock:
        _ensure_kaleido_server()
        with warnings.catch_warnings():  # plotly warns that per-call options are ignored by the server
            warnings.simplefilter("ignore", UserWarning)
            try:
                return fig.to_image(
                    format=fmt, scale=scale if fmt == "png" else 1, width=IMAGE_WIDTH_PX, height=IMAGE_HEIGHT_PX
                )
            except Exception as exc:  # noqa: BLE001 - kaleido raises assorted errors when the browser dies
                raise ImageExportError(f"kaleido could not render the {fmt.upper()}: {exc}") from exc


def html_bytes(fig: go.Figure) -> bytes:
    """Self-contained: plotly.js is embedded, so the file opens offline."""
    return fig.to_html(include_plotlyjs=True, full_html=True).encode("utf-8")


def csv_bytes(df: pd.DataFrame) -> bytes:
    return df.to_csv(index=False).encode("utf-8")


def json_bytes(df: pd.DataFrame) -> bytes:
    """Records as strict JSON; non-finite floats travel as "inf"/"nan" strings, as in the store."""
    records = [{str(k): _plain(v) for k, v in row.items()} for row in df.to_dict(orient="records")]
    return json.dumps(json_ready(records), indent=1, allow_nan=False, default=str).encode("utf-8")


def _plain(value):
    """numpy scalars → Python numbers; missing values (None/NaT) → None; NaN stays NaN (stored as "nan").
    A list or dict is a value of its own: ``pd.isna([nan])`` is an array, and a one-item list of a missing
    value was once written as null."""
    if isinstance(value, (list, dict, tuple, str)):
        return value
    if hasattr(value, "item"):
        value = value.item()
    try:
        if bool(pd.isna(value)) and not (isinstance(value, float) and value != value):
            return None
    except (TypeError, ValueError):
        pass
    return value


def toolbar_config(name: str) -> dict:
    return {"displaylogo": False, "toImageButtonOptions": {"format": "png", "filename": slug(name), "scale": PNG_SCALE}}


__all__ = [
    "html_bytes",
    "csv_bytes",
    "json_bytes",
    "image_bytes",
    "image_export_problem",
    "toolbar_config",
    "slug",
    "ImageExportError",
    "IMAGE_WIDTH_PX",
    "IMAGE_HEIGHT_PX",
    "PNG_SCALE",
]

"""Chart export: real PNG/SVG images (when a browser exists), offline HTML, lossless CSV, strict JSON."""

import io
import json
import re
import struct
import xml.etree.ElementTree as ET

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("plotly")

import plotly.graph_objects as go

from render import export
from render.export import (
    IMAGE_HEIGHT_PX,
    IMAGE_WIDTH_PX,
    PNG_SCALE,
    csv_bytes,
    html_bytes,
    image_bytes,
    image_export_problem,
    json_bytes,
)

needs_browser = pytest.mark.skipif(
    image_export_problem() is not None, reason=f"no server-side image export here: {image_export_problem()}"
)


@pytest.fixture(scope="module")
def fig():
    f = go.Figure(go.Scatter(x=[256, 512, 1024], y=[10.5, 40.25, 80.0], name="bf16"))
    f.update_layout(title="matmul TFLOPS", xaxis_title="size", yaxis_title="TFLOPS")
    return f


@pytest.fixture
def frame():
    return pd.DataFrame(
        {
            "size": [256, 512, 1024],
            "dtype": ["bf16", "fp16", 'fp8 e4m3, "quoted"'],
            "median_ms": [0.125, float("inf"), float("nan")],
            "ok": [True, False, True],
        }
    )


@needs_browser
def test_png_is_a_png_of_the_promised_size(fig):
    data = image_bytes(fig, "png")
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    length, chunk, width, height = struct.unpack(">I4sII", data[8:24])  # the IHDR chunk comes first
    assert (chunk, length) == (b"IHDR", 13)
    assert (width, height) == (IMAGE_WIDTH_PX * PNG_SCALE, IMAGE_HEIGHT_PX * PNG_SCALE) == (2200, 1200)


@needs_browser
def test_svg_is_an_svg_of_the_promised_size(fig):
    root = ET.fromstring(image_bytes(fig, "svg"))
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert (float(root.get("width")), float(root.get("height"))) == (1100, 600)
    assert "matmul TFLOPS" in ET.tostring(root, encoding="unicode")


@needs_browser
def test_kaleido_server_is_started_once_and_reused(fig, monkeypatch):
    import kaleido

    image_bytes(fig, "svg")  # the server is up after the first export
    starts = []
    monkeypatch.setattr(kaleido, "start_sync_server", lambda *a, **k: starts.append(1))
    for _ in range(3):
        image_bytes(fig, "png")
    assert starts == []  # no server started again: each export reuses the first one's (a start costs ~2.5 s)


def test_without_a_browser_image_export_says_why(fig, monkeypatch):
    monkeypatch.setattr(export, "image_export_problem", lambda: "server-side PNG/SVG export needs Chromium")
    with pytest.raises(export.ImageExportError, match="Chromium"):
        image_bytes(fig, "png")
    with pytest.raises(ValueError, match="png or svg"):
        image_bytes(fig, "gif")


def test_html_is_self_contained(fig):
    text = html_bytes(fig).decode()
    assert not re.search(r"<script[^>]+src\s*=", text, re.I)  # no external script at all
    assert not re.search(r"<link[^>]+href\s*=\s*[\"']?https?:", text, re.I)  # nor an external stylesheet
    assert len(text) > 3_000_000  # plotly.js (≈ 4.6 MB) is inside
    assert "matmul TFLOPS" in text


def test_csv_reads_back_to_the_same_frame(frame):
    again = pd.read_csv(io.BytesIO(csv_bytes(frame)))
    pd.testing.assert_frame_equal(again, frame)


def test_json_is_strict_and_keeps_non_finite_values_as_text(frame):
    records = json.loads(json_bytes(frame), parse_constant=lambda name: pytest.fail(f"{name} is not JSON"))
    assert records[0] == {"size": 256, "dtype": "bf16", "median_ms": 0.125, "ok": True}
    assert records[1]["median_ms"] == "inf" and records[2]["median_ms"] == "nan"


def test_json_handles_numpy_scalars_and_missing_values():
    df = pd.DataFrame(
        {
            "n": np.array([1, 2], dtype=np.int64),
            "when": pd.to_datetime(["2026-01-01", None]),
            "samples": [[0.1, 0.2], None],
        }
    )
    records = json.loads(json_bytes(df))
    assert records[0]["n"] == 1 and records[1]["when"] is None and records[0]["samples"] == [0.1, 0.2]


def test_json_keeps_a_one_item_list_of_a_missing_value_as_a_list():
    df = pd.DataFrame({"samples_ms": [[float("nan")], [None], [1.5]]})
    records = json.loads(json_bytes(df))
    assert [r["samples_ms"] for r in records] == [["nan"], [None], [1.5]]

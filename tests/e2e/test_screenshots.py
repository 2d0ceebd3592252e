"""Every page as a person first sees it, at 1280×800: a screenshot saved under test-results/screens/ for a person
to look at, and no text a reader trips on — a Python `None`, `nan`, a list or a dict's repr."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("streamlit")

from pages.common.catalog import available
from tests.conftest import ROOT
from tests.e2e.test_pages_load import url_path

PAGES = available()
# what no page should print: Python's None, a NaN, or a list's or dict's repr ("[0]", "{'a'")
REPRS = re.compile(r"\bNone\b|\bnan\b|\[\d|\{'")
SCREENS = ROOT / "test-results" / "screens"
COMPUTES_ON_LOAD = {"pages/number_formats.py"}  # its answer comes from a worker as the page opens: wait for it


@pytest.mark.parametrize("file", [p for p, _, _ in PAGES], ids=[url_path(p) or "home" for p, _, _ in PAGES])
def test_each_page_reads_as_text_a_person_writes(lab, file):
    lab.page.set_viewport_size({"width": 1280, "height": 800})
    lab.open(url_path(file))
    lab.expect(lab.page.locator("h1").first).to_be_visible()
    if file in COMPUTES_ON_LOAD:
        lab.expect(lab.charts().first).to_be_visible(timeout=180_000)
    lab.idle()
    SCREENS.mkdir(parents=True, exist_ok=True)
    lab.page.screenshot(path=str(SCREENS / f"{url_path(file) or 'home'}.png"))
    text = lab.main().inner_text()
    found = sorted({m.group(0) for m in REPRS.finditer(text)})
    assert not found, (
        f"{file} shows {found}: "
        + " | ".join(text[max(0, m.start() - 60) : m.end() + 60].replace("\n", " ") for m in REPRS.finditer(text))[
            :2000
        ]
    )
    lab.no_exception()

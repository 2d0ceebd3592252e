"""The home page describes this box and links to every page; the sidebar selections survive a page switch; a
deep link works on a fresh server. (Every page opening with its title: tests/e2e/test_screenshots.py.)"""

from __future__ import annotations

import re

import pytest

pytest.importorskip("streamlit")

from pages.common.catalog import available

PAGES = available()


def url_path(file: str) -> str:
    """st.navigation serves pages/x.py at /x and the default page at /."""
    return "" if file == "pages/home.py" else file.removeprefix("pages/").removesuffix(".py")


def test_home_describes_this_box_and_links_every_page(lab):
    lab.open()
    lab.expect(lab.page.locator("h1").first).to_have_text("GPU Lab")
    main = lab.page.get_by_test_id("stMain")
    lab.expect(main.get_by_text(re.compile(r"No CUDA GPU here|cuda:0")).first).to_be_visible()
    lab.expect(main.get_by_test_id("stMetric").first).to_be_visible()
    for _, title, _ in PAGES[1:]:
        lab.expect(main.get_by_test_id("stPageLink").get_by_text(title, exact=True)).to_be_visible()
    lab.expect(lab.page.get_by_test_id("stMainMenu")).to_be_visible()  # the viewer menu stays
    lab.expect(lab.page.get_by_test_id("stAppDeployButton")).to_have_count(0)  # the developer's Deploy goes
    # the tab's icon is served by the lab itself: an offline box logged an error on every page fetching it from a
    # font host
    icons = lab.page.locator("link[rel~='icon']")
    lab.expect(icons.first).to_be_attached()
    hrefs = [icons.nth(i).get_attribute("href") or "" for i in range(icons.count())]
    assert hrefs and not any(re.match(r"(https?:)?//", h) and lab.url not in h for h in hrefs), hrefs
    lab.no_exception()


def test_sidebar_selections_persist_across_pages(lab):
    lab.open()
    lab.choose("Model size", "mini", sidebar=True)
    lab.choose("Dtype", "bf16", sidebar=True)
    for _, title, _ in PAGES[1:] + PAGES[:1]:
        lab.nav(title)
        assert (lab.value("Model size", sidebar=True), lab.value("Dtype", sidebar=True)) == ("mini", "bf16"), title
        lab.no_exception()


def test_deep_link_on_a_fresh_server_shows_the_shared_sidebar(fresh_lab):
    """A bookmarked page (or a tab reconnecting after a restart) is the first request the server sees."""
    lab = fresh_lab
    lab.page.goto(f"{lab.url}/matmul")
    lab.idle(120_000)
    lab.expect(lab.page.locator("h1").first).to_have_text("Matmul throughput", timeout=60_000)
    lab.expect(lab.selectbox("Model size", lab.page.get_by_test_id("stSidebar"))).to_have_count(1, timeout=60_000)
    lab.expect(lab.page.get_by_test_id("stSidebarNav").get_by_role("link", name="Compare & export")).to_have_count(1)
    lab.no_exception()

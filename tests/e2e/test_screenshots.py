"""Every page as a person sees it, at 1280×800 — first, and after opening an example or a default run: a screenshot
saved under test-results/screens/ for a person to look at, the answer in the window without scrolling, no text a
reader trips on (a Python `None`, `nan`, a list or a dict's repr), and nothing cut off or sticking out."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("streamlit")

from core.workload import examples
from pages.common.catalog import available
from tests.conftest import ROOT
from tests.e2e.test_pages_load import url_path
from tests.pages.test_readable_examples import REPR

PAGES = available()
# what no page should print: Python's None, a NaN, a list's or dict's repr ("[0]", "[[4, 8]]", "{'a'"), or Markdown's
# backtick (the table cells, drawn on a canvas, are read by tests/pages/test_readable_examples.py)
REPRS = re.compile(rf"{REPR.pattern}|\[\d|`")
SCREENS = ROOT / "test-results" / "screens"
COMPUTES_ON_LOAD = {"pages/number_formats.py"}  # its answer comes from a worker as the page opens: wait for it
WINDOW = {"width": 1280, "height": 800}

# What a reader cannot see whole: an element wider than the page's column (not inside a box that scrolls or clips
# on purpose: a table, a chart, the tab bar), text cut to an ellipsis (a metric's label, a caption), and text
# clipped by its own box without one (a select's value or placeholder, a chip).
CUT_OFF = """() => {
  const column = document.querySelector('[data-testid="stMainBlockContainer"]');
  const edge = column.getBoundingClientRect();
  const clipped = (el) => {
    for (let p = el.parentElement; p && p !== column; p = p.parentElement) {
      const o = getComputedStyle(p);
      if (/(auto|scroll|hidden|clip)/.test(o.overflowX)) return true;
    }
    return false;
  };
  const name = (el) => (el.getAttribute('data-testid') || el.tagName.toLowerCase()) + ': ' +
    (el.innerText || '').trim().slice(0, 60);
  const found = [];
  for (const el of column.querySelectorAll('*')) {
    const box = el.getBoundingClientRect();
    if (!box.width || !box.height) continue;
    if ((box.right > edge.right + 1 || box.left < edge.left - 1) && !clipped(el)) found.push('sticks out ' + name(el));
    const style = getComputedStyle(el);
    if (style.textOverflow === 'ellipsis' && el.scrollWidth > el.clientWidth + 1) found.push('cut ' + name(el));
    // text clipped inside its own box without an ellipsis: a select's value or placeholder, a chip
    const ownText = [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
    const clips = /(hidden|clip)/.test(style.overflowX) && style.textOverflow !== 'ellipsis';
    if (ownText && clips && el.scrollWidth > el.clientWidth + 1)
      found.push('clipped ' + name(el));
  }
  return found.slice(0, 20);
}"""

# Text drawn over other text: every visible piece of the page's text (the lines of a text node: Streamlit's text, a
# metric's label, a caption) and of the charts' SVG (annotations, tick labels, the legend, titles: `.main-svg text`,
# rotated as drawn) as a quadrilateral on the screen; two that overlap by more than TOUCH px along every axis
# (separating axes) are overprinted. Pieces of one SVG text (its tspans) are one piece; empty text, text hidden or
# clipped away by a box that scrolls are skipped; SVG text past its chart's edge is cut.
OVERPRINT = """() => {
  const TOUCH = 2;
  const main = document.querySelector('[data-testid="stMain"]') || document.body;
  const shown = (el) => el.checkVisibility({opacityProperty: true, visibilityProperty: true});
  const clip = (r, el) => {  // the part of a screen rectangle its scrolling or clipping boxes let through
    let [l, t, rr, b] = [r.left, r.top, r.right, r.bottom];
    for (let p = el.parentElement; p && p !== document.documentElement; p = p.parentElement) {
      const o = getComputedStyle(p);
      if (o.overflowX === 'visible' && o.overflowY === 'visible') continue;
      const e = p.getBoundingClientRect();
      l = Math.max(l, e.left); t = Math.max(t, e.top); rr = Math.min(rr, e.right); b = Math.min(b, e.bottom);
    }
    return rr - l > TOUCH && b - t > TOUCH;
  };
  const pieces = [];
  const walker = document.createTreeWalker(main, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const el = n.parentElement;
    if (!n.textContent.trim() || !el || el.closest('svg') || !shown(el)) continue;
    const range = document.createRange();
    range.selectNodeContents(n);
    for (const r of range.getClientRects()) {
      if (r.width <= TOUCH || r.height <= TOUCH || !clip(r, el)) continue;
      pieces.push({text: n.textContent.trim().slice(0, 50), el,
        quad: [[r.left, r.top], [r.right, r.top], [r.right, r.bottom], [r.left, r.bottom]]});
    }
  }
  const cut = [];
  const texts = [...main.querySelectorAll(
    '.main-svg text, .annotation-text, .xtick text, .ytick text, g.legend text, .gtitle')];
  for (const el of new Set(texts)) {
    if (!el.textContent.trim() || texts.some((o) => o !== el && o.contains(el)) || !shown(el)) continue;
    const b = el.getBBox(), m = el.getScreenCTM();
    if (!b.width || !b.height || !m) continue;
    const quad = [[b.x, b.y], [b.x + b.width, b.y], [b.x + b.width, b.y + b.height], [b.x, b.y + b.height]]
      .map(([x, y]) => [m.a * x + m.c * y + m.e, m.b * x + m.d * y + m.f]);
    const chart = el.closest('.js-plotly-plot') || el.ownerSVGElement;
    const edge = chart.getBoundingClientRect();
    if (quad.some(([x, y]) => x < edge.left - 1 || x > edge.right + 1 || y < edge.top - 1 || y > edge.bottom + 1))
      cut.push('cut by its chart\\'s edge: ' + el.textContent.trim().slice(0, 50));
    pieces.push({text: el.textContent.trim().slice(0, 50), el, quad});
  }
  const depth = (p, q) => {  // how far two convex quadrilaterals overlap: the least along any separating axis
    let least = Infinity;
    for (const quad of [p, q]) for (let i = 0; i < 4; i++) {
      const [x1, y1] = quad[i], [x2, y2] = quad[(i + 1) % 4];
      const len = Math.hypot(x2 - x1, y2 - y1);
      if (!len) continue;
      const ax = [(y1 - y2) / len, (x2 - x1) / len];
      const span = (s) => s.map(([x, y]) => x * ax[0] + y * ax[1]);
      const a = span(p), c = span(q);
      least = Math.min(least, Math.min(Math.max(...a), Math.max(...c)) - Math.max(Math.min(...a), Math.min(...c)));
    }
    return least;
  };
  const found = [];
  for (let i = 0; i < pieces.length; i++) for (let j = i + 1; j < pieces.length; j++) {
    const p = pieces[i], q = pieces[j];
    if (p.el === q.el || p.el.contains(q.el) || q.el.contains(p.el)) continue;
    if (depth(p.quad, q.quad) > TOUCH) found.push(`"${p.text}" over "${q.text}"`);
  }
  return [...cut, ...found].slice(0, 20);
}"""


def test_the_check_sees_text_cut_clipped_or_sticking_out(page):
    """The check itself, on a hand-made page: each of the three faults is found, text that fits is not."""
    page.set_viewport_size(WINDOW)
    page.set_content("""<div data-testid="stMainBlockContainer" style="width: 400px">
      <p style="width: 80px; overflow: hidden; white-space: nowrap">a select's placeholder cut short</p>
      <p style="width: 80px; overflow: hidden; white-space: nowrap; text-overflow: ellipsis">a long label cut</p>
      <div style="width: 900px">wider than the column</div>
      <p style="width: 300px; overflow: hidden; white-space: nowrap">fits</p></div>""")
    found = page.evaluate(CUT_OFF)
    assert [f.split(":")[0] for f in found] == ["clipped p", "cut p", "sticks out div"]
    assert not [f for f in found if f.endswith("fits")]


def test_the_check_sees_text_drawn_over_text(page):
    """The overprint check itself, on a hand-made page: two labels on one spot, a tick label under an annotation
    (both turned as Plotly turns them) and a legend entry past its chart's edge are found; text beside text,
    rotated labels whose upright boxes overlap but whose letters do not, a word inside its own paragraph, empty
    text and text its scrolling box hides are not."""
    page.set_viewport_size(WINDOW)
    page.set_content("""<div data-testid="stMain" style="position: relative; width: 900px; height: 700px">
      <p style="position: absolute; left: 0; top: 0; margin: 0">Interconnect bandwidth</p>
      <p style="position: absolute; left: 60px; top: 4px; margin: 0">label drawn over</p>
      <p style="position: absolute; left: 0; top: 60px; margin: 0">beside <b>its own bold word</b> and more</p>
      <p style="position: absolute; left: 0; top: 100px; margin: 0; width: 40px; height: 0; overflow: hidden">
        <span style="display: block; margin-top: 30px">scrolled away</span></p>
      <p style="position: absolute; left: 0; top: 100px; margin: 0">upright</p>
      <span style="position: absolute; left: 10px; top: 100px"> </span>
      <svg class="main-svg" style="position: absolute; left: 0; top: 200px" width="600" height="300">
        <g class="xtick"><text x="100" y="100" transform="rotate(-45 100 100)">1,024 MiB</text></g>
        <g class="xtick"><text x="130" y="100" transform="rotate(-45 130 100)">2,048 MiB</text></g>
        <g class="annotation"><text class="annotation-text" x="240" y="100">peak 989 TFLOPS</text></g>
        <g class="ytick"><text x="250" y="104">10²</text></g>
        <g class="legend"><text x="560" y="20">bf16 autocast</text></g>
        <text class="gtitle" x="10" y="250"></text>
      </svg></div>""")
    found = page.evaluate(OVERPRINT)
    assert sorted(found) == sorted(
        [
            "cut by its chart's edge: bf16 autocast",
            '"Interconnect bandwidth" over "label drawn over"',
            '"peak 989 TFLOPS" over "10²"',
        ]
    ), found


@pytest.mark.parametrize("file", [p for p, _, _ in PAGES], ids=[url_path(p) or "home" for p, _, _ in PAGES])
def test_each_page_opens_with_its_title_and_reads_as_text_a_person_writes(lab, file):
    lab.page.set_viewport_size(WINDOW)
    lab.open(url_path(file))
    lab.expect(lab.page.locator("h1").first).to_be_visible()
    assert lab.page.locator("h1").first.inner_text().strip(), f"{file} shows no title"
    nav = lab.page.get_by_test_id("stSidebarNav")
    for _, other, _ in PAGES:
        lab.expect(nav.get_by_role("link", name=other, exact=True)).to_be_visible()
    if file in COMPUTES_ON_LOAD:
        lab.expect(lab.charts().first).to_be_visible(timeout=180_000)
    lab.idle()
    shoot(lab, url_path(file) or "home")
    readable(lab, file)


def shoot(lab, name: str) -> None:
    SCREENS.mkdir(parents=True, exist_ok=True)
    lab.page.screenshot(path=str(SCREENS / f"{name}.png"))


def readable(lab, file: str) -> None:
    """No Python repr in the page's text, nothing cut off or wider than the page, no exception."""
    text = lab.main().inner_text()
    found = sorted({m.group(0) for m in REPRS.finditer(text)})
    assert not found, (
        f"{file} shows {found}: "
        + " | ".join(text[max(0, m.start() - 60) : m.end() + 60].replace("\n", " ") for m in REPRS.finditer(text))[
            :2000
        ]
    )
    cut = lab.page.evaluate(CUT_OFF)
    assert not cut, f"{file}: {cut}"
    drawn_over = lab.page.evaluate(OVERPRINT)
    assert not drawn_over, f"{file}: {drawn_over}"
    lab.no_exception()


@pytest.mark.parametrize(
    "file, tab, button, headline",
    [
        ("pages/step_bench.py", "Import a trace", "Open an example recorded on Tesla V100", "Kernel time"),
        ("pages/allocator.py", "Your snapshot", "Open an example recorded on", "Peak allocated"),
    ],
    ids=["step-bench-example", "allocator-example"],
)
def test_the_answer_comes_into_view(lab, file, tab, button, headline):
    """After a click on an example, far down the page, the run's banner and its headline figure are in the
    1280×800 window without the person scrolling (after a run: test_flows.test_matmul)."""
    lab.page.set_viewport_size(WINDOW)
    lab.open(url_path(file))
    lab.tab(tab)
    main = lab.main()
    clicked = main.get_by_role("button", name=re.compile("^" + re.escape(button))).filter(visible=True).first
    clicked.scroll_into_view_if_needed()
    clicked.click()
    banner = main.get_by_text(re.compile(r"^Run [0-9a-f]{8} · ")).filter(visible=True).first
    lab.expect(banner).to_be_visible(timeout=180_000)
    lab.idle()
    lab.expect(banner).to_be_in_viewport()
    figure = main.get_by_test_id("stMetricLabel").filter(has_text=headline).first
    lab.expect(figure).to_be_in_viewport()
    lab.expect(lab.charts().first.locator(".main-svg").first).to_be_visible()  # drawn, not only placed
    shoot(lab, f"{url_path(file)}-after-an-example")
    readable(lab, file)


def example_buttons(kind: str) -> list[str]:
    return [f"Open an example recorded on {e.gpu}: {e.title}" for e in examples.of_kind(kind) if examples.present(e)]


# Each page's one-click examples (the files shipped in examples/), with the tab that holds them and what says the
# example is open: a new run's banner, or the runs file's import said in words (Compare).
BANNER = re.compile(r"^Run [0-9a-f]{8} · ")
EXAMPLES = {
    "pages/step_bench.py": ("Import a trace", example_buttons("trace"), BANNER),
    "pages/allocator.py": ("Your snapshot", example_buttons("snapshot"), BANNER),
    "pages/train_memory.py": (None, example_buttons("snapshot"), BANNER),
    "pages/interconnect.py": (
        None,
        [f"Open an example hang: {e.title}" for e in examples.of_kind("hang") if examples.present(e)],
        BANNER,
    ),
    "pages/compare.py": (None, ["Load example runs"], re.compile(r"^Imported \d+ run")),
}


@pytest.mark.parametrize("file", list(EXAMPLES), ids=[url_path(f) for f in EXAMPLES])
def test_every_example_reads_whole_and_drawn_apart(lab, file):
    """The page after each of its one-click examples in turn, in one browser session (an example is a file shipped
    in the repo, imported in seconds): once the example's answer is drawn, no text is cut, drawn over other text or
    a Python repr; a screenshot of each is saved."""
    tab, buttons, opened = EXAMPLES[file]
    assert buttons, f"{file} has no example here"
    lab.page.set_viewport_size(WINDOW)
    lab.open(url_path(file))
    if tab:
        lab.tab(tab)
    main = lab.main()
    for i, label in enumerate(buttons):
        before = main.get_by_text(opened).filter(visible=True).all_inner_texts()
        button = main.get_by_role("button", name=re.compile("^" + re.escape(label))).filter(visible=True).first
        lab.expect(button).to_be_enabled(timeout=180_000)  # the buttons wait while an import runs
        button.scroll_into_view_if_needed()
        button.click()
        news = main.get_by_text(opened).filter(visible=True)
        lab.expect(news.filter(has_not_text=before[0]) if before else news.first).not_to_have_count(0, timeout=180_000)
        lab.idle()
        for chart in lab.charts().all():  # drawn, not only placed
            lab.expect(chart.locator(".main-svg").first).to_be_attached()
        shoot(lab, f"{url_path(file)}-example-{i + 1}")
        readable(lab, f"{file} after {label!r}")

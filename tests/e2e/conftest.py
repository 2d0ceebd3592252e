"""Browser end-to-end harness: one real ``streamlit run app.py`` per test session on a free localhost
port with a private data directory, driven by Playwright with Debian's Chromium.

Nothing sleeps for a fixed time: the server is polled on ``/_stcore/health`` and every step waits
for the app to be connected with its script idle (Streamlit's own e2e harness does the same), then
for the element it expects. Without Playwright or Chromium the tests skip with the reason.
"""

from __future__ import annotations

import os
import re
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import free_port, wait_healthy

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
CHROMIUM = os.environ.get("GPULAB_E2E_CHROMIUM", "/usr/bin/chromium")
JOB_TIMEOUT_MS = 180_000  # a cold worker imports torch; the machine may be busy
# How long a running job may say the same thing: a compiled stack's first step compiles its graphs in one silent
# phase, minutes on a busy two-core box whose compiler cache is cold (a fresh machine); a stuck job ends at its own
# time limit, which the page then reports
JOB_STALL_S = 600
# Every expectation and action waits for a state (a chart present, a banner naming the stored run) with
# this deadline instead of Playwright's 5 s default: on a loaded machine a page takes longer to render,
# and a deadline only bounds a wait that ends as soon as the state is there.
STATE_TIMEOUT_MS = 90_000


def _missing() -> str | None:
    try:
        import playwright.sync_api  # noqa: F401
        import pytest_playwright  # noqa: F401
    except ImportError as exc:
        return f"browser tests need playwright and pytest-playwright ({exc}); pip install -r requirements-dev.txt"
    if not os.access(CHROMIUM, os.X_OK):
        return f"browser tests need Chromium at {CHROMIUM} (apt-get install chromium, or set GPULAB_E2E_CHROMIUM)"
    return None


def pytest_collection_modifyitems(config, items):
    """Mark the browser tests, and put them first: they run one after another in one test process (one server,
    one Chromium), the suite's longest chain, so it starts while the other processes share out the rest."""
    problem = _missing()
    browser = [item for item in items if HERE in Path(str(item.fspath)).parents]
    for item in browser:
        item.add_marker(pytest.mark.e2e)
        item.add_marker(pytest.mark.xdist_group("browser"))
        if problem:
            item.add_marker(pytest.mark.skip(reason=problem))
    chosen = set(map(id, browser))
    items[:] = browser + [item for item in items if id(item) not in chosen]


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    return {**browser_type_launch_args, "executable_path": CHROMIUM}


@pytest.fixture(scope="session")
def browser_context_args(browser_context_args):
    return {**browser_context_args, "accept_downloads": True, "viewport": {"width": 1400, "height": 1000}}


def start_server(base: Path) -> dict:
    """``streamlit run app.py`` on a free port with its own data and lock directories; waits for health."""
    port = free_port()
    env = dict(os.environ, GPULAB_DATA_DIR=str(base / "data"), GPULAB_LOCK_DIR=str(base / "locks"))
    env.pop("GPULAB_DB", None)
    log = open(base / "server.log", "wb")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            "app.py",
            "--server.port",
            str(port),
            "--server.headless",
            "true",
            "--server.fileWatcherType",
            "none",
            "--browser.gatherUsageStats",
            "false",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    if not wait_healthy(url, 90, alive=lambda: proc.poll() is None):
        proc.kill()
        pytest.fail(f"streamlit did not become healthy: {(base / 'server.log').read_text()[-2000:]}")
    return {"url": url, "data_dir": base / "data", "log": log, "proc": proc}


def stop_server(server: dict) -> None:
    proc = server["proc"]
    proc.terminate()
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    server["log"].close()


@pytest.fixture(scope="session")
def server(tmp_path_factory, browser):
    """The dashboard for the whole session, first opened at ``/`` so the device list is cached.

    (Until a session has run app.py's ``st.navigation``, Streamlit briefly treats ``pages/`` as a
    legacy multipage folder; ``test_deep_link_on_a_fresh_server_shows_the_shared_sidebar`` covers
    a first request that is a deep link.)
    """
    if _missing():
        pytest.skip(_missing())
    running = start_server(tmp_path_factory.mktemp("e2e-server"))
    page = browser.new_page()
    try:
        page.goto(running["url"])
        page.get_by_test_id("stSidebar").get_by_test_id("stSelectbox").first.wait_for(timeout=120_000)
    finally:
        page.close()
    yield running
    stop_server(running)


@pytest.fixture
def fresh_server(tmp_path):
    """A server no browser has visited yet."""
    running = start_server(tmp_path)
    yield running
    stop_server(running)


@pytest.fixture(scope="session")
def base_url(server):
    return server["url"]


class Lab:
    """What a user does in the dashboard, as Playwright steps that wait for the app, not the clock."""

    def __init__(self, page, url: str) -> None:
        from playwright.sync_api import expect

        self.page, self.url, self.expect = page, url, expect
        expect.set_options(timeout=STATE_TIMEOUT_MS)
        page.set_default_timeout(STATE_TIMEOUT_MS)
        self.errors: list[str] = []
        page.on("pageerror", lambda exc: self.errors.append(str(exc)))

    def idle(self, timeout_ms: float = 60_000) -> None:
        self.page.wait_for_selector(
            "[data-testid='stApp'][data-test-connection-state='CONNECTED']", state="attached", timeout=timeout_ms
        )
        self.page.wait_for_selector(
            "[data-testid='stApp'][data-test-script-state='notRunning']", state="attached", timeout=timeout_ms
        )

    def start(self, model: str, dtype: str, page_title: str) -> None:
        """A user's first steps: pick the model size and dtype in the sidebar, then open a page."""
        self.open()
        self.choose("Model size", model, sidebar=True)
        self.choose("Dtype", dtype, sidebar=True)
        self.nav(page_title)

    def open(self, path: str = "") -> None:
        self.page.goto(f"{self.url}/{path}")
        self.idle(120_000)  # the first visit asks a worker for the device list
        self.expect(self.page.get_by_test_id("stSidebar")).to_be_visible()
        self.pin_cpu()

    def pin_cpu(self) -> None:
        """These flows expect CPU behaviour; a GPU box's sidebar starts on cuda:0, so pick the CPU."""
        box = self.selectbox("Device", self.page.get_by_test_id("stSidebar"))
        self.expect(box).to_have_count(1)
        box.click()
        self.page.get_by_role("option", name=re.compile(r"^CPU")).click()
        self.idle()
        assert self.value("Device", sidebar=True).startswith("CPU")

    def no_exception(self) -> None:
        self.expect(self.page.get_by_test_id("stException")).to_have_count(0)
        assert not self.errors, self.errors

    def nav(self, title: str) -> None:
        """Switch page through the sidebar (same session, like a user; page.goto would start a new one)."""
        self.page.get_by_test_id("stSidebarNav").get_by_role("link", name=title, exact=True).click()
        self.expect(self.page.get_by_test_id("stHeading").first).to_be_visible()
        self.expect(self.page.locator("h1").first).to_have_text(re.compile(r"\S"))
        self.idle()

    def selectbox(self, label: str, scope=None):
        scope = scope or self.page
        return scope.get_by_test_id("stSelectbox").filter(
            has=self.page.get_by_test_id("stWidgetLabel").get_by_text(label, exact=True)
        )

    def choose(self, label: str, option: str, sidebar: bool = False) -> None:
        scope = self.page.get_by_test_id("stSidebar") if sidebar else self.page.get_by_test_id("stMain")
        box = self.selectbox(label, scope)
        self.expect(box).to_have_count(1)
        box.click()
        self.page.get_by_role("option", name=option, exact=True).click()
        self.idle()
        assert self.value(label, sidebar) == option

    def value(self, label: str, sidebar: bool = False) -> str:
        """The option a selectbox shows (its combobox's value, as a screen reader reads it)."""
        scope = self.page.get_by_test_id("stSidebar") if sidebar else self.page.get_by_test_id("stMain")
        box = self.selectbox(label, scope)
        snapshot = box.aria_snapshot()
        found = re.search(r'combobox "[^"]*": (.+)', snapshot)
        return found.group(1).strip().strip('"') if found else snapshot

    def main(self):
        return self.page.get_by_test_id("stMain")

    def number(self, label: str, value) -> None:
        box = (
            self.main()
            .get_by_test_id("stNumberInput")
            .filter(visible=True)
            .filter(has=self.page.get_by_test_id("stWidgetLabel").get_by_text(label, exact=True))
        )
        self.expect(box).to_have_count(1)
        box.locator("input").fill(str(value))
        box.locator("input").press("Enter")
        self.idle()
        self.expect(box.locator("input")).to_have_value(str(value))

    def tab(self, name: str) -> None:
        self.page.get_by_role("tab", name=name, exact=True).click()
        self.idle()

    def run(self, button: str = "Run") -> str:
        """Press Run, see the job's progress (or its queue position), then its result; returns the run id.

        The result is recognised by the run panel's banner, "Run <id> · CPU — <cpu> · …", which also
        proves the run is labelled CPU.
        """
        main = self.main()
        before = set(self.banners())
        main.get_by_role("button", name=button, exact=True).filter(visible=True).click()
        progress = main.get_by_test_id("stProgress").or_(main.get_by_text(re.compile(r"^Queued")))
        self.expect(progress.filter(visible=True).first).to_be_visible(timeout=JOB_TIMEOUT_MS)
        said: str | None = None  # nothing read yet: the first reading, even '' between two redraws, starts the clock
        deadline = 0.0
        while not set(self.banners()) - before:
            now = self.progress_text(progress)
            if now != said:  # the job moved on: a step, a phase, the queue; a silent phase may be long
                said, deadline = now, time.monotonic() + JOB_STALL_S
            assert time.monotonic() < deadline, f"the run stopped moving at {said!r}"
            self.page.wait_for_timeout(250)  # polling the app's own progress fragment, not a fixed wait
        self.idle()
        (run_id,) = set(self.banners()) - before
        self.no_exception()
        return run_id

    @staticmethod
    def progress_text(progress) -> str:
        """What the job's progress says now ('' between two redraws of the fragment)."""
        return " ".join(progress.filter(visible=True).all_inner_texts())

    def banners(self) -> list[str]:
        texts = self.main().get_by_text(re.compile(r"^Run [0-9a-f]{8} · ")).filter(visible=True).all_inner_texts()
        found = [re.match(r"Run ([0-9a-f]{8}) · (.*)", t) for t in texts]
        for match in found:
            assert match.group(2).startswith("CPU"), f"a CPU run must be labelled CPU: {match.group(0)}"
        return [m.group(1) for m in found]

    def charts(self):
        return self.main().get_by_test_id("stPlotlyChart").filter(visible=True)

    def download(self, label: str, index: int = 0) -> tuple[str, bytes]:
        """Click an export button; returns (suggested file name, bytes)."""
        button = (
            self.page.get_by_test_id("stDownloadButton")
            .filter(visible=True)
            .get_by_role("button", name=label, exact=True)
        )
        with self.page.expect_download(timeout=JOB_TIMEOUT_MS) as info:  # a PNG is drawn by kaleido on the click
            button.nth(index).click()
        download = info.value
        return download.suggested_filename, Path(download.path()).read_bytes()


@pytest.fixture
def lab(page, server):
    return Lab(page, server["url"])


@pytest.fixture
def fresh_lab(page, fresh_server):
    return Lab(page, fresh_server["url"])


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from the PNG header (independent of the code that wrote it)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG file"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


@pytest.fixture
def check_exports(lab):
    """Download the first chart's PNG, HTML and CSV and check each file is what it says."""

    def check(csv_columns: set[str] = frozenset()) -> dict[str, bytes]:
        import csv
        import io

        files = {}
        if (
            lab.page.get_by_test_id("stDownloadButton")
            .filter(visible=True)
            .get_by_role("button", name="PNG", exact=True)
            .count()
        ):
            name, data = lab.download("PNG")
            assert name.endswith(".png") and png_size(data) == (2200, 1200)  # 1100×600 at scale 2
            files["png"] = data
        name, data = lab.download("HTML")
        text = data.decode("utf-8")
        assert name.endswith(".html") and "<html" in text[:300].lower() and "Plotly.newPlot" in text
        assert not re.search(r"<script[^>]*\bsrc=", text)  # plotly.js embedded: the file opens offline
        files["html"] = data
        name, data = lab.download("CSV")
        rows = list(csv.DictReader(io.StringIO(data.decode("utf-8"))))
        assert name.endswith(".csv") and rows, "the CSV has no data rows"
        assert csv_columns <= set(rows[0]), f"CSV columns {sorted(rows[0])} lack {sorted(csv_columns - set(rows[0]))}"
        files["csv"] = data
        return files

    return check

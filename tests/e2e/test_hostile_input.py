"""Careless and hostile input in a real browser (issue 15): names, device names, errors and import files
that carry Markdown or HTML are shown exactly as typed and make the browser fetch nothing; a hostile
import is refused with a readable message and the page stays up."""

from __future__ import annotations

import json
import re
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from core.result import RunResult
from core.store import MAX_IMPORT_BYTES, RunStore
from tests.e2e.conftest import STATE_TIMEOUT_MS


@pytest.fixture
def tracker():
    """A local web server that records every request: an image the page renders shows up here."""
    hits: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the http.server API
            hits.append(self.path)
            self.send_response(404)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    with pytest.raises(urllib.error.HTTPError):  # the tracker itself works
        urllib.request.urlopen(f"{url}/control", timeout=5)
    assert hits == ["/control"]
    hits.clear()
    yield url, hits
    server.shutdown()


def _settle(lab) -> None:
    lab.idle()
    lab.page.wait_for_load_state("networkidle", timeout=STATE_TIMEOUT_MS)


def _open_compare(lab) -> None:
    lab.open()
    lab.nav("Compare & export")


def test_names_and_errors_are_shown_as_typed_and_fetch_nothing(lab, server, tracker):
    url, hits = tracker
    name = f"![t]({url}/name.png) **loud**"
    run = RunResult(
        "probe",
        {"steps": 1},
        {"kind": "cuda", "name": f"GPU <img src={url}/device.png>", "label": f"cuda:0 — ![d]({url}/label.png)"},
        {},
        "2026-05-01T00:00:00+00:00",
        "2026-05-01T00:00:01+00:00",
        "error",
        error=f"failed: ![e]({url}/error.png) :red[x]",
        rows=[{"step": 1}],
        name=name,
    )
    run.id = "feedface0000000000000001"
    RunStore(server["data_dir"] / "runs.sqlite").save(run)
    _open_compare(lab)
    picker = lab.main().get_by_test_id("stMultiSelect").filter(has_text="Selected runs")
    picker.click()
    # the run is dated before the runs other tests stored on this server, so it sorts last, where a long
    # dropdown does not draw it: the picker's search finds it, as a user would
    lab.page.keyboard.type("feedface")
    option = lab.page.get_by_role("option", name=re.compile(r"^feedface · probe"))
    lab.expect(option).to_have_count(1)
    lab.expect(option).to_contain_text(name)  # the option list shows the name as typed
    option.click()
    lab.page.keyboard.press("Escape")
    _settle(lab)
    main = lab.main()
    lab.expect(main.get_by_text(f"probe — {name}", exact=True)).to_be_visible()  # the heading, literally
    lab.expect(main.get_by_text(f"error: failed: ![e]({url}/error.png) :red[x]", exact=True)).to_be_visible()
    lab.expect(main.get_by_text(re.compile(re.escape(f"cuda:0 — ![d]({url}/label.png)"))).first).to_be_visible()
    assert main.locator("img[src*='127.0.0.1']").count() == 0
    assert hits == [], f"the page fetched {hits}"
    lab.no_exception()


def _expand_import(lab) -> None:
    lab.main().get_by_text("Import runs exported on another box").click()
    lab.expect(lab.page.get_by_test_id("stFileUploaderDropzone")).to_be_visible()


def _upload(lab, path) -> None:
    """Pick the file, wait until its upload has finished (its row listed, no request in flight: the page then
    sends the file with its next rerun), then press Import. Pressed sooner on a busy box, Import ran without the
    file and the page said nothing."""
    lab.page.get_by_test_id("stFileUploaderDropzoneInput").set_input_files(str(path))
    lab.expect(lab.main().get_by_role("button", name=f"Remove {path.name}")).to_be_visible()
    _settle(lab)
    lab.main().get_by_role("button", name="Import", exact=True).click()
    _settle(lab)


def test_hostile_import_files_are_refused_in_words(lab, tracker, tmp_path):
    url, hits = tracker
    _open_compare(lab)
    _expand_import(lab)
    limit = f"{MAX_IMPORT_BYTES // 2**20}MB"
    lab.expect(lab.main().get_by_text(re.compile(rf"\b{limit} per file"))).to_be_visible()  # not 200MB

    bad_format = tmp_path / "format.json"
    bad_format.write_text(json.dumps({"format": f"![f]({url}/format.png)", "schema_version": 1, "runs": []}))
    _upload(lab, bad_format)
    lab.expect(
        lab.main().get_by_text(f"format '![f]({url}/format.png)' is not 'gpulab-runs'", exact=False)
    ).to_be_visible()
    deep: object = 1
    for _ in range(900):
        deep = {"a": deep}
    nested = tmp_path / "nested.json"
    nested.write_text(json.dumps({"format": "gpulab-runs", "schema_version": 1, "runs": [{"meta": deep}]}))
    lab.page.reload()
    lab.idle()
    _expand_import(lab)
    _upload(lab, nested)
    lab.expect(lab.main().get_by_text(re.compile("nests deeper than 64 levels"))).to_be_visible()
    assert hits == [], f"the page fetched {hits}"
    lab.no_exception()

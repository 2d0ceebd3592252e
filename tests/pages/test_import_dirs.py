"""The "file on this box" field (issue 32, hole 5): off unless the operator lists import directories; when on,
a path outside them (or a link inside pointing out) is refused with words that tell nothing of the file."""

from __future__ import annotations

import json
import os

import pytest

from tests.pages.test_workload import V100, page, wait_for_metric

FIELD = "step_bench.trace.path"


def _shown(at) -> str:
    """Every text the page shows (markdown, captions, errors, infos), as one string."""
    parts = [e.value for kind in ("markdown", "caption", "error", "info", "warning", "success") for e in at.get(kind)]
    return "\n".join(str(p) for p in parts).replace("\\", "")


def test_without_import_dirs_the_field_is_absent_and_a_path_in_session_state_is_not_read(data_dir, monkeypatch):
    monkeypatch.delenv("GPULAB_IMPORT_DIRS", raising=False)
    at = page("pages/step_bench.py")
    assert FIELD not in [t.key for t in at.text_input]
    assert "list the directories it may read in GPULAB_IMPORT_DIRS" in _shown(at)
    at.session_state[FIELD] = str(V100)  # as a crafted session would hold it
    at.run()
    assert at.button(key="step_bench.trace.import").disabled  # no upload, and the path is never read
    assert "step_bench.trace.job" not in at.session_state and not at.exception


def _secret(folder) -> tuple[bytes, int]:
    path = folder / "secret.json"
    path.write_text(json.dumps({"aws_secret_access_key": "wJalrXUtnFEMI" * 3, "token": "x" * 4_321}))
    return path.read_bytes()[:8], path.stat().st_size


@pytest.fixture
def allowed(tmp_path, monkeypatch):
    folder = tmp_path / "allowed"
    folder.mkdir()
    monkeypatch.setenv("GPULAB_IMPORT_DIRS", str(folder))
    return folder


def test_a_file_under_an_import_dir_is_imported(data_dir, allowed):
    (allowed / "step.json").write_bytes(V100.read_bytes())
    at = page("pages/step_bench.py")
    at.text_input(key=FIELD).input(str(allowed / "step.json")).run()
    at.button(key="step_bench.trace.import").click().run()
    wait_for_metric(at, "Kernel time")


@pytest.mark.parametrize("target", ["/etc/passwd", "outside", "link inside", "folder with a link"])
def test_a_path_outside_the_import_dirs_is_refused_naming_nothing_of_the_file(data_dir, allowed, tmp_path, target):
    head, size = _secret(tmp_path)
    given = str(tmp_path / "secret.json")
    if target == "/etc/passwd":
        given = "/etc/passwd"
        if os.access(given, os.R_OK):
            with open(given, "rb") as fh:
                head, size = fh.read(8), os.path.getsize(given)
    elif target == "link inside":
        (allowed / "trace.json").symlink_to(tmp_path / "secret.json")
        given = str(allowed / "trace.json")
    elif target == "folder with a link":  # the ranks of a job: a rank file that links out is refused too
        (allowed / "job").mkdir()
        (allowed / "job" / "rank-0.json").write_bytes(V100.read_bytes())
        (allowed / "job" / "rank-1.json").symlink_to(tmp_path / "secret.json")
        given = str(allowed / "job")
    at = page("pages/step_bench.py")
    at.text_input(key=FIELD).input(given).run()
    at.button(key="step_bench.trace.import").click().run()
    (error,) = [e.value for e in at.error]
    if target == "folder with a link":  # refused before the import dirs are asked: a folder's files are never links
        assert "rank-1.json in job is a link" in error.replace("\\", "")
    else:
        assert "not under the import directories this dashboard allows" in error and str(allowed) in error.replace(
            "\\", ""
        )
    shown = _shown(at)
    assert head.decode(errors="replace") not in shown and repr(head) not in shown
    assert f"{size}" not in shown and f"{size:,}" not in shown and "keys" not in shown
    assert "step_bench.trace.job" not in at.session_state  # nothing was queued to read it

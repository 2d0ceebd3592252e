"""The server's files stay the server's: a path is read only under the directories the operator lists, every
link followed first, and a refusal names the allowed directories and nothing of the file."""

from __future__ import annotations

import json
import os

import pytest

from core import import_dirs
from core.errors import ConfigError


@pytest.fixture
def allowed_dir(tmp_path, monkeypatch):
    folder = tmp_path / "allowed"
    folder.mkdir()
    monkeypatch.setenv(import_dirs.ENV, f"{tmp_path / 'elsewhere'}{os.pathsep}{folder}")
    return folder


def test_nothing_is_listed_by_default(monkeypatch):
    monkeypatch.delenv(import_dirs.ENV, raising=False)
    assert import_dirs.listed() == ()
    with pytest.raises(ConfigError, match=r"allows: none \(set GPULAB_IMPORT_DIRS\)"):
        import_dirs.allowed("/etc/passwd")


def test_a_file_under_a_listed_directory_is_allowed_resolved(allowed_dir):
    (allowed_dir / "sub").mkdir()
    trace = allowed_dir / "trace.json"
    trace.write_text("{}")
    assert import_dirs.allowed(str(allowed_dir / "sub" / ".." / "trace.json")) == trace.resolve()


def _refusal(given: str) -> str:
    with pytest.raises(ConfigError) as refused:
        import_dirs.allowed(given)
    return str(refused.value)


def test_paths_outside_are_refused_alike_and_name_only_the_allowed_dirs(allowed_dir, tmp_path):
    secret = tmp_path / "secret.json"
    secret.write_text('{"aws_secret_access_key": "AKIA"}')
    (allowed_dir / "link.json").symlink_to(secret)
    (allowed_dir / "loop").symlink_to(allowed_dir / "loop")
    words = {
        _refusal(given)
        for given in (
            str(secret),
            str(allowed_dir / "link.json"),  # a link inside pointing outside
            str(allowed_dir / ".." / "secret.json"),
            str(tmp_path / "missing.json"),  # no file: the same words, so existence is not told
            str(allowed_dir / "loop"),
            "/etc/passwd\0",
        )
    }
    (text,) = words
    assert str(allowed_dir) in text and "secret" not in text and "aws" not in text


# -- issue 48, item 12: the list is resolved once, and an entry another user could swap is left out ---------------


def test_a_listed_folder_missing_at_start_stays_out_even_once_it_is_a_link_to_etc(tmp_path, monkeypatch):
    later = tmp_path / "later"
    monkeypatch.setenv(import_dirs.ENV, str(later))
    assert import_dirs.listed() == ()
    assert import_dirs.refused_entries() == (f"{later}: does not exist",)
    later.symlink_to("/etc")  # created afterwards, by whoever could write its parent
    assert import_dirs.listed() == ()
    with pytest.raises(ConfigError, match="not under the import directories"):
        import_dirs.allowed(str(later / "passwd"))


def test_a_folder_others_can_write_on_the_way_is_left_out_the_sticky_tmp_is_not(tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    (shared / "imports").mkdir(parents=True)
    shared.chmod(0o775)  # group-writable: a member of the group could swap "imports" for a link
    monkeypatch.setenv(import_dirs.ENV, str(shared / "imports"))
    assert import_dirs.listed() == ()
    assert import_dirs.refused_entries() == (f"{shared / 'imports'}: {shared} is writable by other users",)
    sticky = tmp_path / "sticky"
    (sticky / "imports").mkdir(parents=True)
    sticky.chmod(0o1777)  # as /tmp: others may add entries but not replace this one
    monkeypatch.setenv(import_dirs.ENV, str(sticky / "imports"))
    assert import_dirs.listed() == ((sticky / "imports").resolve(),)


@pytest.mark.skipif(os.getuid() != 0, reason="making a link owned by another user takes root")
def test_a_link_another_user_owns_is_left_out(tmp_path, monkeypatch):
    link = tmp_path / "imports"
    link.symlink_to("/etc")
    os.lchown(link, 65534, 65534)  # nobody's
    monkeypatch.setenv(import_dirs.ENV, str(link))
    assert import_dirs.listed() == ()
    assert import_dirs.refused_entries() == (f"{link}: {link} belongs to another user",)


# -- issue 48, item 11: the worker opens the file itself, without following links, and checks what it opened ------


@pytest.fixture
def confined_manager(tmp_path, monkeypatch):
    """A job manager as the dashboard makes it: its import workers confined to the listed folder."""
    from core.jobs import JobManager

    allowed = tmp_path / "allowed"
    (allowed / "job").mkdir(parents=True)
    monkeypatch.setenv(import_dirs.ENV, str(allowed))
    manager = JobManager(store=None, import_env=import_dirs.confinement())
    yield manager, allowed
    manager.shutdown()


def _trace(path, device: str) -> None:
    path.write_text(json.dumps({"deviceProperties": [{"id": 0, "name": device}], "traceEvents": []}))


def test_a_file_under_the_folder_is_read_and_named_as_the_user_named_it(confined_manager):
    import shutil

    from tests.conftest import ROOT

    manager, allowed = confined_manager
    shutil.copy(ROOT / "examples" / "traces" / "mi250_toy_rocm.json.gz", allowed / "job" / "step.json.gz")
    run = manager.submit("profiler-trace", {"path": str(allowed / "job" / "step.json.gz")}, "cpu").wait(120)
    assert run.status == "ok", run.error
    assert run.meta["file"] == "step.json.gz" and run.meta["device_name"] == "AMD Radeon Graphics"


def test_a_folder_swapped_for_a_link_after_the_check_opens_nothing(confined_manager, tmp_path):
    manager, allowed = confined_manager
    outside = tmp_path / "outside"
    outside.mkdir()
    _trace(outside / "trace.json", "SECRET-GPU-OUTSIDE")
    _trace(allowed / "job" / "trace.json", "Allowed GPU")
    checked = import_dirs.allowed(str(allowed / "job" / "trace.json"))  # the page's check, at the click
    (allowed / "job").rename(tmp_path / "job.was")  # while the import waits in the queue
    (allowed / "job").symlink_to(outside)
    run = manager.submit("profiler-trace", {"path": str(checked)}, "cpu").wait(120)
    assert run.status == "error" and run.error_kind == "config"
    assert run.error == f"invalid request: {import_dirs.MOVED}"
    assert "SECRET" not in json.dumps(run.to_dict()) and str(tmp_path) not in run.error


def test_the_worker_opens_only_a_regular_file_it_reached_without_a_link(confined_manager, tmp_path):
    manager, allowed = confined_manager
    _trace(tmp_path / "secret.json", "SECRET-GPU")
    (allowed / "trace.json").symlink_to(allowed / ".." / "secret.json")
    run = manager.submit("profiler-trace", {"path": str(allowed / "trace.json")}, "cpu").wait(120)
    assert run.status == "error" and run.error == f"invalid request: {import_dirs.MOVED}"
    os.mkfifo(allowed / "fifo.json")  # opened without blocking, and refused: not a regular file
    with pytest.raises(ConfigError, match="nothing was read"):
        import_dirs.open_confined(str(allowed / "fifo.json"), import_dirs.listed())

"""The server's files stay the server's: a path is read only under the directories the operator lists, every
link followed first, and a refusal names the allowed directories and nothing of the file."""

from __future__ import annotations

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

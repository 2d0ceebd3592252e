"""A folder of one job's files (issue 48, smaller): a link or a special file in it is named in words (exit 2), never
followed nor skipped without a word; a subfolder or a hidden file is still left alone."""

from __future__ import annotations

import os
import shutil

from tests.conftest import ROOT
from tests.core.workload.test_hostile_files import bounded_cli

DUMPS = ROOT / "examples" / "flight_recorder" / "skipped_rank"


def _job(tmp_path):
    folder = tmp_path / "job"
    shutil.copytree(DUMPS, folder)
    return folder


def test_a_link_in_a_dump_folder_is_named(tmp_path):
    folder = _job(tmp_path)
    os.replace(folder / "rank3", tmp_path / "rank3")
    (folder / "rank3").symlink_to(tmp_path / "rank3")  # a link to a real dump: still not read through it
    out = bounded_cli("hang", str(folder))
    assert out.code == 2 and "Traceback" not in out.stderr
    assert "paths: rank3 in job is a link: the dump files of a folder are read where they lie" in out.stderr


def test_a_pipe_in_a_dump_folder_is_named_and_a_subfolder_or_hidden_file_left_alone(tmp_path):
    folder = _job(tmp_path)
    (folder / "notes").mkdir()
    (folder / ".DS_Store").write_bytes(b"\0")
    assert bounded_cli("hang", str(folder)).code in (0, 1)  # read: 0 no hang, 1 a hang found (this set has one)
    os.mkfifo(folder / "rank9")
    out = bounded_cli("hang", str(folder))
    assert out.code == 2 and "paths: rank9 in job is not a regular file (a pipe, socket or device)" in out.stderr

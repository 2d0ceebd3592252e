"""A site is one line of the user's code: its bytes are every block that line holds at the peak, whatever the
frames below it (C++ frames, torch's own), and the finding, the table and the CLI say the same of it.

The expected figures come from the test's own walk of each real file's events (``snapshots.load_any``, then a
plain loop), sharing no code with the lab."""

from __future__ import annotations

import os
import re
from collections import defaultdict
from pathlib import Path

import pytest

from core.units import bytes_text
from core.workload.findings import snapshot_findings
from core.workload.snapshot.analysis import analyse
from core.workload.snapshot.reader import read_snapshot
from tests.conftest import ROOT
from tests.core.workload import snapshots

FILES = snapshots.real_snapshot_files() + sorted(str(f) for f in (Path(ROOT) / "examples" / "snapshots").iterdir())


def _user_line(frames: list[dict]) -> str | None:
    """The innermost frame of the user's own Python code, as ``file.py:line name``."""
    for f in frames:
        path = str(f["filename"]).replace("\\", "/")
        if path.endswith(".py") and not any(p in path for p in ("/torch/", "/lib/python", "/site-packages/")):
            return f"{path.rsplit('/', 1)[-1]}:{f['line']} {f['name']}"
    return None


def lines_at_peak(data: dict, device: int) -> dict[str, tuple[int, int]]:
    """Bytes and blocks of the traced blocks alive at the peak, per line of user code."""
    peak_index = snapshots.plain_replay(data, device)["peak_index"]
    live: dict[int, tuple[int, list]] = {}
    for e in data["device_traces"][device][: peak_index + 1]:
        if e["action"] == "alloc":
            live[e["addr"]] = (e["size"], e.get("frames") or [])
        elif e["action"] == "free_completed":
            live.pop(e["addr"], None)
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for size, frames in live.values():
        if line := _user_line(frames):
            out[line][0] += size
            out[line][1] += 1
    return {k: (v[0], v[1]) for k, v in out.items()}


@pytest.mark.parametrize("path", FILES, ids=os.path.basename)
def test_the_largest_site_s_finding_is_the_table_s_and_the_file_s(path, capsys):
    from core import cli

    a = analyse(read_snapshot(path))
    meta = a.summary()
    expected = lines_at_peak(snapshots.load_any(path), a.device)
    if not expected:
        pytest.skip("no traced block with a user stack alive at the peak")
    table = {s["label"]: (s["bytes"], s["blocks"]) for s in meta["top_sites_at_peak"] if s["site"] >= 0}
    assert len(table) == len([s for s in meta["top_sites_at_peak"] if s["site"] >= 0])  # one row per line
    for label, figures in table.items():
        if label in expected:
            assert figures == expected[label], label
    finding = next(f for f in snapshot_findings(meta) if f.kind == "site")
    line, (nbytes, blocks) = max(expected.items(), key=lambda kv: kv[1][0])
    assert finding.value >= nbytes  # no line of user code holds more than the largest site
    if f"is {line}: " not in finding.text:  # larger still: a stack without a Python frame (autograd's thread)
        assert finding.value > nbytes and not any(f"is {k}: " in finding.text for k in expected)
        return
    assert finding.value == nbytes
    assert f"is {line}: {bytes_text(nbytes)} " in finding.text and f"in {blocks:,} block(s)" in finding.text
    assert cli.main(["snapshot", path, "--no-save"]) == 0
    out = capsys.readouterr().out
    row = re.search(rf"^\s+(\S+ \S+)\s+(\d+) block\(s\)  {re.escape(line)}  \[", out, re.M)
    assert row and (row.group(1), int(row.group(2))) == (bytes_text(nbytes), blocks)
    assert f"finding: the largest allocation site at the peak is {line}: {bytes_text(nbytes)} " in out


def test_the_example_s_optimizer_line_holds_its_three_blocks():
    """The train-step example: optimizer.py:78 holds three 147.2 MiB blocks at the peak, recorded under three
    stacks that differ only in their C++ frames — one site of 441.7 MiB, not three."""
    a = analyse(read_snapshot(Path(ROOT) / "examples" / "snapshots" / "cs336_train_step.pickle.gz"))
    meta = a.summary()
    site = next(s for s in meta["top_sites_at_peak"] if s["label"] == "optimizer.py:78 step")
    assert (site["blocks"], site["stacks"], bytes_text(site["bytes"])) == (3, 3, "441.7 MiB")
    assert [s["label"] for s in meta["top_sites_at_peak"]].count("optimizer.py:78 step") == 1
    finding = next(f for f in snapshot_findings(meta) if f.kind == "site")
    assert "optimizer.py:78 step: 441.7 MiB" in finding.text and "in 3 block(s)" in finding.text


def test_a_stored_list_with_one_line_in_several_rows_adds_up_in_the_finding():
    """A run stored before sites were grouped by line lists one line once per stack: the finding adds them."""
    row = {"site": 1, "label": "optimizer.py:78 step", "bytes": 100, "blocks": 1}
    meta = {
        "peak_allocated_bytes": 1000,
        "trace_events": 10,
        "top_sites_at_peak": [
            {"site": 0, "label": "model.py:1 forward", "bytes": 150, "blocks": 1},
            row,
            dict(row, site=2),
        ],
    }
    finding = next(f for f in snapshot_findings(meta) if f.kind == "site")
    assert finding.value == 200 and "optimizer.py:78 step" in finding.text and "in 2 block(s)" in finding.text


def test_the_cli_names_the_device_in_words_not_a_list(capsys):
    """`snapshot FILE` says "device 0:", not "device 0 of [0]:" (a Python list)."""
    from core import cli

    assert (
        cli.main(["snapshot", str(Path(ROOT) / "examples" / "snapshots" / "cs336_train_step.pickle.gz"), "--no-save"])
        == 0
    )
    out = capsys.readouterr().out
    assert re.search(r"^device 0: [\d,]+ events over", out, re.M) and "of [0]" not in out

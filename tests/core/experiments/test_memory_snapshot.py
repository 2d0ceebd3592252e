"""``memory-snapshot`` and ``python -m core snapshot``: the import is a stored run (compare, export, report);
a refused file exits 2 with the reason and leaves the store as it was."""

import copy
import json
import os
import pickle

import pytest

from core import cli
from core.errors import ConfigError
from core.experiment import Context, drive
from core.experiments.memory_snapshot import MemorySnapshotConfig, run
from tests.core.workload import snapshots


@pytest.fixture
def hand_file(tmp_path):
    path = tmp_path / "hand.pickle"
    path.write_bytes(pickle.dumps(snapshots.hand_snapshot()))
    return path


def test_run_keeps_a_summary_a_bounded_timeline_and_the_whole_trace_beside_the_store(hand_file, data_dir):
    from core.workload.snapshot import detail

    out, events = drive(run(MemorySnapshotConfig(path=str(hand_file)), Context("cpu", "CPU")))
    assert [e.done for e in events] == [0, 1, 2, 3]
    m = out.meta
    assert m["peak_allocated_bytes"] == 6632 and m["trace_events"] == 9 and m["file"] == "hand.pickle"
    assert len(out.rows) == 10 and out.rows[5]["allocated_bytes"] == 6632
    assert out.rows[5]["optimizer_state_bytes"] == 4096
    assert detail.exists(m["detail_id"])
    assert (data_dir / "snapshots" / m["detail_id"] / "size.npy").exists()
    again = detail.load(m["detail_id"])
    assert list(again.traces[0].size) == [e["size"] for e in snapshots.hand_snapshot()["device_traces"][0]]


def test_the_timeline_of_a_long_trace_is_thinned_without_losing_the_peak(tmp_path):
    path = tmp_path / "big.pickle"
    snap = snapshots.big_snapshot(1500)
    path.write_bytes(pickle.dumps(snap))
    out, _ = drive(run(MemorySnapshotConfig(path=str(path)), Context("cpu", "CPU")))
    assert len(out.rows) <= 2001
    assert max(r["allocated_bytes"] for r in out.rows) == snapshots.plain_replay(snap, 1)["peak"]


def test_config_refuses_what_is_not_a_file(tmp_path):
    for bad in ("", str(tmp_path / "missing.pickle"), str(tmp_path), "a\x00b"):
        with pytest.raises(ConfigError, match="path"):
            MemorySnapshotConfig(path=bad)


def test_cli_json_has_the_issue_s_fields_and_the_run_is_stored(hand_file, store, capsys):
    assert cli.main(["snapshot", str(hand_file), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("peak_allocated_bytes", "peak_reserved_bytes", "peak_time_us", "peak_time_ms", "trace_events"):
        assert key in out
    assert (out["peak_allocated_bytes"], out["peak_reserved_bytes"], out["trace_events"]) == (6632, 12288, 9)
    assert out["peak_time_us"] == 1_000_040
    stored = store.get(out["run_id"])
    assert stored.experiment == "memory-snapshot" and stored.status == "ok"
    assert json.loads(store.export_json([stored.id]))["runs"][0]["meta"]["peak_allocated_bytes"] == 6632


def test_cli_text_report(hand_file, capsys):
    assert cli.main(["snapshot", str(hand_file), "--no-save"]) == 0
    text = capsys.readouterr().out
    assert "peak allocated 6.5 KiB at 0.04 ms — alloc of 4.0 KiB" in text  # 6632 and 4096 bytes
    assert "allocated before recording began: 1.2 KiB in 2 block(s)" in text  # 1256 bytes (1000 requested + 256)
    assert "_init_group" in text and "not stored (--no-save)" in text


def test_cli_text_report_escapes_what_the_file_says(tmp_path, capsys):
    """Frames come from the file: a terminal escape in one is printed as text (\\x1b), never sent raw."""
    snap = copy.deepcopy(snapshots.hand_snapshot())  # its frames are shared constants of the test module
    for e in snap["device_traces"][0]:
        for f in e.get("frames", []):
            f["name"] = "step\x1b[2J"
    path = tmp_path / "esc.pickle"
    path.write_bytes(pickle.dumps(snap))
    assert cli.main(["snapshot", str(path), "--no-save"]) == 0
    text = capsys.readouterr().out
    assert "\x1b" not in text and "step\\x1b[2J" in text


@pytest.mark.parametrize(
    "content, reason",
    [
        (pickle.dumps({"segments": [], "device_traces": [[os.system]]}), "names the class posix.system"),
        (pickle.dumps(snapshots.hand_snapshot())[:200], "truncated"),
        (json.dumps({"traceEvents": [{"ph": "X"}]}).encode(), "not a memory snapshot"),
        (b"", "empty"),
    ],
)
def test_bad_files_exit_2_and_leave_the_store_unchanged(tmp_path, store, capsys, content, reason):
    path = tmp_path / "bad.pickle"
    path.write_bytes(content)
    before = store.count()
    assert cli.main(["snapshot", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1].startswith("error: bad.pickle: ") and reason in err
    assert "Traceback" not in err
    assert store.count() == before


def test_a_missing_file_exits_2_before_any_worker(tmp_path, store, capsys):
    assert cli.main(["snapshot", str(tmp_path / "nope.pickle")]) == 2
    assert "is not a file on this machine" in capsys.readouterr().err
    assert store.count() == 0

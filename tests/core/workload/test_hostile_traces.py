"""Hostile profiler traces (issue 32): each is a small file written here and imported by the CLI in a process
tree bounded in CPU seconds and RSS (:func:`bounded_cli`); each is refused with exit 2, the file, the limit and
the figure named, nothing stored — or, where the file is legitimate, read with what was odd counted."""

from __future__ import annotations

import gzip
import json
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from core.limits import LIMITS
from tests.conftest import ROOT
from tests.core.workload.test_hostile_files import bounded_cli, refused

pytest.importorskip("msgspec")


def kernel(ts="TS", name="k", device=0, stream=7) -> dict:
    return {"ph": "X", "cat": "kernel", "name": name, "pid": device, "tid": stream, "ts": ts, "dur": 5,
            "args": {"device": device, "stream": stream}}  # fmt: skip


def with_ts(tmp_path: Path, number: str, name: str = "t.json") -> Path:
    """A one-kernel trace whose ``ts`` is the JSON number ``number``, written as it is."""
    path = tmp_path / name
    path.write_text(json.dumps({"traceEvents": [kernel()]}).replace('"TS"', number))
    return path


def gz_events(path: Path, events, head: str = '{"traceEvents": [', tail: str = "]}") -> Path:
    with gzip.open(path, "wt", compresslevel=6) as f:
        f.write(head + ",".join(json.dumps(e) for e in events) + tail)
    return path


# -- hole 3 and 8: numbers' range and digits, at decode -----------------------------------------------------


@pytest.mark.parametrize("number, figure", [("1e999999", "1.000e+999999"), ("1e5000", "1.000e+5000"),
                                            ("-1e99999999999", "1.000e+99999999999")])  # fmt: skip
def test_a_time_beyond_2_63_ns_is_refused(tmp_path, data_dir, number, figure):
    path = with_ts(tmp_path, number)
    assert path.stat().st_size < 200
    out = refused(path, data_dir, "trace_time_ns limit", kind="trace")
    assert f"t.json: an event's ts of {figure} µs is beyond the ±2^63 ns" in out.stderr


@pytest.mark.parametrize("number", ["1" + "0" * 50_000, "1." + "5" * 50_000], ids=["integer", "fraction"])
def test_a_number_of_50k_digits_is_refused(tmp_path, data_dir, number):
    out = refused(with_ts(tmp_path, number), data_dir, f"{LIMITS.number_digits:,} of the number_digits limit", "trace")
    assert "has 50,001 digits" in out.stderr or "has 50,000 digits" in out.stderr


def test_times_within_range_keep_their_digits(tmp_path):
    out = bounded_cli("trace", str(with_ts(tmp_path, "9223372036854775.807")), "--no-save", "--json")
    assert out.code == 0, out.stderr[-2000:]
    assert json.loads(out.stdout)["origin_us"] == 9223372036854775


# -- hole 3: cardinality of devices, streams and names, checked before anything is grouped -------------------


def test_more_devices_than_the_limit_are_refused(tmp_path, data_dir):
    path = gz_events(tmp_path / "devices.json.gz", (kernel(i, device=i) for i in range(LIMITS.trace_devices + 10)))
    refused(path, data_dir, f"more than {LIMITS.trace_devices:,} devices (the trace_devices limit)", "trace")


def test_a_device_list_longer_than_the_limit_is_refused(tmp_path, data_dir):
    events = json.dumps([kernel(1)])
    head = '{"deviceProperties": [' + ",".join(["{}"] * (LIMITS.trace_devices + 1)) + '], "traceEvents": '
    path = tmp_path / "props.json"
    path.write_text(head + events + "}")
    refused(path, data_dir, f"lists {LIMITS.trace_devices + 1:,} devices", "trace")


def test_more_streams_than_the_limit_are_refused(tmp_path, data_dir):
    path = gz_events(tmp_path / "streams.json.gz", (kernel(i, stream=i) for i in range(LIMITS.trace_streams + 10)))
    refused(path, data_dir, f"device 0 of the profiler trace has more than {LIMITS.trace_streams:,} streams", "trace")


def test_many_devices_and_streams_within_the_limits_are_grouped_in_one_pass(tmp_path):
    events = [kernel(i, device=i % 4000, stream=i) for i in range(60_000)]
    out = bounded_cli("trace", str(gz_events(tmp_path / "wide.json.gz", events)), "--no-save", "--json")
    assert out.code == 0, out.stderr[-2000:]
    meta = json.loads(out.stdout)
    assert len(meta["devices"]) == 4000 and len(meta["streams"]) == 15


def test_grouping_matches_a_pass_per_key():
    from core.workload.trace.timeline import _grouped

    keys = np.random.default_rng(3).integers(-5, 5, 1000)
    idx = np.arange(1000) * 3
    groups = _grouped(keys, idx)
    assert [k for k, _ in groups] == sorted(set(keys.tolist()))
    for k, part in groups:
        assert part.tolist() == idx[keys == k].tolist()


# -- hole 7: names cut once, at intake, and the cut counted ---------------------------------------------------


def test_long_kernel_names_are_cut_at_intake(tmp_path, monkeypatch):
    monkeypatch.setenv("GPULAB_LIMITS", "inflate_ratio=2000")  # 60 MiB of three names repeated: 1000× its gzip
    names = [c * (2 << 20) for c in "abc"]
    events = [kernel(i * 10, name=names[i % 3]) for i in range(30)]
    top = {"distributedInfo": {"backend": "n" * 5000}, "deviceProperties": [{"id": 0, "name": "g" * 5000}]}
    path = gz_events(tmp_path / "names.json.gz", events, head=json.dumps(top)[:-1] + ', "traceEvents": [')
    assert path.stat().st_size < 100_000
    out = bounded_cli("trace", str(path), "--no-save", "--json")
    assert out.code == 0, out.stderr[-2000:]
    assert len(out.stdout) < 100_000
    meta = json.loads(out.stdout)
    assert {k["name"] for k in meta["kernels"]} == {f"{c * LIMITS.name_chars}…(2,097,152 chars)" for c in "abc"}
    assert meta["device_name"] == "g" * LIMITS.name_chars + "…(5,000 chars)"
    assert meta["quirks"]["names longer than 1,024 characters (cut, their full length noted)"] == 32


# -- hole 4: inflation and event counts bounded before anything is built ------------------------------------


def test_millions_of_tiny_events_are_counted_a_batch_at_a_time(tmp_path, data_dir):
    """10 M elements in 20 MB: building them all at once (as undecoded spans) took 67 bytes each."""
    path = tmp_path / "tiny.json"
    path.write_bytes(b'{"traceEvents": [' + b"0," * 10_000_000 + b"0]}")
    out = refused(path, data_dir, "holds no trace event", "trace")
    assert out.peak_rss < 600 << 20


# -- hole 8: bytes that are not UTF-8, past the sample the header check reads ---------------------------------


def test_non_utf8_past_the_first_64_kb_is_refused_naming_the_offset(tmp_path, data_dir):
    head = b'{"traceEvents": [' + b",".join(json.dumps(kernel(i)).encode() for i in range(1000)) + b","
    assert len(head) > 65536
    path = tmp_path / "latin1.json"
    before = b'{"ph": "X", "cat": "kernel", "name": "caf'
    path.write_bytes(head + before + b'\xe9", "ts": 1, "dur": 1}]}')
    offset = len(head) + len(before)
    refused(path, data_dir, f"latin1.json: the profiler trace is not UTF-8 text: byte {offset:,}", "trace")


# -- hole 8: Ctrl-C while the command starts -----------------------------------------------------------------


@pytest.mark.parametrize("after", ["core.cli", "core.cli.output"])
def test_ctrl_c_while_the_command_starts_exits_130_with_one_line(tmp_path, after):
    """SIGINT once the module ``after`` is imported (``-X importtime`` says when), before any job runs. (Before
    the lab's first line runs, while Python imports ``site``, a Ctrl-C is Python's own to report.)"""
    path = with_ts(tmp_path, "1")
    proc = subprocess.Popen(
        [sys.executable, "-X", "importtime", "-m", "core", "trace", str(path), "--no-save"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stderr is not None
    for line in proc.stderr:
        if line.split("|")[-1].strip() == after:
            break
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    said = [line for line in err.splitlines() if not line.startswith("import time:")]
    assert "Traceback" not in err, err[-2000:]
    if "cancelling…" in said:  # a box so loaded that the job was already on: it cancels itself, as documented
        assert proc.returncode == 1, said
    else:
        assert (proc.returncode, said) == (130, ["interrupted"]), err[-2000:]

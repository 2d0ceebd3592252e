"""Reading an imported file in a thread of its own, with what the reader says of its progress passed on
(``core.workload.files.read_imported``), and what the two readers say."""

from __future__ import annotations

import gzip
import hashlib
import json
import pickle
import threading

import pytest

from core.errors import ConfigError, InputRefused
from core.experiment import Progress
from core.workload.files import read_imported
from core.workload.snapshot.reader import read_snapshot
from tests.conftest import ROOT
from tests.core.workload import snapshots


def test_what_the_reader_says_is_passed_on_while_it_reads(tmp_path):
    path = tmp_path / "f.bin"
    path.write_bytes(b"x" * 100)
    seen = threading.Event()

    def read(p, progress):
        progress("half of it")
        assert seen.wait(60), "the experiment never passed the reader's progress on"
        return p.read_bytes()

    steps = read_imported(path, read, 2)
    first = next(steps)
    assert first == Progress(0, 2, "reading f.bin (100 B)")
    second = next(steps)  # while the reader waits: what it said
    assert second.message == "reading f.bin (100 B): half of it" and second.done == 0
    seen.set()
    with pytest.raises(StopIteration) as ended:
        next(steps)
    digest = hashlib.sha256(b"x" * 100).hexdigest()
    assert ended.value.value == (b"x" * 100, {"file": "f.bin", "file_bytes": 100, "file_sha256": digest})


def test_a_refusal_in_the_reading_thread_is_the_run_s_bad_input(tmp_path):
    path = tmp_path / "f.bin"
    path.write_bytes(b"x")

    def read(p, progress):
        raise InputRefused("it is not a snapshot")

    with pytest.raises(ConfigError, match="f.bin: it is not a snapshot"):
        list(read_imported(path, read, 2))


def test_a_snapshot_says_how_many_events_it_has_read_as_it_streams(tmp_path, monkeypatch):
    from core import intake

    monkeypatch.setattr(intake, "STREAM_BUFFER_BYTES", 4096)  # drained every 4 KiB: many times over
    snap = snapshots.big_snapshot(2500)  # ~20,000 events
    path = tmp_path / "s.pickle"
    path.write_bytes(pickle.dumps(snap, protocol=4))
    said: list[str] = []
    read = read_snapshot(path, said.append)
    counts = [int(text.split()[0].replace(",", "")) for text in said]
    assert len(said) >= 10 and all(text.endswith(" events read") for text in said)
    assert counts == sorted(set(counts)) and counts[-1] <= len(snap["device_traces"][1]) == len(read.traces[1])


def test_a_trace_says_how_many_of_its_events_are_decoded(tmp_path):
    pytest.importorskip("msgspec")  # the trace reader decodes with it
    from core.workload.trace.timeline import read_trace

    source = ROOT / "tests" / "data" / "workload" / "hta_recsys_sampled_rank0.json.gz"
    events = len(json.loads(gzip.decompress(source.read_bytes()))["traceEvents"])
    said: list[str] = []
    read_trace(source, said.append)
    assert said[-1] == f"{events:,} of {events:,} events decoded"

"""The pickle guard in a process of its own (``core.pickle_stream``): a file past ``GUARD_PROCESS_BYTES`` is
checked on another core, ahead of the unpickler. It must refuse what the guard in the reading process refuses,
with the same words, pass what it passes, hold the unpickler back until it has passed a byte, and end with the
read."""

from __future__ import annotations

import gc
import gzip
import pickle
import re

import psutil
import pytest

from core import pickle_guard, pickle_stream
from core.errors import InputRefused
from core.intake import open_input
from core.pickle_stream import load_pickle_stream
from tests.core.workload import snapshots
from tests.core.workload.test_hostile_files import refused

HOSTILE = {
    "memo index 2^28": b"\x80\x04N" + b"r" + (1 << 28).to_bytes(4, "little") + b".",
    "declared 1 TiB": b"\x80\x05\x8d" + (1 << 40).to_bytes(8, "little") + b".",
    "a class": pickle.dumps({"x": print}),
    "truncated": pickle.dumps(list(range(5000)))[:-40],
    "bytes after its end": pickle.dumps(list(range(5000))) + b"\x80\x04N.",
}


def load(path, *, apart: bool, monkeypatch):
    monkeypatch.setattr(pickle_stream, "GUARD_PROCESS_BYTES", 0 if apart else 1 << 40)
    with open_input(path) as stream:
        return load_pickle_stream(stream, 1 << 30, what="snapshot", path=path)


def children() -> set[int]:
    """This process's children, zombies included (a child never waited for is still one)."""
    return {child.pid for child in psutil.Process().children(recursive=True)}


def outcome(path, **kwargs):
    try:
        return ("read", load(path, **kwargs))
    except InputRefused as exc:
        return ("refused", str(exc))


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_the_guard_process_refuses_what_the_inline_guard_refuses_and_ends(tmp_path, monkeypatch, name):
    path = tmp_path / "hostile.pickle"
    path.write_bytes(HOSTILE[name])
    inline = outcome(path, apart=False, monkeypatch=monkeypatch)
    before = children()
    apart = outcome(path, apart=True, monkeypatch=monkeypatch)
    assert inline[0] == "refused", inline
    assert apart == inline
    assert children() <= before  # the checking process ended with the read, and was waited for


def test_every_protocol_and_gzip_read_the_same_through_the_guard_process(tmp_path, monkeypatch):
    value = snapshots.big_snapshot(150)
    events = len(value["device_traces"][1])
    before = children()
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        raw = pickle.dumps(value, protocol=protocol)
        for name, data in ((f"p{protocol}.pickle", raw), (f"p{protocol}.pickle.gz", gzip.compress(raw))):
            path = tmp_path / name
            path.write_bytes(data)
            top = load(path, apart=True, monkeypatch=monkeypatch)
            assert top == value, name
            assert len(top["device_traces"][1]) == events > 1000  # several batches of appends
    assert children() <= before


def test_the_unpickler_waits_for_the_guard_process(tmp_path, data_dir):
    """33 MiB of good bytes, then a memo index of 2^28 (the unpickler would size its memo at 4 GiB): past the
    size where the check runs apart, and refused with its words, inside the 1 GiB the hostile-file checks allow."""
    payload = b"x" * (33 << 20)
    path = tmp_path / "late.pickle"
    path.write_bytes(
        b"\x80\x04\x8e" + len(payload).to_bytes(8, "little") + payload + b"r" + (1 << 28).to_bytes(4, "little") + b"."
    )
    assert path.stat().st_size > pickle_stream.GUARD_PROCESS_BYTES
    refused(path, data_dir, "it stores memo slot 268,435,456 at offset 34,603,019")


def test_runs_of_filled_containers_are_checked_in_one_match_and_still_counted(tmp_path, monkeypatch):
    """A run of filled containers is matched at once: what it reads is what the opcode-by-opcode check reads
    (the match turned off), and values left between the containers still count towards the limit."""
    never = re.compile(b"(?!)")
    value = snapshots.big_snapshot(150)
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        path = tmp_path / f"p{protocol}.pickle"
        path.write_bytes(pickle.dumps(value, protocol=protocol))
        assert load(path, apart=False, monkeypatch=monkeypatch) == value
    for name, data in HOSTILE.items():
        path = tmp_path / "hostile.pickle"
        path.write_bytes(data)
        grouped = outcome(path, apart=False, monkeypatch=monkeypatch)
        with monkeypatch.context() as m:
            m.setattr(pickle_guard, "_group_run", lambda: never)
            assert outcome(path, apart=False, monkeypatch=monkeypatch) == grouped, name
    # an empty list filled by nothing, then four DUPs: 2,000,004 values left by 500,001 such groups
    path = tmp_path / "dups.pickle"
    path.write_bytes(b"\x80\x04]" + b"(e2222" * 500_001 + b".")
    with pytest.raises(InputRefused, match=r"more than 2,000,000 values"):
        load(path, apart=False, monkeypatch=monkeypatch)


def test_what_the_unpickler_read_is_freed_when_it_returns_not_at_the_next_collection(tmp_path):
    path = tmp_path / "events.pickle"
    events = [{"n": i, "frames": []} for i in range(300_000)]  # a list inside: dicts the collector tracks
    path.write_bytes(pickle.dumps({"events": events}, protocol=4))  # 3 MB: drained at each MiB

    def drain(unpickler) -> None:  # what the snapshot reader does: empties the growing list
        for obj in unpickler.memo.copy().values():
            if type(obj) is list:
                del obj[:]

    def dicts() -> int:
        return sum(type(obj) is dict for obj in gc.get_objects())

    gc.collect()
    gc.disable()
    try:
        before = dicts()
        with open_input(path) as stream:
            top = load_pickle_stream(stream, 1 << 30, what="snapshot", on_chunk=drain)
        assert len(top["events"]) < 300_000  # drained while it was read
        assert dicts() - before - len(top["events"]) < 1_000  # the drained event dicts the memo held are gone
    finally:
        gc.enable()


def test_a_gzip_is_sized_by_what_it_expands_to(tmp_path):
    """The guard runs apart for a file that reads large: a gzip by the size its trailer states."""
    raw = pickle.dumps(b"x" * 100_000)
    plain, packed = tmp_path / "p.pickle", tmp_path / "p.pickle.gz"
    plain.write_bytes(raw)
    packed.write_bytes(gzip.compress(raw))
    assert pickle_stream.content_bytes(plain) == len(raw)
    assert packed.stat().st_size < 1_000 and pickle_stream.content_bytes(packed) == len(raw)


@pytest.mark.parametrize("kind", ["snapshot", "hang"])
def test_bytes_after_a_pickles_end_are_refused_in_words(tmp_path, data_dir, kind):
    """Nothing reads them and no check sees them (issue 48): a snapshot and a dump, the second pickle inside the
    gzip member, refused at the byte where pickle.dumps's output ends."""
    first = pickle.dumps(snapshots.big_snapshot(10) if kind == "snapshot" else {"version": "2.10", "entries": []})
    folder = tmp_path / "job"
    folder.mkdir()
    path = folder / "rank0.gz"
    path.write_bytes(gzip.compress(first + pickle.dumps({"x": 1})))
    refused(folder if kind == "hang" else path, data_dir, f"goes on after its pickle ends at byte {len(first):,}", kind)

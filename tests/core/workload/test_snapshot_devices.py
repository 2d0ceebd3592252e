"""A snapshot of two devices opens on the one that held the memory.

No public snapshot of two devices was found, so one is built here from a real single-GPU one (Stanford CS336's
``cs336_mem_snapshot.pickle.gz``, tests/data/workload/README.md): its segments and trace moved to device 1, as
``_dump_snapshot`` writes a process that trained on ``cuda:1``, and device 0 given what a process that touched
``cuda:0`` with history switched on there records — 200 small allocations, each freed, and a 2 MiB segment
reserved and released (every event of torch's own format). Device 0 has more events; device 1 holds 3.5 GiB at
the dump (its segments, summed here) and its replay peaks where the real file's does."""

from __future__ import annotations

import copy
import gzip
import pickle

from core.intake import loads_pickle
from core.workload.snapshot.analysis import analyse
from core.workload.snapshot.reader import read_snapshot
from tests.core.workload import snapshots
from tests.core.workload.traces import DATA

REAL = DATA / "snapshots" / "cs336_mem_snapshot.pickle.gz"
SEGMENT = 2 * 2**20


def two_devices(tmp_path):
    real = loads_pickle(gzip.decompress(REAL.read_bytes()))  # the lab's plain-data reader: no code runs
    moved = copy.deepcopy(real)
    for s in moved["segments"]:
        s["device"] = 1
    touched, t = [], real["device_traces"][0][0]["time_us"] - 10_000
    base = 0x7F0000000000

    def event(action, addr, size):
        nonlocal t
        t += 1
        return {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": t, "frames": []}

    touched.append(event("segment_alloc", base, SEGMENT))
    for i in range(100):
        touched += [event("alloc", base + 512 * i, 512), event("free_requested", base + 512 * i, 512),
                    event("free_completed", base + 512 * i, 512)]  # fmt: skip
    touched.append(event("segment_free", base, SEGMENT))
    moved["device_traces"] = [touched, real["device_traces"][0]]
    path = tmp_path / "two_devices.pickle"
    path.write_bytes(pickle.dumps(moved))
    return path, real


def test_a_two_device_snapshot_opens_on_the_device_that_held_the_memory(tmp_path):
    path, real = two_devices(tmp_path)
    snap = read_snapshot(path)
    assert {d: len(t) for d, t in snap.traces.items()} == {0: 302, 1: 97}  # device 0 has the most events
    held = sum(s["total_size"] for s in real["segments"])
    assert held == 3_781_165_056
    a = analyse(snap)
    assert a.device == 1
    expected = snapshots.plain_replay(loads_pickle(path.read_bytes()), 1)  # the test's own replay
    assert int(a.allocated.max()) == expected["peak"] == 3_249_143_816
    assert analyse(snap, 0).allocated.max() <= 512  # what the lab opened before: nothing held
    assert any("device 0" in note for note in a.notes)  # the other device is said, with how to read it

"""A torch 2.0 snapshot: ``_record_memory_history(True)`` kept one trace entry by default
(``trace_alloc_max_entries=1``) while every block kept its allocation's stack in ``history``.

No public torch 2.0 snapshot was found, so one is built here from a real one (Stanford CS336's
``cs336_mem_snapshot.pickle.gz``, tests/data/workload/README.md) in the format torch 2.0 wrote and its memory_viz
reads (``_block_extra_legacy``): each block's ``address``, ``requested_size`` and ``frames`` become one
``history`` entry (``addr``, ``real_size``, ``frames``), and the trace keeps its last entry, without ``time_us``."""

from __future__ import annotations

import copy
import gzip
import pickle

from core.experiment import config_from_dict, drive
from core.experiments.memory_snapshot import MemorySnapshotConfig, run
from core.intake import loads_pickle
from tests.core.workload.traces import DATA

REAL = DATA / "snapshots" / "cs336_mem_snapshot.pickle.gz"


def legacy(tmp_path):
    real = loads_pickle(gzip.decompress(REAL.read_bytes()))  # the lab's plain-data reader: no code runs
    old = copy.deepcopy(real)
    for seg in old["segments"]:
        for b in seg["blocks"]:
            history = {"addr": b.pop("address"), "real_size": b.pop("requested_size"), "frames": b.pop("frames", [])}
            if b["state"].startswith("active"):
                b["history"] = [history]
    last = {k: v for k, v in real["device_traces"][0][-1].items() if k != "time_us"}
    old["device_traces"] = [[last]]
    path = tmp_path / "torch20.pickle"
    path.write_bytes(pickle.dumps(old))
    return path, real


def test_a_torch_2_0_snapshot_is_the_state_at_its_dump_with_a_longer_trace_to_try(tmp_path):
    """The active blocks' requested sizes with a stack, summed here: every byte the file holds is named by a site,
    so "allocated before recording: no stack names it; record earlier" was wrong, and the one trace entry makes no
    peak: the finding says the trace buffer kept one entry and what to raise."""
    path, real = legacy(tmp_path)
    named = sum(
        b["requested_size"]
        for s in real["segments"]
        for b in s["blocks"]
        if b["state"].startswith("active") and b.get("frames")
    )
    out, _ = drive(run(config_from_dict(MemorySnapshotConfig, {"path": str(path)}), None))  # type: ignore[arg-type]
    m = out.meta
    assert m["legacy_blocks"] > 0 and m["trace_events"] == 1
    assert m["baseline_with_stack_bytes"] == named > 0
    kinds = [f["kind"] for f in m["findings"]]
    assert "short_trace" in kinds and "before_recording" not in kinds
    (short,) = [f for f in m["findings"] if f["kind"] == "short_trace"]
    assert "trace_alloc_max_entries" in short["text"] and "not a peak" in short["text"]
    assert not any("at the peak" in f["text"] for f in m["findings"])

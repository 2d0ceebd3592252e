"""Uploads as one batch (issue 48, item 13): the eight ranks of one job uploaded together are all imported (the
uploads kept were bounded at five files, so the first three were deleted before the import read them); a batch
still waiting for its import is never pruned, a new one is refused in words instead; no message names the
server's folders."""

from __future__ import annotations

import json

import pytest

from tests.pages.test_workload import ChunkedUpload, page, wait_for_metric

pytest.importorskip("msgspec")

WORLD = 8


def rank_trace(rank: int) -> dict:
    """One rank of an eight-rank job: a GEMM, then an all-reduce every rank enters 10 µs apart (rank 7 last)."""

    def kernel(name, ts, dur, **args):
        return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur,
                "args": {"device": 0, "stream": 7, **args}}  # fmt: skip

    reduce = {"Collective name": "allreduce", "In msg nelems": 1024, "Out msg nelems": 1024, "dtype": "Float",
              "Group size": WORLD, "Process Group Name": "0"}  # fmt: skip
    start = 1000 + 10 * rank
    return {
        "distributedInfo": {"rank": rank, "world_size": WORLD, "backend": "nccl"},
        "traceEvents": [
            kernel("sm90_xmma_gemm_bf16", 500, 100),
            kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", start, 1000 + 10 * WORLD - start, **reduce),
        ],
    }


def test_eight_ranks_uploaded_together_are_one_job_of_eight(data_dir, store):
    at = page("pages/step_bench.py")
    uploader = next(u for u in at.get("file_uploader") if u.label == "Profiler trace")
    uploader.set_value(
        [(f"rank-{r}.json", json.dumps(rank_trace(r)).encode(), "application/json") for r in range(WORLD)]
    )
    at.run()
    at.button(key="step_bench.trace.import").click().run()
    wait_for_metric(at, "Straggler")
    assert not at.exception and {m.label: m.value for m in at.metric}["Ranks"] == str(WORLD)
    (run,) = store.list(experiment="profiler-trace-ranks")
    assert sorted(run.meta["ranks"]) == list(range(WORLD))
    uploads = data_dir / "uploads"
    assert not uploads.exists() or not any(uploads.iterdir())  # the batch is deleted once imported


def test_a_batch_waiting_for_its_import_is_never_pruned_a_new_one_is_refused_in_words(data_dir, monkeypatch):
    from pages.common import uploads

    monkeypatch.setattr(uploads, "_waiting", set())
    monkeypatch.setattr(uploads, "UPLOADS_KEPT", 2)
    waiting = [uploads.save_batch([ChunkedUpload(f"r{i}.json", b"{}") for i in range(3)]) for _ in range(2)]
    with pytest.raises(uploads.UploadsBusy) as refused:
        uploads.save_batch([ChunkedUpload("late.json", b"{}")])
    assert "2 earlier imports of uploads are still waiting to be read" in str(refused.value)
    assert str(data_dir) not in str(refused.value)
    assert all(p.read_bytes() == b"{}" for batch in waiting for p in batch)  # nothing a queued import needs went
    assert len(list((data_dir / "uploads").iterdir())) == 2  # and the refused batch left nothing behind
    uploads.delete_when_done(*waiting[0])(None, {"type": "done"})  # one import ended: room again
    assert uploads.save_batch([ChunkedUpload("late.json", b"{}")])[0].read_bytes() == b"{}"

"""device="all": one child job per GPU, merged into ONE stored run with the node comparison.

There is no GPU here, so the merge is driven two ways: children injected as plain jobs that a test
thread completes with hand-written results (4 and 8 "GPUs", one slow and throttled), and the real
path — real workers, the device lock, the store — fanned out over the CPU as a one-device "box".
"""

import statistics
import threading
import time

import pytest

from core import registry
from core.errors import ConfigError
from core.experiment import SLOW_FRACTION
from core.fanout import Part, compare, merge, submit_all
from core.lifecycle import Job
from core.result import RunResult, now_iso
from core.rows.matmul import MatmulPoint, ranked


def gpu(i: int, name: str = "Fake GPU") -> dict:
    return {
        "kind": "cuda",
        "index": i,
        "torch_device": f"cuda:{i}",
        "name": name,
        "label": f"cuda:{i} — {name}",
        "compute_capability": "9.0",
        "spec": {"tflops": {"bf16": 989.0}},
    }


def matmul_rows(tflops_by_size: dict[int, float], clock: float, temp: float, reasons=()) -> list[dict]:
    """One GPU's rows as its matmul run stores them (the derived values its engine adds included)."""
    rows = [
        {
            "dtype": "bf16",
            "m": m,
            "n": m,
            "k": m,
            "label": "square",
            "status": "ok",
            "tflops": t,
            "sm_clock_mhz": clock,
            "sm_clock_min_mhz": clock - 30,
            "temp_c": temp,
            "power_w": 600.0,
            "throttle_reasons": list(reasons),
            "throttled": bool(reasons),
        }
        for m, t in tflops_by_size.items()
    ]
    checks = {"above_peak": False, "measurement_error": None, "published_tflops": None, "pct_of_published": None}
    points = ranked([MatmulPoint.from_row(r) for r in rows])
    return [r | checks | {"pct_of_best": p.pct_of_best, "is_best": p.is_best} for r, p in zip(rows, points)]


class Children:
    """A stand-in for JobManager.submit: plain jobs the test completes itself."""

    def __init__(self) -> None:
        self.jobs: dict[str, Job] = {}

    def __call__(self, experiment, cfg, device, *, timeout_s=None, save=True, on_event=None) -> Job:
        assert save is False, "a child of an all-GPU run must not be stored on its own"
        job = Job(
            exp=registry.get(experiment),
            config=cfg,
            device=device,
            timeout_s=60.0,
            save=save,
            on_event=on_event,
        )
        self.jobs[device] = job
        return job

    def finish(self, device: str, rows: list[dict], status: str = "ok", error: str | None = None) -> None:
        job = self.jobs[device]
        job.state = "running"
        job.rows.extend(rows)
        job.done_steps, job.total_steps = len(rows), len(rows)
        if job.on_event:
            job.on_event(job, {"type": "progress", "message": "half way", "rows": rows})
        index = int(device.split(":")[1])
        job.complete(
            RunResult(
                experiment=job.experiment,
                config={},
                device=gpu(index),
                versions={"torch": "x"},
                started_at=now_iso(),
                finished_at=now_iso(),
                status=status,
                error=error,
                rows=rows,
                meta={"clocks_note": None},
            )
        )


def test_compare_by_hand():
    # 4 GPUs, two points; cuda:2 is 10% slow at both, the rest within 1%.
    values = {0: (100.0, 200.0), 1: (101.0, 198.0), 2: (90.0, 180.0), 3: (99.0, 202.0)}
    rows = []
    for i, (a, b) in values.items():
        for r in matmul_rows(
            {1024: a, 2048: b},
            clock=1980 - 300 * (i == 2),
            temp=60 + 25 * (i == 2),
            reasons=("sw_thermal_slowdown",) if i == 2 else (),
        ):
            rows.append({"device": f"cuda:{i}", "gpu_index": i, "gpu_name": "Fake GPU", **r})
    metric = registry.get("matmul").device_metric
    node = compare(metric, rows, {f"cuda:{i}": {} for i in values})
    median_1024 = (99.0 + 100.0) / 2  # median of 100, 101, 90, 99
    median_2048 = (198.0 + 200.0) / 2  # median of 200, 198, 180, 202
    first = rows[0]
    assert first["node_median"] == pytest.approx(median_1024)
    assert first["vs_node_median"] == pytest.approx(100.0 / median_1024)
    per = {d["device"]: d for d in node["per_device"]}
    slow = per["cuda:2"]
    assert slow["relative"] == pytest.approx(statistics.median([90.0 / median_1024, 180.0 / median_2048]))
    assert slow["relative"] < 1 - SLOW_FRACTION and slow["flagged"]
    assert node["flagged"] == ["cuda:2"]
    assert slow["sm_clock_mhz"] == 1680 and slow["sm_clock_min_mhz"] == 1650 and slow["temp_c"] == 85
    assert slow["throttle_reasons"] == ["sw_thermal_slowdown"] and slow["throttled"]
    assert not per["cuda:0"]["flagged"] and per["cuda:0"]["throttle_reasons"] == []
    assert per["cuda:3"]["relative"] == pytest.approx(statistics.median([99.0 / median_1024, 202.0 / median_2048]))


def test_a_gpu_exactly_at_the_threshold_is_not_flagged():
    rows = [
        {"device": f"cuda:{i}", "dtype": "fp32", "m": 1, "n": 1, "k": 1, "label": "", "tflops": t}
        for i, t in enumerate((100.0, 100.0, 95.0))
    ]
    node = compare(registry.get("matmul").device_metric, rows, {f"cuda:{i}": {} for i in range(3)})
    assert node["flagged"] == []  # 95 / 100 is exactly 5% below: "more than 5%" is not met
    assert node["per_device"][2]["clocks_note"]  # no NVML samples: said, not invented


@pytest.mark.parametrize("count", [4, 8])
def test_one_merged_run_from_every_gpu(manager, store, count):
    children = Children()
    seen = []
    parent = submit_all(
        manager,
        registry.get("matmul"),
        registry.get("matmul").make_config({"dtypes": ["bf16"]}),
        gpus=tuple(gpu(i) for i in range(count)),
        submit_child=children,
        on_event=lambda job, event: seen.append(event),
    )
    assert manager.get(parent.id) is parent and parent.state == "queued"

    def finish_all():
        for i in range(count):
            slow = i == count - 1
            children.finish(
                f"cuda:{i}",
                matmul_rows(
                    {1024: 500.0 - 100 * slow}, 1980 - 500 * slow, 60 + 30 * slow, ("hw_slowdown",) if slow else ()
                ),
            )
            time.sleep(0.05)

    threading.Thread(target=finish_all).start()
    run = parent.wait(30)
    assert run is not None and run.status == "ok"
    assert [r["device"] for r in run.rows] == [f"cuda:{i}" for i in range(count)]
    assert [r["gpu_index"] for r in run.rows] == list(range(count))
    assert run.device["torch_device"] == "all" and run.device["name"] == f"{count} × Fake GPU"
    assert run.device["spec"] == gpu(0)["spec"]  # shared by every GPU, so kept for the box
    assert len(run.device["devices"]) == count
    assert run.meta["node"]["flagged"] == [f"cuda:{count - 1}"]
    slow = run.meta["node"]["per_device"][-1]
    assert slow["relative"] == pytest.approx(400.0 / 500.0)  # the node median of 7 (or 3) × 500 and one 400
    assert slow["throttle_reasons"] == ["hw_slowdown"] and slow["temp_c"] == 90
    assert set(run.meta["devices"]) == {f"cuda:{i}" for i in range(count)}
    stored = store.list()
    assert [r.id for r in stored] == [parent.id]  # ONE run, the children were never stored
    assert store.get(parent.id).rows == run.rows
    assert any(e.get("message", "").startswith("cuda:") for e in seen if e.get("type") == "progress")
    assert seen[-1] == {"type": "done", "status": "ok"}


def test_a_failed_gpu_makes_the_run_an_error_naming_it(manager, store):
    children = Children()
    parent = submit_all(
        manager,
        registry.get("matmul"),
        registry.get("matmul").make_config({}),
        gpus=(gpu(0), gpu(1)),
        submit_child=children,
    )
    children.finish("cuda:0", matmul_rows({512: 100.0}, 1900, 50))
    children.finish(
        "cuda:1",
        matmul_rows({512: 99.0}, 1900, 50)[:0],
        status="error",
        error="out of memory on Fake GPU: tried to allocate 2 GiB",
    )
    run = parent.wait(30)
    assert run.status == "error" and run.error == "cuda:1: out of memory on Fake GPU: tried to allocate 2 GiB"
    assert [r["device"] for r in run.rows] == ["cuda:0"]  # what the healthy GPU measured is kept
    assert [c["status"] for c in run.meta["children"]] == ["ok", "error"]
    assert store.get(parent.id).status == "error"


def test_cancel_reaches_every_child(manager):
    children = Children()
    parent = submit_all(
        manager,
        registry.get("matmul"),
        registry.get("matmul").make_config({}),
        gpus=(gpu(0), gpu(1)),
        submit_child=children,
    )
    parent.cancel()
    deadline = time.monotonic() + 10
    while not all(j.cancelled for j in children.jobs.values()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(j.cancelled for j in children.jobs.values())
    for device in children.jobs:
        children.finish(device, [], status="cancelled", error="cancelled by user")
    assert parent.wait(30).status == "cancelled"


def test_only_experiments_that_compare_devices_fan_out(manager):
    with pytest.raises(ConfigError, match="every GPU at once is for matmul, matmul-soak, step-bench"):
        manager.submit("probe", {}, "all")


def test_all_on_a_box_without_gpus_is_refused_with_the_reason(manager):
    from core.fanout import box_gpus

    box_gpus.cache_clear()
    try:
        import torch

        if torch.cuda.is_available():
            pytest.skip("this box has a GPU")
        with pytest.raises(ConfigError, match="every CUDA GPU of this box, and it has none: this PyTorch"):
            manager.submit("matmul", {"dtypes": ["fp32"], "sizes": [64]}, "all")
    finally:
        box_gpus.cache_clear()


def test_real_workers_fanned_out_over_a_one_device_box(manager, store):
    """The real path: a worker per device, the device lock, one stored merged run (the CPU stands in for a GPU)."""
    cpu = {"kind": "cpu", "index": None, "torch_device": "cpu", "name": "CPU", "label": "CPU"}
    cfg = registry.get("matmul").make_config(
        {
            "dtypes": ["fp32"],
            "sizes": [64, 128],
            "warmup_ms": 5,
            "rep_ms": 10,
            "min_reps": 3,
            "roofline": False,
            "accuracy": False,
        }
    )
    parent = submit_all(manager, registry.get("matmul"), cfg, gpus=(cpu,))
    run = parent.wait(180)
    assert run is not None and run.status == "ok", run and run.error
    assert [(r["device"], r["m"]) for r in run.rows] == [("cpu", 64), ("cpu", 128)]
    assert all(r["vs_node_median"] == pytest.approx(1.0) for r in run.rows)  # one device is its own median
    assert run.meta["concurrency"]["all_at_once"] is True
    assert [r.id for r in store.list()] == [parent.id]


@pytest.mark.gpu
def test_matmul_on_every_gpu_of_a_real_box(manager, store):
    import torch

    count = torch.cuda.device_count()
    if count < 2:
        pytest.skip(f"needs at least 2 CUDA GPUs; this box has {count}")
    from core.fanout import box_gpus

    box_gpus.cache_clear()
    job = manager.submit("matmul", {"dtypes": ["bf16"], "sizes": [2048, 4096], "gpu_warmup_s": 0.5}, "all")
    run = job.wait(900)
    assert run.status == "ok", run.error
    assert sorted({r["device"] for r in run.rows}) == [f"cuda:{i}" for i in range(count)]
    assert run.meta["concurrency"]["all_at_once"], run.meta["concurrency"]
    node = run.meta["node"]
    assert [d["device"] for d in node["per_device"]] == [f"cuda:{i}" for i in range(count)]
    assert all(d["relative"] > 0 and d["points"] == 2 for d in node["per_device"])
    assert all(r["vs_node_median"] > 0 for r in run.rows)
    assert [r.id for r in store.list()] == [run.id]


def test_a_gpu_still_running_is_merged_with_the_rows_it_reported_and_no_start_time():
    matmul = registry.get("matmul")
    parent = Job(exp=matmul, config={}, device="all", timeout_s=60.0)
    done = RunResult(
        experiment="matmul",
        config={},
        device=gpu(0),
        versions={"torch": "x"},
        started_at="2025-01-01T00:00:00.000+00:00",
        finished_at="2025-01-01T00:00:05.000+00:00",
        status="ok",
        rows=matmul_rows({512: 100.0}, 1900, 50),
    )
    child = Job(exp=matmul, config={}, device="cuda:1", timeout_s=60.0)
    child.rows = matmul_rows({512: 90.0}, 1900, 50)
    run = merge(matmul, parent, [Part(gpu(0), done), Part(gpu(1), Part.so_far(gpu(1), child))], running=True)
    assert run.status == "running" and run.finished_at is None and run.started_at == done.started_at
    assert [(r["device"], r["tflops"]) for r in run.rows] == [("cuda:0", 100.0), ("cuda:1", 90.0)]
    assert [(c["status"], c["started_at"]) for c in run.meta["children"]] == [
        ("ok", done.started_at),
        ("running", None),
    ]
    assert run.device["devices"][1] == gpu(1)  # no worker has described it yet: the box's description
    assert run.versions == {"torch": "x"} and run.meta["concurrency"]["all_at_once"] is None

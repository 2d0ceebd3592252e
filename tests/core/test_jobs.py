"""The job's stored run: rows of a run that ended early are stored as reported, and read back with what the
experiment derives at its end."""

import dataclasses

from core import registry
from core.experiment import Context, Experiment, Output, Progress
from core.jobs import _run_of
from core.lifecycle import Job
from core.protocol import ResultEvent


def _job() -> Job:
    job = Job(registry.get("matmul"), {}, "cpu", 60.0)
    job.rows = [
        {"dtype": "bf16", "status": "ok", "tflops": 10.0},
        {"dtype": "bf16", "status": "ok", "tflops": 40.0},
        {"dtype": "fp32", "status": "ok", "tflops": 5.0},
        {"dtype": "fp32", "status": "unsupported", "tflops": None},
    ]
    return job


def test_a_cancelled_sweep_stores_its_pct_of_best(store):
    job = _job()
    stored = _run_of(job, None, ResultEvent.failed(job.id, "cancelled", "cancelled by user"), None)
    store.save(stored)
    run = store.get(stored.id)
    assert run.status == "cancelled" and run.error_kind == "cancelled"
    # 10/40 and 40/40 of bf16's best; fp32's one measured point is its own best; nothing for the unsupported
    assert [r["pct_of_best"] for r in run.rows] == [25.0, 100.0, 100.0, None]
    assert [r["is_best"] for r in run.rows] == [False, True, True, False]
    assert "pct_of_best" not in job.rows[0]  # the reported rows are not changed in place


def test_a_run_that_ended_early_keeps_the_rows_it_reported():
    job = _job()
    run = _run_of(job, None, ResultEvent.failed(job.id, "timeout", "timed out"), None)
    assert run.rows == job.rows and all("pct_of_best" not in r for r in run.rows)


def test_an_import_runs_in_the_worker_started_ahead_and_an_unused_one_is_stopped():
    """The command starts a worker before loading its own modules; the job must run in that one (not start a
    second), and a worker nobody took must not outlive the command."""
    from core import workerlaunch
    from core.jobs import JobManager
    from tests.conftest import ROOT

    workerlaunch.prestart(("core.workload.trace.timeline",))
    ahead = workerlaunch._prestarted[0].proc
    manager = JobManager(store=None)
    try:
        path = str(ROOT / "tests" / "data" / "workload" / "kineto_v100_trace.json")
        job = manager.submit("profiler-trace", {"path": path}, "cpu")
        while (run := job.wait(0.5)) is None:
            pass
    finally:
        manager.shutdown()
    assert run.status == "ok", run.error
    assert run.meta["worker"]["pid"] == ahead.pid and not workerlaunch._prestarted
    workerlaunch.prestart()
    unused = workerlaunch._prestarted[0].proc
    workerlaunch.stop_prestarted()  # what runs at exit
    assert unused.poll() is not None


def test_a_job_reads_its_flags_from_its_experiment():
    probe = registry.get("probe")
    assert Job(probe, {}, "cpu", 60.0).experiment == "probe"
    assert not Job(probe, {}, "cpu", 60.0).fresh_process
    assert Job(probe, {}, "cpu", 60.0, env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}).fresh_process
    assert Job(dataclasses.replace(probe, fresh_process=True), {}, "cpu", 60.0).fresh_process


@dataclasses.dataclass(frozen=True)
class CountedConfig:
    sizes: tuple[int, ...] = (1,)

    def __post_init__(self) -> None:
        CHECKED.append(self.sizes)


CHECKED: list[tuple[int, ...]] = []  # every CountedConfig judged, by its sizes


def _counted(cfg: CountedConfig, ctx: Context):
    yield Progress(1, 1, "ran")
    return Output(rows=[{"sizes": list(cfg.sizes), "a_tuple": isinstance(cfg.sizes, tuple)}])


def test_a_config_is_validated_once_where_it_is_submitted(manager, monkeypatch):
    """The job validates it; the worker (here the in-process one, in a thread) rebuilds it from the job's dict
    without judging it again."""
    counted = Experiment("counted", "counted", CountedConfig, _counted, in_process=True)
    get = registry.get
    monkeypatch.setattr(registry, "get", lambda name: counted if name == "counted" else get(name))
    CHECKED.clear()
    run = manager.submit("counted", {"sizes": [2, 3]}, "cpu").wait(60)
    assert run is not None and run.status == "ok", run and run.error
    assert run.rows == [{"sizes": [2, 3], "a_tuple": True}]  # the worker's config has the field's type
    assert CHECKED == [(2, 3)]  # judged once, by the job

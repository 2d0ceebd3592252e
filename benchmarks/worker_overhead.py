"""What running in a worker process costs, against running the same experiment in-process.

Times, for the `probe` experiment (one progress event, no work):
  submit → first progress event, last event → result stored in the database, and submit → stored
  result minus the in-process time of the same generator. Warm worker (the normal case) and fresh
  worker (includes starting Python and importing torch) are reported separately.
Target (issue 2): under 0.5 s extra with a warm worker.
And a torch worker's start to ready: forked from the fork server (core/forkserver.py) against a fresh
interpreter that imports torch (GPULAB_FORK_SERVER=0), alternating, each after the server is up.

    python benchmarks/worker_overhead.py [--repeats 20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core import registry  # noqa: E402
from core.experiment import Context, drive  # noqa: E402
from core.forkserver import FORK_SERVER_ENV  # noqa: E402
from core.jobs import JobManager  # noqa: E402
from core.store import RunStore  # noqa: E402
from core.workerprocess import STARTUP_TIMEOUT_S, WorkerProcess  # noqa: E402

CONFIG = {"mode": "ok", "steps": 1, "seconds": 0.0}


def in_process_s() -> float:
    exp = registry.get("probe")
    cfg = exp.make_config(CONFIG)
    t0 = time.perf_counter()
    drive(exp.run(cfg, Context("cpu", "cpu")))
    return time.perf_counter() - t0


def one_job(manager: JobManager) -> dict:
    marks: dict[str, float] = {}

    def on_event(job, event):
        kind = event.get("type")
        if kind == "progress" and "first" not in marks:
            marks["first"] = time.perf_counter()
        if kind == "progress":
            marks["last"] = time.perf_counter()
        if kind == "done":
            marks["stored"] = time.perf_counter()

    t0 = time.perf_counter()
    job = manager.submit("probe", CONFIG, "cpu", on_event=on_event)
    run = job.wait(300)
    assert run is not None and run.status == "ok", run.error if run else "no result within 300 s"
    return {
        "to_first_s": marks["first"] - t0,
        "last_to_stored_s": marks["stored"] - marks["last"],
        "total_s": marks["stored"] - t0,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["GPULAB_LOCK_DIR"] = tmp
        manager = JobManager(store=RunStore(Path(tmp) / "bench.sqlite"))
        try:
            fresh = one_job(manager)  # starts the worker: Python + torch import
            warm = [one_job(manager) for _ in range(args.repeats)]
        finally:
            manager.shutdown()
    forked, fresh_start = [], []
    worker_start_s(True)  # the fork server's own start (its torch import) is not a worker's
    for _ in range(max(3, args.repeats // 4)):
        forked.append(worker_start_s(True))
        fresh_start.append(worker_start_s(False))
    base = statistics.median(in_process_s() for _ in range(args.repeats))
    med = {k: statistics.median(w[k] for w in warm) for k in warm[0]}
    extra = med["total_s"] - base
    print(f"in-process run of the same experiment (median): {base * 1e3:8.2f} ms")
    print(f"warm worker, submit → first event (median):      {med['to_first_s'] * 1e3:8.2f} ms")
    print(f"warm worker, last event → stored (median):       {med['last_to_stored_s'] * 1e3:8.2f} ms")
    print(f"warm worker, submit → stored (median):           {med['total_s'] * 1e3:8.2f} ms")
    print(f"fresh worker, submit → stored (incl. torch import): {fresh['total_s'] * 1e3:8.1f} ms")
    print(
        f"extra over in-process, warm: {extra * 1e3:.1f} ms  (target < 500 ms: "
        f"{'met' if extra < 0.5 else 'NOT met'}); ratio worker/in-process total: "
        f"{med['total_s'] / base:.0f}x on a {base * 1e3:.2f} ms experiment"
    )
    f, g = statistics.median(forked), statistics.median(fresh_start)
    print(f"torch worker start → ready, forked (median of {len(forked)}):      {f * 1e3:8.1f} ms")
    print(f"torch worker start → ready, fresh interpreter (median): {g * 1e3:8.1f} ms  ({g / f:.0f}x the forked)")
    return 0


def worker_start_s(fork: bool) -> float:
    os.environ[FORK_SERVER_ENV] = "1" if fork else "0"
    t0 = time.perf_counter()
    worker = WorkerProcess(preload_torch=True)
    worker.wait_ready(STARTUP_TIMEOUT_S)
    took = time.perf_counter() - t0
    worker.stop()
    return took


if __name__ == "__main__":
    sys.exit(main())

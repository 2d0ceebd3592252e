"""``python -m core hang DIR`` against torch's own flight-recorder analyser on the same job's dumps, in one run.

Records a real gloo job per rank count on this machine (``tests/data/flight_recorder/record_job.py``: every rank
runs 1,999 all_reduces and waits in the 2,000th, which the last rank never enters; the recorder's default buffer
of 2,000 entries), once: the dumps are kept in ``--dumps`` and reused. torch's analyser
(``python -m torch.distributed.flight_recorder.fr_trace``) cannot read gloo's dumps as written (their
``pg_config`` lists no members: it stops with a KeyError), so it reads a copy with the default group's members
filled in; ``hang`` reads the dumps as written. Each is timed in a fresh process, in turn, ``--runs`` times
(the lab's run stored in a scratch data directory, as a user's would be); the medians and their ratio are
printed (the issue's target: ≤ 0.5), for the wall clock and for the CPU seconds of the command's process tree
(user + system of every process it waited for: ``hang``'s command and its worker; on a shared machine the wall
clock also counts the time other work held the cores, the CPU seconds do not).

``--generate N …`` then times ``hang`` alone on jobs of N ranks made from the recorded 32-rank job (a dump names
no rank, so every waiting rank's is the same bytes: the 31st rank's file repeated, the last rank's kept), to see
the time grow linearly with the ranks. Past 500 ranks the import's limits on files (``rank_files``, 512) and on
entries over all its files (``fr_entries``, 1,000,000) are raised for the run (``GPULAB_LIMITS``).

    python benchmarks/hang_vs_torch.py                     # 16 and 32 ranks, 3 runs each
    python benchmarks/hang_vs_torch.py --generate 64 256 1024
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.core.workload.fr_trace_input import with_members  # noqa: E402

RECORD = ROOT / "tests" / "data" / "flight_recorder" / "record_job.py"
COLLECTIVES = 2000
FR_TRACE = "torch.distributed.flight_recorder.fr_trace"


def recorded(dumps: Path, ranks: int) -> Path:
    """The job of ``ranks`` ranks, recorded unless ``dumps`` holds it already."""
    folder = dumps / f"skip_last_{ranks}x{COLLECTIVES}"
    if len(list(folder.glob("rank_*"))) != ranks:
        shutil.rmtree(folder, ignore_errors=True)
        print(f"recording {ranks} ranks × {COLLECTIVES:,} all_reduces (minutes on 2 cores) …", file=sys.stderr)
        subprocess.run(
            [sys.executable, str(RECORD), str(folder), "--ranks", str(ranks), "--collectives", str(COLLECTIVES)],
            check=True,
        )
    return folder


def for_torch(folder: Path, ranks: int) -> Path:
    """A copy whose pg_config lists the default group's members (what NCCL's dumps hold and gloo's lack)."""
    out = folder.with_name(folder.name + "_pg_config")
    if len(list(out.glob("rank_*"))) != ranks:
        with_members(folder, out, {"0": ("default_pg", list(range(ranks)))})
    return out


def generated(dumps: Path, template: Path, ranks: int) -> Path:
    """``ranks`` ranks from the recorded job: the waiting ranks' dump repeated, the skipping rank's last."""
    last = max(int(p.name.rsplit("_", 1)[1]) for p in template.glob("rank_*"))
    out = dumps / f"generated_{ranks}x{COLLECTIVES}"
    if len(list(out.glob("rank_*"))) != ranks:
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir()
        waiting, skipping = (template / f"rank_{last - 1}").read_bytes(), (template / f"rank_{last}").read_bytes()
        for rank in range(ranks):
            (out / f"rank_{rank}").write_bytes(skipping if rank == ranks - 1 else waiting)
    return out


def _cpu_of_children() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def timed(command: list[str], env: dict[str, str], expect: int) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the command and every process it waited for)."""
    start, cpu = time.perf_counter(), _cpu_of_children()
    done = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True)
    elapsed, cpu = time.perf_counter() - start, _cpu_of_children() - cpu
    if done.returncode != expect:
        raise SystemExit(f"{' '.join(command)}: exit {done.returncode}\n{done.stderr[-2000:]}")
    return elapsed, cpu


def lab_command(folder: Path) -> list[str]:
    return [sys.executable, "-m", "core", "hang", str(folder)]


def compare(dumps: Path, ranks: int, runs: int, env: dict[str, str]) -> None:
    folder = recorded(dumps, ranks)
    peer = for_torch(folder, ranks)
    lab, torch = [], []
    for _ in range(runs):  # interleaved: a load that comes and goes falls on both
        lab.append(timed(lab_command(folder), env, 0))
        torch.append(timed([sys.executable, "-m", FR_TRACE, str(peer)], env, 0))
    for i, what in enumerate(("wall", "CPU")):
        ours, theirs = [t[i] for t in lab], [t[i] for t in torch]
        a, b = statistics.median(ours), statistics.median(theirs)
        print(
            f"{ranks:>5} ranks  {what:<4}  hang {a:6.2f} s  fr_trace {b:6.2f} s  ratio {a / b:.2f}  "
            f"(runs: hang {', '.join(f'{t:.2f}' for t in ours)}; fr_trace {', '.join(f'{t:.2f}' for t in theirs)})"
        )


def scale(dumps: Path, sizes: list[int], runs: int, env: dict[str, str]) -> None:
    template = recorded(dumps, 32)
    for ranks in sizes:
        folder = generated(dumps, template, ranks)
        entries = ranks * COLLECTIVES
        run_env = {**env, "GPULAB_LIMITS": f"rank_files={ranks},fr_entries={entries}"} if ranks > 500 else env
        times = [timed(lab_command(folder), run_env, 0) for _ in range(runs)]
        wall, cpu = (statistics.median(t[i] for t in times) for i in (0, 1))
        print(
            f"{ranks:>5} ranks (generated)  hang {wall:7.2f} s wall, {wall / ranks * 1e3:6.1f} ms a rank; "
            f"{cpu:7.2f} s CPU, {cpu / ranks * 1e3:6.1f} ms a rank"
        )


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--ranks", type=int, nargs="*", default=[16, 32], help="recorded jobs to compare on")
    p.add_argument("--runs", type=int, default=3, help="timed runs of each, interleaved [default: 3]")
    p.add_argument("--generate", type=int, nargs="*", default=[], help="generated jobs of these many ranks")
    p.add_argument("--dumps", default=os.path.join(tempfile.gettempdir(), "gpulab-hang-bench"))
    args = p.parse_args()
    dumps = Path(args.dumps)
    dumps.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as data:
        env = {**os.environ, "GPULAB_DATA_DIR": data, "PYTHONPATH": str(ROOT)}
        env.pop("GPULAB_DB", None)
        for ranks in args.ranks:
            compare(dumps, ranks, args.runs, env)
        if args.generate:
            scale(dumps, args.generate, args.runs, env)


if __name__ == "__main__":
    main()

"""Reading the user's own files: the lab's CLI against the tools users would otherwise open, in one run.

For each memory snapshot, ``python -m core snapshot FILE --no-save`` against
``python -m torch.cuda._memory_viz trace_plot FILE -o out.html`` (torch's own viewer, which only re-packs
the pickle into a page); for each profiler trace, ``python -m core trace FILE --no-save`` against
HolisticTraceAnalysis's ``TraceAnalysis`` (temporal breakdown + kernel breakdown). The lab runs in both of its
forms, each a row: ``json`` (``--json``, what a script reads) and ``text`` (the report a user reads). Each command runs in
its own fresh process; wall time and the peak RSS of its whole process tree (sampled every 20 ms with
psutil) are taken, rounds interleaved so a drifting machine favours no one, and the medians compared.
The lab's bytecode is compiled first, as ``scripts/install.sh`` does (pip compiled the peers' own).

The files: the real ones in ``tests/data/workload`` and ``examples/traces`` (recorded on GPUs by others), plus
generated ones of real shape when asked (``--snapshot-mib 1024 --trace-mib 1024,5120``). Each trace row says
whether the lab took at most :data:`TIME_TARGET` of the peer's time and :data:`RSS_TARGET` of its peak RSS, and
the last line how many traces met both in both forms. HTA is a benchmark-only
dependency (it brings JupyterLab): give its interpreter with ``--hta-python`` (a virtual environment with
``pip install HolisticTraceAnalysis``), or its rows say "skipped: HTA not installed". ``--lab-python`` runs the lab
in another Python (a venv of the same Python with numpy, psutil and msgspec): the tools compared, not the start-up
of two interpreters set up differently (a system Python whose site runs ``.pth`` hooks starts several times slower
than a bare venv, and the lab starts two: the command and its worker). The first line gives each interpreter's bare
start, measured in the same run.

    python benchmarks/workload_vs_peers.py --rounds 3 --hta-python /path/to/venv/bin/python
    python benchmarks/workload_vs_peers.py --trace-mib 1024 --snapshot-mib 1024 --rounds 1
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "workload"
MIB = 2**20
TIME_TARGET, RSS_TARGET = 0.5, 0.6  # the lab's time and peak RSS against HTA's, on every real trace
HTA_SCRIPT = """
import sys, warnings
warnings.filterwarnings("ignore")
from hta.trace_analysis import TraceAnalysis
analysis = TraceAnalysis(trace_dir=sys.argv[1])
analysis.get_temporal_breakdown(visualize=False)
analysis.get_gpu_kernel_breakdown(visualize=False)
"""
KERNELS = (
    "void cutlass::Kernel<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8>(Params)",
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel",
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
    "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)",
    "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
    "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
    "at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)",
)


def write_trace(path: Path, mib: float, seed: int = 0) -> int:
    """A Kineto-shaped trace of about ``mib`` MiB: ProfilerStep spans, and per launch a CPU operator with
    shapes, its cudaLaunchKernel and the kernel with Kineto's args. Returns the number of kernels."""
    rng = random.Random(seed)
    target = int(mib * MIB)
    header = {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85029158912}],
        "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 8},
    }
    t, n, step = 1_700_000_000_000.0, 0, 0
    with open(path, "w") as f:
        f.write(json.dumps(header)[:-1] + ', "traceEvents": [\n')
        f.write(json.dumps({"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "python"}}))
        while f.tell() < target:
            if n % 2000 == 0:
                step += 1
                span = {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": 1, "tid": 1}
                f.write(",\n" + json.dumps(span | {"ts": t, "dur": 24000.0}))
            n += 1
            t += rng.uniform(2, 8)
            shapes = {"Input Dims": [[4096, 4096], [4096, 4096]], "Input type": ["c10::BFloat16"] * 2}
            cpu = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": round(t, 3), "dur": 5.1}
            launch = {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1}
            kernel_args = {"External id": n, "device": 0, "stream": 7, "correlation": n, "grid": [132, 1, 1]}
            kernel = {"ph": "X", "cat": "kernel", "name": rng.choice(KERNELS), "pid": 0, "tid": 7}
            f.write(",\n" + json.dumps(cpu | {"args": {"External id": n, **shapes}}))
            f.write(",\n" + json.dumps(launch | {"ts": round(t + 1, 3), "dur": 3.2, "args": {"correlation": n}}))
            kernel |= {"ts": round(t + 6, 3), "dur": round(rng.uniform(1, 9), 3), "args": kernel_args}
            f.write(",\n" + json.dumps(kernel))
        f.write('\n], "traceName": "generated"}\n')
    return n


def measure(cmd: list[str], cwd: Path) -> tuple[float, int, int]:
    """Wall seconds, peak RSS of the process tree (bytes) and the exit code of one command."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    root = psutil.Process(proc.pid)
    peak = 0
    while proc.poll() is None:
        try:
            tree = [root, *root.children(recursive=True)]
            peak = max(peak, sum(p.memory_info().rss for p in tree if p.is_running()))
        except psutil.Error:
            pass
        time.sleep(0.02)
    wall = time.perf_counter() - start
    if proc.returncode:
        said = proc.stderr.read().decode() if proc.stderr else ""
        sys.stderr.write(f"{' '.join(cmd[:4])}…: exit {proc.returncode}: {said[-500:]}\n")
    return wall, peak, proc.returncode


def plain_copy(path: Path, folder: Path) -> Path:
    """memory_viz opens the pickle with plain ``open``: give it the file un-gzipped (not timed)."""
    if path.suffix != ".gz":
        return path
    out = folder / path.stem
    with gzip.open(path) as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return out


def cases(args, work: Path) -> list[tuple[str, str, Path]]:
    found = [("snapshot", p.name, p) for p in sorted((DATA / "snapshots").glob("*.pickle*"))]
    found += [("trace", p.name, p) for p in sorted([*DATA.glob("*.json"), *DATA.glob("*.json.gz")])]
    found += [("trace", f"examples/{p.name}", p) for p in sorted((ROOT / "examples" / "traces").glob("*.json.gz"))]
    for mib in args.snapshot_mib:
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from snapshot_import import write_snapshot

        path = work / f"generated_{mib}mib.pickle"
        write_snapshot(path, mib)
        found.append(("snapshot", f"generated {mib} MiB", path))
    for mib in args.trace_mib:
        path = work / f"generated_{mib}mib.json"
        write_trace(path, mib)
        found.append(("trace", f"generated {mib} MiB", path))
    return found


def bare_start(python: str) -> float:
    """The median wall seconds of ``python -c pass`` over five runs: what the interpreter costs before any tool."""
    return statistics.median(measure([python, "-c", "pass"], ROOT)[0] for _ in range(5))


LAB_FORMS = ("json", "text")  # the lab's two outputs, each timed and judged


def commands(kind: str, path: Path, work: Path, lab_python: str, hta_python: str | None) -> dict[str, list[str] | None]:
    """The commands of one file: the lab's in each of its forms, and the peer's (None where it cannot run)."""
    lab = [lab_python, "-m", "core", kind, str(path), "--no-save"]
    forms: dict[str, list[str] | None] = {"json": [*lab, "--json"], "text": lab}
    if kind == "snapshot":
        peer = [sys.executable, "-m", "torch.cuda._memory_viz", "trace_plot", str(plain_copy(path, work))]
        return {**forms, "peer": peer + ["-o", str(work / "viz.html")]}
    if hta_python is None:
        return {**forms, "peer": None}
    folder = work / f"hta-{path.stem}"
    folder.mkdir(exist_ok=True)
    shutil.copy(path, folder / ("rank-0.json.gz" if path.suffix == ".gz" else "rank-0.json"))  # HTA goes by name
    return {**forms, "peer": [hta_python, "-c", HTA_SCRIPT, str(folder)]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--hta-python", help="a Python with HolisticTraceAnalysis installed")
    parser.add_argument("--lab-python", default=sys.executable, help="the Python the lab runs in (default: this one)")
    sizes = lambda text: [float(x) for x in text.split(",") if x]  # noqa: E731
    parser.add_argument("--snapshot-mib", type=sizes, default=[], help="generated snapshots, e.g. 1024")
    parser.add_argument("--trace-mib", type=sizes, default=[], help="generated traces, e.g. 1024,5120")
    parser.add_argument(
        "--peer-max-mib",
        type=float,
        default=float("inf"),
        help="run the peer only on files up to this size (a 5 GB trace is beyond HTA on a 24 GiB box)",
    )
    parser.add_argument("--kind", choices=["trace", "snapshot"], help="only this kind of file (default: both)")
    args = parser.parse_args(argv)
    subprocess.run([args.lab_python, "-m", "compileall", "-q", "core", "render"], cwd=ROOT, check=True)
    starts = [("lab", args.lab_python), *([("HTA", args.hta_python)] if args.hta_python else [])]
    print(
        "bare start (python -c pass, median of 5): "
        + "; ".join(f"{who} {bare_start(py):.3f} s ({py})" for who, py in starts)
    )
    judged: list[bool] = []
    with tempfile.TemporaryDirectory(prefix="gpulab-peers-") as tmp:
        work = Path(tmp)
        print(
            f"{'file':<42} {'kind':<8} {'form':<5} {'lab s':>7} {'peer s':>7} {'ratio':>6} {'lab MiB':>8} "
            f"{'peer MiB':>9} {'ratio':>6}"
        )
        for kind, label, path in cases(args, work):
            if args.kind not in (None, kind):
                continue
            cmds = commands(kind, path, work, args.lab_python, args.hta_python)
            if path.stat().st_size > args.peer_max_mib * MIB:
                cmds["peer"] = None
            runs: dict[str, list[tuple[float, int, int]]] = {who: [] for who in cmds}
            for r in range(args.rounds):
                order = [*LAB_FORMS, "peer"]
                for who in order if r % 2 == 0 else order[::-1]:
                    if (cmd := cmds[who]) is not None:
                        runs[who].append(measure(cmd, ROOT))
            peer = runs["peer"]
            peer_s = statistics.median(w for w, _, _ in peer) if peer else None
            peer_m = statistics.median(m for _, m, _ in peer) / MIB if peer else None
            failed = " (peer failed)" if any(rc for _, _, rc in peer) else ""
            met = []
            for form in LAB_FORMS:
                lab_s = statistics.median(w for w, _, _ in runs[form])
                lab_m = statistics.median(m for _, m, _ in runs[form]) / MIB
                row = f"{label:<42} {kind:<8} {form:<5} {lab_s:>7.2f}"
                if peer_s is None or peer_m is None:
                    why = "HTA not installed" if kind == "trace" and args.hta_python is None else "over --peer-max-mib"
                    print(f"{row} {'—':>7} {'—':>6} {lab_m:>8.0f}  (peer skipped: {why})")
                    continue
                met.append(lab_s / peer_s <= TIME_TARGET and lab_m / peer_m <= RSS_TARGET)
                over = "" if kind != "trace" or met[-1] else "  ← over the target"
                print(
                    f"{row} {peer_s:>7.2f} {lab_s / peer_s:>6.2f} {lab_m:>8.0f} {peer_m:>9.0f} "
                    f"{lab_m / peer_m:>6.2f}{failed}{over}"
                )
            if kind == "trace" and met:
                judged.append(all(met))
    if judged:
        print(
            f"traces within {TIME_TARGET:g}× HTA's time and {RSS_TARGET:g}× its peak RSS in both forms: "
            f"{sum(judged)} of {len(judged)}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""How long the history takes to list runs: summaries (what `runs list`, the home page and the Compare page
read) against the whole-run listing they used before, measured in the same run on the same database.

Two stores, as in issue 15 finding 13: one with a ~150 MB run (plus a few small ones), one with 10,000
small runs. Each listing is timed ``--repeats`` times (median, min–max); the target is under a second.

    python benchmarks/history_listing.py [--repeats 5] [--big-mb 150] [--runs 10000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.result import RunResult  # noqa: E402
from core.store import EXPORT_FORMAT, RunStore  # noqa: E402

CPU = {"kind": "cpu", "name": "Benchmark CPU", "label": "CPU — Benchmark CPU"}


def small_run(i: int) -> RunResult:
    rows = [{"size": s, "dtype": "fp32", "median_ms": 0.1 * s, "gflops": 10.0 + i % 7} for s in (64, 128, 256)]
    run = RunResult(
        "matmul",
        {"dtypes": ["fp32"], "sizes": [64, 128, 256], "seed": i},
        CPU,
        {"torch": "2.13.0"},
        f"2026-01-01T00:{i // 600 % 60:02d}:{i // 10 % 60:02d}.{i % 10}00+00:00",
        None,
        "ok",
        rows=rows,
        name=f"run {i}",
        tags=["bench"],
    )
    run.id = f"bench{i:08d}"
    return run


def big_run(target_bytes: int) -> RunResult:
    """A run whose stored JSON is about ``target_bytes`` (rows with per-call samples, like a long matmul sweep)."""
    row_bytes = len(
        json.dumps(
            {"m": 131072, "n": 4096, "k": 4096, "dtype": "bf16", "tflops": 123.456789, "samples_ms": [0.123456789] * 40}
        )
    )
    rows = [
        {
            "m": 64 * (i + 1),
            "n": 4096,
            "k": 4096,
            "dtype": "bf16",
            "tflops": 100.0 + i % 50 / 7,
            "samples_ms": [0.123456789 + j * 1e-6 for j in range(40)],
        }
        for i in range(target_bytes // row_bytes)
    ]
    run = RunResult(
        "matmul",
        {"dtypes": ["bf16"]},
        CPU,
        {"torch": "2.13.0"},
        "2026-02-01T00:00:00+00:00",
        "2026-02-01T01:00:00+00:00",
        "ok",
        rows=rows,
        name="150 MB sweep",
    )
    run.id = "bigrun00000001"
    return run


def timed(fn, repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def report(label: str, store: RunStore, repeats: int) -> bool:
    new = timed(lambda: store.summaries(), repeats)
    old = timed(lambda: store.list(), max(1, repeats // 2))  # the reference: every run decoded whole
    med_new, med_old = statistics.median(new), statistics.median(old)
    ok = med_new < 1.0
    print(f"{label}: {store.count()} runs, database {store.path.stat().st_size / 2**20:,.0f} MiB")
    print(
        f"  summaries (runs list, home, Compare): median {med_new * 1e3:8.1f} ms "
        f"(min {min(new) * 1e3:.1f}, max {max(new) * 1e3:.1f})  target < 1000 ms: {'met' if ok else 'NOT met'}"
    )
    print(
        f"  whole runs (the old listing):          median {med_old * 1e3:8.1f} ms "
        f"(min {min(old) * 1e3:.1f}, max {max(old) * 1e3:.1f})"
    )
    print(f"  ratio old/new: {med_old / med_new:,.1f}x")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--big-mb", type=float, default=150.0)
    parser.add_argument("--runs", type=int, default=10_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        big = RunStore(Path(tmp) / "big.sqlite")
        t0 = time.perf_counter()
        big.save(big_run(int(args.big_mb * 1e6)))
        for i in range(5):
            big.save(small_run(i))
        print(f"(stored a {args.big_mb:.0f} MB run in {time.perf_counter() - t0:.1f} s)")
        ok = report("one ~150 MB run + 5 small", big, args.repeats)

        many = RunStore(Path(tmp) / "many.sqlite")
        runs = [small_run(i).to_dict() for i in range(args.runs)]
        many.import_bytes(json.dumps({"format": EXPORT_FORMAT, "schema_version": 1, "runs": runs}).encode())
        ok = report(f"{args.runs:,} small runs", many, args.repeats) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Record the lab's reference runs on this box into ``examples/`` as one runs file, ready to commit.

On a GPU box, one command records the full reference set through the normal job path (a worker per
device, every run validated and stored like any other): matmul per dtype (fp8 with and without fast
accumulation), the step benchmark of small and medium in every precision mode, training memory,
the allocator's lifecycle, backward-peak and fragmentation scenarios, max batch, number formats and
the planner. The runs go to a private store and are exported as one runs file, which the dashboard
imports with "Load example runs" (Compare & export) through the normal validated import.

    python scripts/record_reference_runs.py                       # first GPU, full set, examples/<gpu>-<date>.json
    python scripts/record_reference_runs.py --device cuda:1 -o examples/h100-sxm.json
    python scripts/record_reference_runs.py --budget tiny --device cpu -o /tmp/runs.json   # minutes → seconds (CI)

Exit code: 0 when every run finished (ok, or unsupported with its reason), 1 when one failed, 2 for bad input.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MATMUL_DTYPES = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "fp8-fast-accum", "int8")
STEP = {"batch": 8, "context": 512, "warmup_steps": 5, "timed_steps": 20, "cold_steps": 5}


def full_plan() -> list[tuple[str, str, dict]]:
    """(label, experiment, config) of the reference set for a GPU."""
    plan: list[tuple[str, str, dict]] = [(f"matmul {d}", "matmul", {"dtypes": [d]}) for d in MATMUL_DTYPES]
    plan += [("matmul bf16 search", "matmul", {"dtypes": ["bf16"], "search": True})]
    for model in ("small", "medium"):
        plan.append(
            (
                f"step-bench {model}, every precision",
                "step-bench",
                {"model": model, "sweep": True, **STEP, "cold_steps": 0, "profile_steps": 0, "trace": False},
            )
        )
        plan.append(
            (
                f"step-bench {model} bf16-autocast profiled",
                "step-bench",
                {"model": model, "precision": "bf16-autocast", **STEP, "profile_steps": 2, "trace": False},
            )
        )
    for precision in ("fp32", "bf16-autocast", "bf16"):
        plan.append(
            (
                f"train-memory small {precision}",
                "train-memory",
                {"model": "small", "precision": precision, "batch": 4, "context": 256},
            )
        )
    for scenario in ("lifecycle", "backward-peak", "fragmentation"):
        plan.append(
            (f"allocator {scenario}", "allocator", {"scenario": scenario, "size_mib": 1024, "history_entries": 20_000})
        )
    plan += [
        (
            "allocator lifecycle, expandable segments",
            "allocator",
            {"scenario": "lifecycle", "size_mib": 1024, "alloc_conf": "expandable_segments:True"},
        ),
        ("max batch small bf16-autocast", "max-batch", {"model": "small", "precision": "bf16-autocast"}),
        ("number formats 65536", "formats", {"value": 65536.0}),
        ("accumulation", "accumulate", {}),
        ("autocast dtype map", "autocast", {}),
        ("rounding", "rounding", {}),
        ("quantization", "quantize", {}),
        ("planner small", "estimate", {"model": "small"}),
    ]
    return plan


def tiny_plan() -> list[tuple[str, str, dict]]:
    """The same kinds of run at sizes a CPU finishes in seconds (for tests and a first look)."""
    quick = {"warmup_ms": 5.0, "rep_ms": 20.0, "min_reps": 3, "roofline": False}
    return [
        (f"matmul {d}", "matmul", {"dtypes": [d], "sizes": [64, 128], **quick}) for d in ("fp32", "bf16", "fp8")
    ] + [
        (
            "step-bench tiny, every precision",
            "step-bench",
            {
                "model": "tiny",
                "batch": 2,
                "context": 32,
                "warmup_steps": 1,
                "timed_steps": 2,
                "sweep": True,
                "cold_steps": 0,
                "profile_steps": 0,
                "trace": False,
            },
        ),
        ("train-memory tiny", "train-memory", {"model": "tiny", "batch": 2, "context": 32}),
        ("allocator lifecycle", "allocator", {"scenario": "lifecycle", "size_mib": 16}),
        ("allocator backward-peak", "allocator", {"scenario": "backward-peak", "size_mib": 16}),
        ("number formats 65536", "formats", {"value": 65536.0, "spacing_points": 16}),
        ("planner tiny", "estimate", {"model": "tiny"}),
    ]


PLANS = {"full": full_plan, "tiny": tiny_plan}


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "device"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    parser.add_argument("--device", default="auto", help="auto (first GPU, else CPU), cpu, cuda or cuda:N")
    parser.add_argument(
        "--budget",
        choices=sorted(PLANS),
        default="full",
        help="full: the reference set for a GPU; tiny: the same kinds of run in seconds",
    )
    parser.add_argument("-o", "--output", help="runs file to write [default: examples/<device>-<date>.json]")
    parser.add_argument("--timeout", type=float, default=3600.0, help="wall-clock limit per run in seconds")
    args = parser.parse_args(argv)

    from core.errors import ConfigError
    from core.jobs import JobManager
    from core.store import RunStore

    plan = PLANS[args.budget]()
    with tempfile.TemporaryDirectory(prefix="gpulab-reference-") as tmp:
        store = RunStore(Path(tmp) / "runs.sqlite")  # a private store: exactly these runs go in the file
        manager = JobManager(store=store)
        try:
            jobs = [
                (
                    label,
                    manager.submit(experiment, config, args.device, timeout_s=args.timeout, name=f"reference: {label}"),
                )
                for label, experiment, config in plan
            ]
        except ConfigError as exc:
            manager.shutdown()
            print(f"error: {exc}", file=sys.stderr)
            return 2
        failed = []
        try:
            for i, (label, job) in enumerate(jobs, 1):
                run = job.wait()
                assert run is not None  # with no time limit, wait() returns once the job has finished
                print(
                    f"[{i}/{len(jobs)}] {label}: {run.status}" + (f" — {run.error}" if run.error else ""),
                    file=sys.stderr,
                    flush=True,
                )
                if run.status not in ("ok", "unsupported"):
                    failed.append(label)
        finally:
            manager.shutdown()
        runs = [store.get(job.id) for _, job in jobs]
        for run in runs:
            store.relabel(run.id, tags=sorted({*run.tags, "reference", args.budget}))
        device = next((r.device for r in runs if r.device.get("kind") in ("cpu", "cuda")), {"name": args.device})
        output = (
            Path(args.output)
            if args.output
            else ROOT / "examples" / f"{slug(device.get('name', args.device))}-{date.today().isoformat()}.json"
        )
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(store.export_json([r.id for r in runs]), encoding="utf-8")
    print(
        f"wrote {len(runs)} run(s) on {device.get('label') or device.get('name')} to {output}"
        + (f"; failed: {', '.join(failed)}" if failed else ""),
        file=sys.stderr,
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

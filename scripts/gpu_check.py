#!/usr/bin/env python3
"""Check every CUDA path of the lab on the GPU box at hand, most valuable first, inside one time budget.

Run it through ``scripts/gpu_check.sh`` (which installs the wheels of ``.whl/`` first, where there are any):

    bash scripts/gpu_check.sh                          # the whole check on cuda:0, 8 minutes at most
    bash scripts/gpu_check.sh --only matmul,workload   # re-run the steps that failed
    bash scripts/gpu_check.sh --device cpu             # a dry run at CPU sizes
    bash scripts/gpu_check.sh --device cpu --tiny      # the smallest sizes (the test suite runs this)

Every step is a command of the lab (``python -m core …``) against a private store, under its own time
limit inside the overall budget; what it printed is judged by :mod:`scripts.gpu_claims`. The folder it
writes (``$OUT``, else ``--out``) receives at most these files: ``summary.txt`` (per step pass/fail/time,
then one judged line per claim; rewritten after every step, so it exists even when the budget runs out or
the check is killed), ``results.json`` (the same, with what each step printed), ``runs.json`` (every run,
as a runs file the dashboard imports), ``log.txt`` (the commands and their stderr), ``pytest.txt``.

Exit code: 0 when every step passed and no claim failed, 1 otherwise, 2 for bad input.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scripts import gpu_claims as claims  # noqa: E402 - after the path is set

RESERVE_S = 25.0  # kept back from the budget for the export and the last summary
MIN_STEP_S = 10.0  # a step is not started with less than this left
KILL_GRACE_S = 10.0  # SIGTERM (the lab stores the run as cancelled), then SIGKILL
PYTEST_TAIL = 400  # lines of pytest's output kept


@dataclass(frozen=True)
class Sizes:
    """What each step runs at: a GPU's real sizes, a CPU's, or the tiny ones the test suite can afford."""

    matmul: dict
    search: dict  # the bounded shape search (matmul --mamf) the published maximum is judged against
    judge_size: int  # the size³ the TF32 and published claims read
    reference: dict
    alloc_mib: int
    alloc_confs: tuple[str, ...]
    train: tuple[tuple[str, str], ...]  # (model, precision)
    train_shape: dict
    sweep: dict
    profiled: dict
    record: dict
    soak_s: float
    health_parts: str
    copy: dict
    pytest_timeout_s: int
    stacks: dict  # the step you would really run (issue 44): label → step-bench config


STACK_STEPS = {"timed_steps": 10, "cold_steps": 1, "warmup_steps": 3, "max_warmup_steps": 30, "trace": False}
CPU_STEPS = {"batch": 2, "context": 32, **STACK_STEPS, "timed_steps": 3, "max_warmup_steps": 6}
# the GPU's configurations at a CPU's sizes (tiny and mini, no compile): what each claim reads, shown, not judged
CPU_STACKS = {
    "gpt2": {"model": "tiny", "precision": "fp32", "stacks": "course,sdpa+fused", "profile_steps": 1, **CPU_STEPS},
    "2.7B": {"model": "mini", "precision": "fp32", "stacks": "sdpa+fused", "profile_steps": 1, **CPU_STEPS},
    "2.7B fp8": {"model": "mini", "precision": "fp8", "stacks": "sdpa+fused", "profile_steps": 0, **CPU_STEPS},
    "2.7B eager": {"model": "mini", "sweep": True, "precisions": "fp32,bf16-autocast", "stacks": "course"}
    | {"profile_steps": 0, **CPU_STEPS},
    "gpt2 again": {"model": "tiny", "sweep": True, "precisions": "fp32", "stacks": "course,sdpa+fused"}
    | {"profile_steps": 0, **CPU_STEPS},
}


QUICK = {"warmup_ms": 5.0, "rep_ms": 20.0, "min_reps": 3, "roofline": False}
STEP_GPU = {"batch": 8, "context": 512, "warmup_steps": 5, "timed_steps": 20, "cold_steps": 0}
STEP_CPU = {"batch": 2, "context": 32, "warmup_steps": 1, "timed_steps": 2, "cold_steps": 0}

SEARCH = {"dtypes": "bf16", "mamf": True, "roofline": False, "accuracy": False}
GPU = Sizes(
    matmul={},  # every dtype at the device's default sizes (256…16384)
    search=SEARCH | {"budget_s": 30.0},  # the card's published best shape first, then the grid around it
    judge_size=8192,
    reference={"dtype": "bf16", "size": 8192, "rounds": 3},
    alloc_mib=1024,
    alloc_confs=("expandable_segments:True", "backend:cudaMallocAsync"),
    train=(("small", "fp32"), ("small", "bf16-autocast"), ("medium", "fp32"), ("medium", "bf16-autocast")),
    train_shape={"batch": 4, "context": 256},
    sweep={"model": "small", "sweep": True, **STEP_GPU, "profile_steps": 0, "trace": False},
    profiled={"model": "small", "precision": "bf16-autocast", **STEP_GPU, "timed_steps": 5, "profile_steps": 2},
    record={"model": "small", "precision": "bf16-autocast", "batch": 4, "context": 256},
    soak_s=30.0,
    health_parts="soak,search,copies,collectives",
    copy={"parts": "copy"},
    pytest_timeout_s=240,
    stacks={
        # GPT-2 124M at 64 × 1,024 tokens, the course's stack beside today's with compile
        "gpt2": {"model": "gpt2-124m", "precision": "bf16-autocast", "batch": 64, "context": 1024}
        | {"stacks": "course,modern", "profile_steps": 2, **STACK_STEPS, "trace": True},
        # the 2.7B preset at context 2,048, the largest batch that fits, today's stack, then Float8
        "2.7B": {"model": "2.7B", "precision": "bf16-autocast", "batch": 0, "context": 2048, "stacks": "modern"}
        | {"profile_steps": 1, **STACK_STEPS, "timed_steps": 5},
        "2.7B fp8": {"model": "2.7B", "precision": "fp8", "batch": 0, "context": 2048, "stacks": "modern"}
        | {"profile_steps": 0, **STACK_STEPS, "timed_steps": 5},
        # 2.7B eager: fp32 against bf16 autocast, one batch for both
        "2.7B eager": {"model": "2.7B", "sweep": True, "precisions": "fp32,bf16-autocast", "stacks": "course"}
        | {"batch": 0, "context": 2048, "profile_steps": 0, **STACK_STEPS, "timed_steps": 5},
        # the GPT-2 configurations again, in a sweep, minutes later
        "gpt2 again": {"model": "gpt2-124m", "sweep": True, "precisions": "bf16-autocast", "batch": 64}
        | {"context": 1024, "stacks": "course,modern", "profile_steps": 0, **STACK_STEPS},
    },
)
CPU = Sizes(
    matmul={"sizes": "64,256", **QUICK},
    search=SEARCH | {"dtypes": "fp32", "budget_s": 3.0, **QUICK},
    judge_size=256,
    reference={"dtype": "fp32", "size": 256, "rounds": 3},
    alloc_mib=64,
    alloc_confs=(),
    train=(("tiny", "fp32"), ("mini", "fp32")),
    train_shape={"batch": 2, "context": 64},
    sweep={"model": "tiny", "sweep": True, **STEP_CPU, "profile_steps": 0, "trace": False},
    profiled={"model": "tiny", "precision": "fp32", **STEP_CPU, "profile_steps": 1},
    record={"model": "tiny", "precision": "fp32", "batch": 2, "context": 32},
    soak_s=4.0,
    health_parts="soak,search,copies",
    copy={"parts": "copy", "copy_sizes": "1MiB"},
    pytest_timeout_s=120,
    stacks=CPU_STACKS,
)
TINY = Sizes(
    matmul={"dtypes": "fp32,tf32,bf16,fp8", "sizes": "64", **QUICK},
    search=SEARCH | {"dtypes": "fp32", "budget_s": 1.0, "start": "64,64,64", "step": 16, **QUICK},
    judge_size=64,
    reference={"dtype": "fp32", "size": 64, "rounds": 2, "rep_ms": 20.0, "min_run_time_s": 0.05},
    alloc_mib=16,
    alloc_confs=(),
    train=(("tiny", "fp32"),),
    train_shape={"batch": 2, "context": 32},
    sweep={"model": "tiny", "sweep": True, **STEP_CPU, "profile_steps": 0, "trace": False},
    profiled={"model": "tiny", "precision": "fp32", **STEP_CPU, "profile_steps": 1},
    record={"model": "tiny", "precision": "fp32", "batch": 2, "context": 16},
    soak_s=2.0,
    health_parts="soak",
    copy={"parts": "copy", "copy_sizes": "1MiB"},
    pytest_timeout_s=60,
    stacks=CPU_STACKS,
)


@dataclass
class StepResult:
    name: str
    verdict: str = "skipped"  # pass | fail | skipped
    seconds: float = 0.0
    note: str = ""
    printed: dict = field(default_factory=dict)  # what its commands printed (JSON), by label


class Check:
    """One check: the budget, the private store, the output folder, and what every step found."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.cuda = args.device != "cpu"
        self.sizes = TINY if args.tiny else GPU if self.cuda else CPU
        self.python = sys.executable
        self.started = time.monotonic()
        self.deadline = self.started + args.budget_s
        self.out = Path(args.out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.work = Path(tempfile.mkdtemp(prefix="gpulab-check-"))
        self.env = os.environ | {
            "GPULAB_DB": str(self.work / "runs.sqlite"),
            "GPULAB_DATA_DIR": str(self.work / "data"),
            "PYTHONUNBUFFERED": "1",
        }
        self.results: list[StepResult] = []
        self.claims: list[claims.Claim] = []
        self.box: dict = {}
        self.log = open(self.out / "log.txt", "a", encoding="utf-8")  # noqa: SIM115 - open for the whole check
        self.current: StepResult | None = None

    # --- running commands ------------------------------------------------------------------------

    def left(self) -> float:
        return self.deadline - time.monotonic() - RESERVE_S

    def command(self, argv: list[str], cap_s: float, label: str, stdout_to: Path | None = None) -> tuple[int, str]:
        """Run ``argv`` in its own process group under min(cap, what the budget has left); (exit code, stdout).

        A command past its time gets SIGTERM (the lab's CLI stores the run as cancelled), then SIGKILL, and
        :class:`StepTimeout` carries what it printed. ``stdout_to`` streams stdout into that file as it comes
        (a long command's progress survives its end)."""
        limit = min(cap_s, self.left())
        if limit < MIN_STEP_S:
            raise BudgetSpent(f"{label}: {max(self.left(), 0):.0f} s of the budget left")
        self.log.write(f"\n$ {' '.join(argv)}   # {label}, limit {limit:.0f} s\n")
        self.log.flush()
        sink = open(stdout_to, "w", encoding="utf-8") if stdout_to else subprocess.PIPE  # noqa: SIM115
        proc = subprocess.Popen(
            argv, cwd=ROOT, env=self.env, stdout=sink, stderr=self.log, text=True, start_new_session=True
        )
        try:
            stdout, _ = proc.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            _signal_group(proc, signal.SIGTERM)
            try:
                stdout, _ = proc.communicate(timeout=KILL_GRACE_S)
            except subprocess.TimeoutExpired:
                _signal_group(proc, signal.SIGKILL)
                stdout, _ = proc.communicate()
            self.log.write(f"# {label}: stopped at its limit of {limit:.0f} s\n")
            raise StepTimeout(f"{label} passed its limit of {limit:.0f} s", _printed(stdout, stdout_to)) from None
        finally:
            if stdout_to:
                sink.close()  # pyright: ignore[reportAttributeAccessIssue]
            self.log.flush()
        return proc.returncode, _printed(stdout, stdout_to)

    def lab(self, label: str, argv: list[str], cap_s: float, ok_codes: tuple[int, ...] = (0,)) -> dict | None:
        """``python -m core ARGV --json``: the JSON it printed (kept under ``label``), None when it printed none."""
        code, stdout = self.command([self.python, "-m", "core", *argv, "--json"], cap_s, label)
        try:
            printed = json.loads(stdout) if stdout.strip() else None
        except json.JSONDecodeError:
            printed = None
            self.log.write(f"# {label}: stdout is not JSON: {stdout[:500]!r}\n")
        if self.current is not None and printed is not None:
            self.current.printed[label] = printed
        if code not in ok_codes:
            self.fail(f"{label} exited {code}" + _error_of(printed))
        return printed

    def experiment(self, label: str, name: str, config: dict, cap_s: float) -> dict | None:
        """One experiment on the check's device (exit 3, unsupported, is an answer, not a failure)."""
        argv = [name, "--device", self.args.device, "--name", f"gpu check: {label}", *options(config)]
        return self.lab(label, argv, cap_s, ok_codes=(0, 3))

    def fail(self, why: str) -> None:
        if self.current is not None:
            self.current.verdict = "fail"
            self.current.note = "; ".join(x for x in (self.current.note, why) if x)

    def judge(self, *found: claims.Claim) -> None:
        self.claims += found

    # --- the summary -----------------------------------------------------------------------------

    def write(self) -> None:
        """summary.txt and results.json, replaced whole (never half-written), after every step."""
        head = self.heading()
        lines = [head, "", "steps"]
        for r in self.results:
            lines.append(f"  {r.name:<13} {r.verdict:<8} {r.seconds:7.1f} s  {r.note}".rstrip())
        lines += ["", "claims"]
        lines += [f"  {c.line()}" for c in self.claims] or ["  (none judged yet)"]
        failed = [r.name for r in self.results if r.verdict == "fail"]
        bad = [c.claim for c in self.claims if c.verdict == claims.FAIL]
        lines += [
            "",
            f"result: {'FAIL' if failed or bad else 'PASS'}"
            + (f" — failed steps: {', '.join(failed)}" if failed else "")
            + (f" — failed claims: {len(bad)}" if bad else ""),
        ]
        if failed:
            lines.append(f"re-run: bash scripts/gpu_check.sh --device {self.args.device} --only {','.join(failed)}")
        _replace(self.out / "summary.txt", "\n".join(lines) + "\n")
        results = {
            "heading": head,
            "box": self.box,
            "steps": [asdict(r) for r in self.results],
            "claims": claims.as_dicts(self.claims),
        }
        _replace(self.out / "results.json", json.dumps(results, indent=1, default=str, allow_nan=True))

    def heading(self) -> str:
        b = self.box
        where = b.get("gpu") or ("CPU dry run" if not self.cuda else "GPU not read yet")
        spent = time.monotonic() - self.started
        return (
            f"GPU Lab check on {where}; driver {b.get('driver', '—')}, torch {b.get('torch', '—')}, "
            f"CUDA {b.get('cuda', '—')}; device {self.args.device}{' (tiny sizes)' if self.args.tiny else ''}; "
            f"{datetime.now(UTC).isoformat(timespec='seconds')}; {spent:.0f} s of a "
            f"{self.args.budget_s:.0f} s budget"
        )

    def close(self) -> None:
        self.log.close()
        shutil.rmtree(self.work, ignore_errors=True)


class BudgetSpent(Exception):
    """Too little of the budget is left to start the command."""


class StepTimeout(Exception):
    """A command passed its time limit and was stopped; ``printed`` is what it wrote to stdout until then."""

    def __init__(self, message: str, printed: str = "") -> None:
        super().__init__(message)
        self.printed = printed


def _printed(stdout: str | None, path: Path | None) -> str:
    return path.read_text(encoding="utf-8", errors="replace") if path else stdout or ""


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass


def _replace(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _error_of(printed: dict | None) -> str:
    if isinstance(printed, dict) and printed.get("error"):
        return f": {str(printed['error']).splitlines()[0][:300]}"
    return ""


def options(config: dict) -> list[str]:
    """A config dict as the CLI's options (booleans as --x / --no-x, lists as comma lists)."""
    argv = []
    for key, value in config.items():
        flag = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            argv.append(flag if value else f"--no-{key.replace('_', '-')}")
        elif isinstance(value, (list, tuple)):
            argv += [flag, ",".join(map(str, value))]
        else:
            argv += [flag, str(value)]
    return argv


# --- the steps, most valuable first ----------------------------------------------------------------


def step_box(ck: Check) -> None:
    """What the box is: the GPU and driver, versions, NVML, a compiler for triton, environment overrides."""
    info = ck.lab("info", ["info"], 120)
    devices = (info or {}).get("devices") or []
    gpu = next((d for d in devices if d.get("kind") == "cuda"), None)
    versions = (info or {}).get("versions") or {}
    ck.box |= {
        "gpu": gpu.get("name") if gpu else None,
        "torch": versions.get("torch"),
        "cuda": versions.get("cuda"),
        "driver": versions.get("driver"),
        "python": sys.version.split()[0],
    }
    smi = shutil.which("nvidia-smi")
    if smi:
        code, out = ck.command(
            [
                smi,
                "--query-gpu=name,driver_version,memory.total,mig.mode.current,clocks.max.sm,power.limit",
                "--format=csv,noheader",
            ],
            30,
            "nvidia-smi",
        )
        ck.box["nvidia_smi"] = out.strip() if code == 0 else f"exit {code}"
    else:
        ck.box["nvidia_smi"] = "not found"
    ck.box["nvml"] = _nvml()
    include = Path(sysconfig.get_paths()["include"]) / "Python.h"
    compiler = shutil.which("gcc") or shutil.which("cc") or shutil.which("clang")
    ck.box["triton_compiler"] = (
        f"{compiler or 'no C compiler'}; Python.h {'found' if include.is_file() else 'missing'} ({include})"
    )
    ck.box["env"] = {
        k: os.environ.get(k)
        for k in ("NVIDIA_TF32_OVERRIDE", "CUDA_VISIBLE_DEVICES", "PYTORCH_CUDA_ALLOC_CONF", "CUDA_LAUNCH_BLOCKING")
    }
    ck.current.note = (  # type: ignore[union-attr]
        f"{ck.box['nvidia_smi']}; NVML {ck.box['nvml']}; triton compiler {ck.box['triton_compiler']}; "
        f"env {json.dumps({k: v for k, v in ck.box['env'].items() if v is not None}) or '{}'}"
    )
    if ck.cuda and gpu is None:
        ck.fail("torch sees no CUDA GPU")


def _nvml() -> str:
    try:
        import pynvml  # pyright: ignore[reportMissingImports]
    except ImportError:
        return "not installed (nvidia-ml-py)"
    try:
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        clock = pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)
        power = pynvml.nvmlDeviceGetPowerUsage(handle) / 1000
        pynvml.nvmlShutdown()
        return f"readable (SM {clock} MHz, {power:.0f} W now)"
    except Exception as exc:  # noqa: BLE001 - any NVML error is the answer
        return f"not readable: {exc}"


def step_doctor(ck: Check) -> None:
    """Every experiment at its smallest setting, cross-checked against independent references."""
    report = ck.lab("doctor", ["doctor", "--device", ck.args.device], 240, ok_codes=(0, 1))
    if report is None:
        ck.fail("the doctor printed no report")
        return
    s = report["summary"]
    ck.current.note = f"{s['pass']} pass, {s['fail']} fail, {s['unsupported']} unsupported"  # type: ignore[union-attr]
    failed = [f"{c['check']}: {c['result']}" for c in report["checks"] if c["verdict"] == "fail"]
    if failed:
        ck.fail("; ".join(failed))


def step_matmul(ck: Check) -> None:
    """Every dtype at the default sizes, then the lab's timer against the reference timer."""
    size = ck.sizes.judge_size
    run = ck.experiment("matmul", "matmul", ck.sizes.matmul, 300)
    ck.judge(claims.dtypes_measured(run), claims.tf32_speedup(run, size), claims.against_published(run, "bf16", size))
    ck.judge(claims.against_published(run, "fp8", size))
    reference = ck.experiment("reference", "reference", ck.sizes.reference, 120)
    ck.judge(claims.timer_agreement(reference))
    if reference and reference.get("meta"):
        ck.current.note = f"reference tool: {reference['meta'].get('tool')}"  # type: ignore[union-attr]
    _fail_on_claims(ck, 4)


def step_search(ck: Check) -> None:
    """The bounded shape search (``matmul --mamf``): its best against the card's published maximum, a search
    against a search, within its budget."""
    settings = ck.sizes.search
    run = ck.experiment("search", "matmul", settings, settings["budget_s"] + 120)
    dtype = settings["dtypes"]
    ck.judge(claims.search_reaches_published(run, dtype))
    search = ((run or {}).get("meta") or {}).get("search", {}).get(dtype)
    if search:
        ck.current.note = f"{search['stopped']} in {search['spent_s']:.1f} s; from {search['start_from']}"  # type: ignore[union-attr]
    _fail_on_claims(ck, 1)


def step_allocator(ck: Check) -> None:
    """The seed's allocator scenarios at 1 GiB, and the lifecycle under other allocator settings."""
    mib = ck.sizes.alloc_mib
    life = ck.experiment("lifecycle", "allocator", {"scenario": "lifecycle", "size_mib": mib}, 90)
    peak = ck.experiment("backward-peak", "allocator", {"scenario": "backward-peak", "size_mib": mib}, 90)
    ck.experiment("fragmentation", "allocator", {"scenario": "fragmentation", "size_mib": mib}, 90)
    steps = claims.DEL_STEPS.format(mib=mib)
    delete = ck.experiment("del", "allocator", {"scenario": "custom", "steps": steps, "size_mib": mib}, 90)
    for conf in ck.sizes.alloc_confs:
        ck.experiment(
            f"lifecycle {conf}", "allocator", {"scenario": "lifecycle", "size_mib": mib, "alloc_conf": conf}, 90
        )
    ck.judge(*claims.lifecycle_claims(life, mib), *claims.delete_claim(delete, mib), *claims.backward_peaks(peak))
    _fail_on_claims(ck, 5)


def step_train_memory(ck: Check) -> None:
    """Training memory of real steps against the planner, per model and precision."""
    for model, precision in ck.sizes.train:
        label = f"{model} {precision}"
        run = ck.experiment(
            label, "train-memory", {"model": model, "precision": precision, **ck.sizes.train_shape}, 150
        )
        ck.judge(claims.planner_agreement(run, label), claims.adam_four_times(run, label))
    _fail_on_claims(ck, 2 * len(ck.sizes.train))


def step_step_bench(ck: Check) -> None:
    """The step benchmark in every precision mode."""
    run = ck.experiment("sweep", "step-bench", ck.sizes.sweep, 240)
    rows = [r for r in (run or {}).get("rows", []) if r.get("kind") == "precision"]
    ck.current.note = "; ".join(  # type: ignore[union-attr]
        f"{r['precision']} {r['step_ms_median']:.2f} ms/step, {r['tokens_per_s']:,.0f} tok/s"
        + (f", MFU {r['mfu']:.1%}" if isinstance(r.get("mfu"), (int, float)) else "")
        if r.get("status") == "ok"
        else f"{r['precision']} {r.get('status')}"
        for r in rows
    )
    odd = [
        f"{r['precision']}: {r.get('status')} {r.get('reason')}"
        for r in rows
        if r.get("status") not in ("ok", "unsupported")
    ]
    if odd:
        ck.fail("; ".join(odd))


def step_stacks(ck: Check) -> None:
    """The step you would really run: GPT-2 124M with today's stack against the bf16 dense peak beside the course's
    step, the 2.7B preset filling the card (and with Float8), 2.7B bf16 against fp32, the same configurations
    timed twice, and the planner against the allocator's peak."""
    runs = {
        label: ck.experiment(f"stacks {label}", "step-bench", config, 420) for label, config in ck.sizes.stacks.items()
    }
    modern = ck.sizes.stacks["gpt2"]["stacks"].split(",")[-1]
    large = ck.sizes.stacks["2.7B"]["stacks"]
    found = [
        claims.step_mfu(runs["gpt2"], modern, claims.MFU_SMALL_FLOOR, "gpt2-124m"),
        claims.step_mfu(runs["2.7B"], large, claims.MFU_LARGE_FLOOR, "2.7B"),
        claims.fp8_speedup(runs["2.7B"], runs["2.7B fp8"], large),
        claims.bf16_over_fp32(runs["2.7B eager"]),
        *claims.repeatable(
            runs["gpt2"],
            runs["gpt2 again"],
            ck.sizes.stacks["gpt2"]["precision"],
            tuple(ck.sizes.stacks["gpt2"]["stacks"].split(",")),
        ),
        claims.own_step_findings(runs["gpt2"], "course", modern),
        claims.step_planner(runs["gpt2"], modern, "gpt2-124m"),
        claims.step_planner(runs["2.7B"], large, "2.7B"),
    ]
    ck.judge(*found)
    _fail_on_claims(ck, len(found))


def step_workload(ck: Check) -> None:
    """A profiled step's trace and a recorded training step's snapshot, each imported back and compared."""
    bench = ck.experiment("profiled step", "step-bench", ck.sizes.profiled, 180)
    trace_path = ((bench or {}).get("meta") or {}).get("trace_path")
    imported_trace = ck.lab("trace import", ["trace", trace_path], 120) if trace_path else None
    ck.judge(claims.trace_kernel_time(imported_trace, bench))

    snapshot, truth_file = ck.work / "snapshot.pickle", ck.work / "train_step.json"
    record = ck.sizes.record
    script = [ck.python, str(ROOT / "scripts" / "train_step.py"), str(truth_file), *options(record)]
    code, _ = ck.command(
        [ck.python, "-m", "core", "record", "-o", str(snapshot), "--", *script],
        180,
        "record",
    )
    truth = json.loads(truth_file.read_text()) if truth_file.is_file() else None
    if code != 0 or truth is None:
        ck.fail(f"record exited {code}")
    imported = ck.lab("snapshot import", ["snapshot", str(snapshot)], 120) if snapshot.is_file() else None
    if truth is not None:
        ck.current.printed["train step"] = truth  # type: ignore[union-attr]
    ck.judge(claims.snapshot_peak(imported, truth))
    _fail_on_claims(ck, 2)


def step_soak(ck: Check) -> None:
    """One shape for a while: burst against sustained, with NVML's clocks, power and throttle reasons."""
    run = ck.experiment("soak", "matmul-soak", {"duration_s": ck.sizes.soak_s}, ck.sizes.soak_s + 90)
    ck.judge(claims.soak(run))
    _fail_on_claims(ck, 1)


def step_health(ck: Check) -> None:
    """The health verdict (its doctor part is the doctor step's)."""
    bundle = ck.lab(
        "health",
        ["health", "--device", ck.args.device, "--quick", "--parts", ck.sizes.health_parts],
        240,
        ok_codes=(0, 1),
    )
    ck.judge(claims.health(bundle))
    if bundle is not None:
        ck.current.note = f"{bundle.get('verdict')} (parts {ck.sizes.health_parts}; the doctor is its own step)"  # type: ignore[union-attr]
    _fail_on_claims(ck, 1)


def step_copies(ck: Check) -> None:
    """Host↔GPU copies, pinned and pageable."""
    run = ck.experiment("copies", "interconnect", ck.sizes.copy, 120)
    rows = (run or {}).get("rows", [])
    ck.current.note = "; ".join(  # type: ignore[union-attr]
        f"{r['direction']} {r['memory']} {r['bytes'] / 2**20:g} MiB: {r['gbs']:.1f} GB/s"
        if isinstance(r.get("gbs"), (int, float))
        else f"{r.get('status')}: {r.get('reason')}"
        for r in rows
    )
    odd = [r for r in rows if r.get("status") not in ("ok", "unsupported")]
    if odd:
        ck.fail(f"{len(odd)} copies not ok: {odd[0].get('reason')}")


def step_pytest(ck: Check) -> None:
    """The test suite's GPU tests (``-m gpu``), with whatever the budget has left; one line per test in
    pytest.txt as it runs, so a run cut by the budget still says which tests passed and failed."""
    argv = [
        ck.python,
        "-m",
        "pytest",
        "-o",
        "addopts=-ra",  # one process: the box may lack pytest-xdist, and GPU tests share one card
        "-m",
        "gpu",
        "-v",
        "-p",
        "no:cacheprovider",
        f"--timeout={ck.sizes.pytest_timeout_s}",
    ]
    log = ck.out / "pytest.txt"
    try:
        code, printed = ck.command(argv, 600, "pytest -m gpu", stdout_to=log)
        cut = ""
    except StepTimeout as exc:
        code, printed, cut = -1, exc.printed, f" — {exc}"
    lines = printed.splitlines()
    _replace(log, "\n".join(lines[-PYTEST_TAIL:]) + "\n")
    counts = {word: sum(f" {word}" in line for line in lines) for word in ("PASSED", "FAILED", "ERROR", "SKIPPED")}
    failed = [line.split(" ")[0] for line in lines if " FAILED" in line or " ERROR" in line]
    ck.current.note = ", ".join(f"{n} {w.lower()}" for w, n in counts.items()) + cut  # type: ignore[union-attr]
    if failed:
        ck.current.note += " — failed: " + ", ".join(failed)  # type: ignore[union-attr]
    if code not in (0, 5):  # 5: nothing collected (every GPU test deselected)
        ck.fail(f"pytest exited {code}")


def _fail_on_claims(ck: Check, count: int) -> None:
    """A step fails when one of the claims it just judged failed."""
    bad = [c.claim for c in ck.claims[-count:] if c.verdict == claims.FAIL]
    if bad:
        ck.fail("claim failed: " + "; ".join(bad))


STEPS: dict[str, Callable[[Check], None]] = {
    "box": step_box,
    "doctor": step_doctor,
    "matmul": step_matmul,
    "search": step_search,
    "allocator": step_allocator,
    "train-memory": step_train_memory,
    "step-bench": step_step_bench,
    "stacks": step_stacks,
    "workload": step_workload,
    "soak": step_soak,
    "health": step_health,
    "copies": step_copies,
    "pytest": step_pytest,
}


def export(ck: Check) -> None:
    """Every run of the check as one runs file (always, also after a step failed or the budget ran out)."""
    target = ck.out / "runs.json"
    code = subprocess.run(
        [ck.python, "-m", "core", "runs", "export", "-o", str(target)],
        cwd=ROOT,
        env=ck.env,
        stdout=subprocess.DEVNULL,
        stderr=ck.log,
        timeout=RESERVE_S,
        check=False,
    ).returncode
    ok = code == 0 and target.is_file()
    ck.box["runs_file"] = f"{target.name} ({target.stat().st_size:,} bytes)" if ok else f"export exited {code}"


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    parser.add_argument("--device", default="cuda", help="cuda, cuda:N or cpu (a dry run at CPU sizes)")
    parser.add_argument("--only", default="", help=f"comma-separated steps to run: {', '.join(STEPS)}")
    parser.add_argument("--budget-s", type=float, default=480.0, help="the whole check's time budget [480]")
    parser.add_argument("--tiny", action="store_true", help="the smallest sizes (a dry run in seconds)")
    parser.add_argument("--out", default=os.environ.get("OUT") or "gpu-check", help="folder for the files [$OUT]")
    args = parser.parse_args(argv)
    args.steps = [s for s in args.only.split(",") if s] or list(STEPS)
    unknown = [s for s in args.steps if s not in STEPS]
    if unknown:
        parser.error(f"unknown step(s) {', '.join(unknown)}; the steps are {', '.join(STEPS)}")
    if args.device != "cpu" and not args.device.startswith("cuda"):
        parser.error(f"--device must be cuda, cuda:N or cpu, got {args.device!r}")
    if not 60 <= args.budget_s <= 3600:
        parser.error(f"--budget-s must be 60…3600, got {args.budget_s:g}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    ck = Check(args)
    signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        for name in args.steps:
            result = ck.current = StepResult(name)
            ck.results.append(result)
            begun = time.monotonic()
            result.verdict = "pass"
            try:
                STEPS[name](ck)
            except BudgetSpent as exc:
                result.verdict, result.note = "skipped", f"budget spent ({exc})"
            except StepTimeout as exc:
                ck.fail(str(exc))
            except KeyboardInterrupt:
                ck.fail("the check was stopped")
                raise
            except Exception as exc:  # noqa: BLE001 - a broken step is a finding, the check goes on
                ck.fail(f"{type(exc).__name__}: {exc}")
            result.seconds = time.monotonic() - begun
            ck.write()
    except KeyboardInterrupt:
        pass
    finally:
        ck.current = None
        try:
            export(ck)
        except Exception as exc:  # noqa: BLE001 - the summary is written whatever happened
            ck.box["runs_file"] = f"export failed: {exc}"
        ck.write()
        ck.close()
    print((ck.out / "summary.txt").read_text(encoding="utf-8"))
    failed = any(r.verdict == "fail" for r in ck.results) or any(c.verdict == claims.FAIL for c in ck.claims)
    return 1 if failed else 0


def _raise_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())

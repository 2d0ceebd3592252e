"""``allocator``: watch PyTorch's caching allocator step by step — seed 001's experiments, replayed.

A scenario is a list of named steps (allocate, free, move to CPU and back, empty_cache, matmul,
backward). After every step the run records what the allocator and the driver say — allocated,
reserved, peak, the driver's used memory (what nvidia-smi shows), process RSS and the
``memory_stats()`` counters — plus, on request, the segment map and the allocation history as JSON.
The allocator reads ``PYTORCH_CUDA_ALLOC_CONF`` once, so every run gets its own fresh worker with the
setting from the config, and every row says which setting the child really saw.

On a CPU there is no caching allocator: the lifecycle and custom scenarios run with RSS and the
bytes of the live tensors, which show that CPU memory goes back at once.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from core.experiment import ConfigError, Context, Experiment, Output, Progress
from core.hardware import memory
from core.measure import history
from core.memory.segments import segment_view
from core.text import first_line
from core.units import MIB, bytes_text

COLUMNS = 1024  # every tensor is (rows, 1024) fp32: 4 KiB a row, 256 rows a MiB
ROWS_PER_MIB = MIB // (COLUMNS * 4)
MATMUL_MIN_MIB = COLUMNS * COLUMNS * 4 // MIB  # ``a @ a[:1024]`` needs 1024 rows
MAX_SIZE_MIB = 2**20  # 1 TiB, beyond any device; the page caps sizes by free memory
MAX_STEPS = 64
MAX_HISTORY_ENTRIES = 100_000
SEED_BACKWARD_CLAIMS = {"y = 5*x; y.mean().backward()": 4.0, "(5*x).mean().backward()": 3.0}
ENV_KEYS = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")  # torch ≥ 2.9 reads the second first

Scenario = Literal["lifecycle", "backward-peak", "fragmentation", "custom"]
SCENARIOS: tuple[str, ...] = ("lifecycle", "backward-peak", "fragmentation", "custom")
GPU_ONLY_SCENARIOS = ("backward-peak", "fragmentation")

# op → argument kinds ("name" = a tensor name, "mib" = a size), and what it does (the composer's help)
OPS: dict[str, tuple[tuple[str, ...], str]] = {
    "alloc": (
        ("name", "mib"),
        "t = zeros(N MiB) on the device (re-using a name keeps the old tensor until the new one exists)",
    ),
    "alloc_grad": (("name", "mib"), "t = zeros(N MiB, requires_grad=True) on the device"),
    "alloc_cpu": (("name", "mib"), "t = zeros(N MiB) in CPU memory"),
    "free": (("name",), "del t (its .grad too)"),
    "to_cpu": (("name",), "t = t.to('cpu')"),
    "to_device": (("name",), "t = t.to(device)"),
    "empty_cache": ((), "torch.cuda.empty_cache(): hand cached, unused segments back to the driver"),
    "scale": (("name", "name"), "out = 5 * a (keeps the autograd graph)"),
    "matmul": (("name", "name"), "out = a @ a[:1024] (a ≥ 4 MiB; same size as a)"),
    "backward": (("name",), "t.mean().backward()"),
    "scale_backward": (("name",), "(5 * t).mean().backward() without keeping 5*t"),
    "reset_peak": ((), "torch.cuda.reset_peak_memory_stats()"),
}
ALLOC_CONF_KEYS = (
    "backend",
    "expandable_segments",
    "garbage_collection_threshold",
    "max_split_size_mb",
    "roundup_power2_divisions",
    "release_lock_on_cudamalloc",
    "pinned_use_cuda_host_register",
    "pinned_num_register_threads",
    "pinned_use_background_threads",
)
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,15}$")


class StepOutOfMemory(RuntimeError):
    """A step could not get its memory; the text says "out of memory", so the worker marks the run oom."""


@dataclass(frozen=True)
class Step:
    op: str
    args: tuple = ()
    label: str = ""  # what the x axis shows; built-in scenarios write it like the seed's code

    @property
    def text(self) -> str:
        return " ".join([self.op, *map(str, self.args)])

    @property
    def title(self) -> str:
        return self.label or self.text


def parse_step(text: str, position: int = 0) -> Step:
    """``"alloc a 256"`` → Step; a bad step raises ConfigError naming it and the rule it breaks."""
    where = f"step {position} {text.strip()!r}" if position else f"step {text.strip()!r}"
    parts = text.split()
    if not parts:
        raise ConfigError(f"{where}: empty step")
    op, raw = parts[0], parts[1:]
    if op not in OPS:
        raise ConfigError(f"{where}: unknown operation {op!r}; known: {', '.join(OPS)}")
    kinds = OPS[op][0]
    if len(raw) != len(kinds):
        usage = " ".join([op, *(("<MiB>" if k == "mib" else "<name>") for k in kinds)])
        raise ConfigError(f"{where}: expected `{usage}`")
    args: list[Any] = []
    for kind, value in zip(kinds, raw):
        if kind == "name":
            if not _NAME.match(value):
                raise ConfigError(f"{where}: {value!r} is not a tensor name (letters, digits, _; at most 16)")
            args.append(value)
        else:
            try:
                mib = int(value)
            except ValueError:
                raise ConfigError(f"{where}: size {value!r} is not a whole number of MiB") from None
            if not 1 <= mib <= MAX_SIZE_MIB:
                raise ConfigError(f"{where}: size must be between 1 and {MAX_SIZE_MIB} MiB, got {mib}")
            args.append(mib)
    return Step(op, tuple(args))


@dataclass
class _Planned:
    """What the validator knows about a named tensor without running anything."""

    mib: int
    on_device: bool
    requires_grad: bool
    leaf: bool
    graph_used: bool = False


def validate_steps(steps: list[Step]) -> int:
    """Walk the steps symbolically; raise ConfigError at the first one that cannot run.

    Returns an *estimate* of the most MiB the named tensors hold at once on the device (a re-used
    name counts twice while the new tensor is built), for the page's warning before a run.
    """
    if not steps:
        raise ConfigError("the scenario needs at least one step")
    if len(steps) > MAX_STEPS:
        raise ConfigError(f"at most {MAX_STEPS} steps, got {len(steps)}")
    live: dict[str, _Planned] = {}
    peak_mib = 0

    def need(i: int, step: Step, name: str) -> _Planned:
        if name not in live:
            known = ", ".join(sorted(live)) or "none"
            raise ConfigError(f"step {i} '{step.text}': no tensor named {name!r} (live tensors: {known})")
        return live[name]

    def device_mib() -> int:
        return sum(t.mib for t in live.values() if t.on_device)

    for i, step in enumerate(steps, 1):
        transient = 0
        if step.op in ("alloc", "alloc_grad", "alloc_cpu"):
            name, mib = step.args
            old = live.get(name)
            on_device = step.op != "alloc_cpu"
            transient = mib if on_device and old is not None and old.on_device else 0
            live[name] = _Planned(mib, on_device, step.op == "alloc_grad", leaf=True)
        elif step.op == "free":
            need(i, step, step.args[0])
            del live[step.args[0]]
        elif step.op in ("to_cpu", "to_device"):
            need(i, step, step.args[0]).on_device = step.op == "to_device"
        elif step.op in ("scale", "matmul"):
            out, src_name = step.args
            src = need(i, step, src_name)
            if step.op == "matmul" and src.mib < MATMUL_MIN_MIB:
                raise ConfigError(
                    f"step {i} '{step.text}': matmul needs {src_name!r} of at least "
                    f"{MATMUL_MIN_MIB} MiB (1024 rows), it has {src.mib} MiB"
                )
            live[out] = _Planned(src.mib, src.on_device, src.requires_grad, leaf=not src.requires_grad)
        elif step.op in ("backward", "scale_backward"):
            t = need(i, step, step.args[0])
            if not t.requires_grad:
                raise ConfigError(
                    f"step {i} '{step.text}': {step.args[0]!r} has no autograd graph — make it with "
                    f"alloc_grad, or with scale/matmul from such a tensor"
                )
            if step.op == "scale_backward" and not t.leaf:
                raise ConfigError(f"step {i} '{step.text}': scale_backward needs a leaf made with alloc_grad")
            if t.graph_used and not t.leaf:
                raise ConfigError(
                    f"step {i} '{step.text}': the graph of {step.args[0]!r} was already used by an "
                    f"earlier backward (PyTorch frees it); rebuild it with scale/matmul first"
                )
            t.graph_used = True
        peak_mib = max(peak_mib, device_mib() + transient)
    return peak_mib


def parse_alloc_conf(text: str) -> dict[str, str]:
    """Check a ``PYTORCH_CUDA_ALLOC_CONF`` value (``key:value,…``) so a typo fails here, not in the child."""
    settings: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition(":")
        key, value = key.strip(), value.strip()
        if not sep or not value:
            raise ConfigError(f"alloc_conf: {part!r} is not key:value")
        if key not in ALLOC_CONF_KEYS:
            raise ConfigError(f"alloc_conf: unknown key {key!r}; known: {', '.join(ALLOC_CONF_KEYS)}")
        if key == "backend" and value not in ("native", ASYNC_BACKEND):
            raise ConfigError(f"alloc_conf: backend must be native or {ASYNC_BACKEND}, got {value!r}")
        if key == "expandable_segments" and value not in ("True", "False"):
            raise ConfigError(f"alloc_conf: expandable_segments must be True or False, got {value!r}")
        if key == "garbage_collection_threshold":
            try:
                ok = 0.0 < float(value) < 1.0
            except ValueError:
                ok = False
            if not ok:
                raise ConfigError(
                    f"alloc_conf: garbage_collection_threshold must be between 0 and 1 (exclusive), got {value!r}"
                )
        if key == "max_split_size_mb" and (not value.isdigit() or int(value) <= 20):
            raise ConfigError(
                f"alloc_conf: max_split_size_mb must be a whole number above 20 (PyTorch's minimum), got {value!r}"
            )
        settings[key] = value
    return settings


@dataclass(frozen=True)
class AllocatorConfig:
    scenario: Scenario = field(default="lifecycle", metadata={"help": "scripted scenario"})
    size_mib: int = field(
        default=1024, metadata={"help": "tensor size in MiB for the built-in scenarios (the seed used 1 GiB)"}
    )
    steps: tuple[str, ...] = field(
        default=(), metadata={"help": "custom scenario steps, e.g. 'alloc a 256,alloc b 256,free a,empty_cache'"}
    )
    alloc_conf: str = field(
        default="", metadata={"help": "PYTORCH_CUDA_ALLOC_CONF for this run's fresh worker ('' = PyTorch's default)"}
    )
    segment_map: bool = field(default=True, metadata={"help": "record the segment map after every step (GPU)"})
    history_entries: int = field(
        default=0, metadata={"help": "record allocator history with this max_entries (0 = off; GPU)"}
    )

    def __post_init__(self) -> None:
        if self.scenario not in SCENARIOS:
            raise ConfigError(f"scenario must be one of {', '.join(SCENARIOS)}, got {self.scenario!r}")
        if not 1 <= self.size_mib <= MAX_SIZE_MIB:
            raise ConfigError(f"size_mib must be between 1 and {MAX_SIZE_MIB}, got {self.size_mib}")
        if self.scenario == "fragmentation" and (self.size_mib < 16 or self.size_mib % 8):
            raise ConfigError(
                f"fragmentation needs size_mib ≥ 16 and a multiple of 8 (eight equal pieces), got {self.size_mib}"
            )
        if self.steps and self.scenario != "custom":
            raise ConfigError("steps are only for the custom scenario")
        if not 0 <= self.history_entries <= MAX_HISTORY_ENTRIES:
            raise ConfigError(
                f"history_entries must be between 0 and {MAX_HISTORY_ENTRIES}, got {self.history_entries}"
            )
        parse_alloc_conf(self.alloc_conf)
        validate_steps(scenario_steps(self))


def scenario_steps(cfg: AllocatorConfig) -> list[Step]:
    """The steps a config runs; built-in scenarios carry the seed's code as their labels."""
    s = cfg.size_mib
    if cfg.scenario == "custom":
        return [parse_step(text, i) for i, text in enumerate(cfg.steps, 1)]
    if cfg.scenario == "lifecycle":
        return [
            Step("alloc", ("a", s), f"a = zeros({s} MiB)"),
            Step("alloc", ("b", s), f"b = zeros({s} MiB)"),
            Step("to_cpu", ("b",), "b = b.to('cpu')"),
            Step("alloc", ("c", s), f"c = zeros({s} MiB)"),
            Step("alloc", ("c", s), f"c = zeros({s} MiB) again"),
            Step("alloc", ("d", s), f"d = zeros({s} MiB)"),
            Step("free", ("d",), "del d"),
            Step("alloc_cpu", ("e", s), f"e = zeros({s} MiB, device='cpu')"),
            Step("to_device", ("e",), "e = e.to(device)"),
            Step("empty_cache", (), "empty_cache()"),
        ]
    if cfg.scenario == "backward-peak":
        return [
            Step("reset_peak", (), "A: reset peak"),
            Step("alloc_grad", ("x", s), f"A: x = zeros({s} MiB, requires_grad)"),
            Step("scale", ("y", "x"), "A: y = 5*x"),
            Step("backward", ("y",), "A: y.mean().backward()"),
            Step("free", ("y",), "A: del y"),
            Step("free", ("x",), "A: del x (and x.grad)"),
            Step("reset_peak", (), "B: reset peak"),
            Step("alloc_grad", ("x", s), f"B: x = zeros({s} MiB, requires_grad)"),
            Step("scale_backward", ("x",), "B: (5*x).mean().backward()"),
            Step("free", ("x",), "B: del x (and x.grad)"),
        ]
    piece = s // 8
    steps = [
        Step("alloc", ("big", s), f"big = zeros({s} MiB)"),
        Step("free", ("big",), "del big (segment stays cached)"),
    ]
    steps += [Step("alloc", (f"p{i}", piece), f"p{i} = zeros({piece} MiB)") for i in range(8)]
    steps += [Step("free", (f"p{i}",), f"del p{i}") for i in (0, 2, 4, 6)]
    steps += [
        Step("alloc", ("q", 2 * piece), f"q = zeros({2 * piece} MiB): no hole fits"),
        Step("empty_cache", (), "empty_cache()"),
    ]
    return steps


# The autograd arithmetic behind the backward-peak forms, in units of size(x): x, y = 5*x, the
# gradient of y (MeanBackward materialises grad/numel), and x.grad (MulBackward: grad_y * 5).
BACKWARD_FORMS = (
    {"form": "y = 5*x; y.mean().backward()", "phase": "A", "tensors": ("x", "y", "grad of y", "x.grad")},
    {"form": "(5*x).mean().backward()", "phase": "B", "tensors": ("x", "grad of 5*x", "x.grad")},
)

LIFECYCLE_SEED_CLAIMS = (  # what seed 001 read from nvidia-smi after each step (1 unit = the tensor size)
    "host +1 GB, device +1.7 GB (the 0.7 is PyTorch's own set-up)",
    "host unchanged, device +1 GB",
    "host +1 GB, device only −0.1 GB: copied, not freed",
    "host unchanged, device +0.1 GB: b's old place is re-used",
    "host unchanged, device +1 GB: the new c is built before the old one goes",
    "host unchanged, device unchanged: d lands in old c's place",
    "host unchanged, device unchanged: del frees nothing to the driver",
    "host +1 GB, device unchanged",
    "host −1 GB at once, device unchanged: e re-uses d's place",
    "(not in the seed) cached segments go back to the driver",
)


class _Workspace:
    """The named tensors of a running scenario and the operations on them."""

    def __init__(self, torch, device: str, host_guard: Callable[[int, str], None]) -> None:
        self.torch = torch
        self.device = device
        self.tensors: dict[str, Any] = {}
        self._guard = host_guard

    def _zeros(self, mib: int, device: str, requires_grad: bool = False):
        if device == "cpu":
            self._guard(mib * MIB, f"zeros({mib} MiB) on the CPU")
        return self.torch.zeros((mib * ROWS_PER_MIB, COLUMNS), device=device, requires_grad=requires_grad)

    def run(self, step: Step) -> str:
        """Do one step; returns a note when the step is a no-op here (e.g. to('cpu') on a CPU)."""
        t, op, a = self.tensors, step.op, step.args
        if op == "alloc":
            t[a[0]] = self._zeros(a[1], self.device)
        elif op == "alloc_grad":
            t[a[0]] = self._zeros(a[1], self.device, requires_grad=True)
        elif op == "alloc_cpu":
            t[a[0]] = self._zeros(a[1], "cpu")
        elif op == "free":
            del t[a[0]]
        elif op in ("to_cpu", "to_device"):
            target = "cpu" if op == "to_cpu" else self.device
            if t[a[0]].device.type == self.torch.device(target).type:
                return f"no-op: {a[0]} is already on {target}"
            if target == "cpu":
                self._guard(t[a[0]].untyped_storage().nbytes(), f"{a[0]}.to('cpu')")
            t[a[0]] = t[a[0]].to(target)
        elif op in ("scale", "matmul"):
            src = t[a[1]]
            if src.device.type == "cpu":
                self._guard(src.untyped_storage().nbytes(), step.text)
            t[a[0]] = 5 * src if op == "scale" else src @ src[:COLUMNS]
        elif op == "backward":
            self._guard_backward(t[a[0]], 2)
            t[a[0]].mean().backward()
        elif op == "scale_backward":
            self._guard_backward(t[a[0]], 3)
            (5 * t[a[0]]).mean().backward()
        elif op == "empty_cache":
            if not self.device.startswith("cuda"):
                return "no-op: the CPU has no cache to empty"
            self.torch.cuda.empty_cache()
        elif op == "reset_peak":
            if not self.device.startswith("cuda"):
                return "no-op: peak counters are CUDA-only"
            self.torch.cuda.reset_peak_memory_stats(self.device)
        return ""

    def _guard_backward(self, tensor, copies: int) -> None:
        if tensor.device.type == "cpu":
            self._guard(copies * tensor.untyped_storage().nbytes(), "backward on the CPU")

    def live_bytes(self) -> tuple[int, int]:
        """Bytes of the named tensors and their grads, (device, host), each storage counted once."""
        seen: dict[tuple, int] = {}
        for tensor in self.tensors.values():
            for x in (tensor, tensor.grad if tensor.is_leaf else None):
                if x is not None:
                    storage = x.untyped_storage()
                    seen[(x.device.type, storage.data_ptr())] = storage.nbytes()
        device = sum(n for (kind, _), n in seen.items() if kind != "cpu")
        return device, sum(n for (kind, _), n in seen.items() if kind == "cpu")


def _host_guard(nbytes: int, what: str) -> None:
    """Refuse a CPU allocation the host cannot give: RAM available less the lab's reserve, within the job's
    memory cap (:func:`core.hardware.memory.budget`).

    On a CPU an over-large request does not raise: the OS kills the process (or a neighbour). So
    the step stops here, honestly labelled, instead of being attempted.
    """
    room = memory.budget("cpu")
    if nbytes > room.bytes:
        raise StepOutOfMemory(
            f"out of memory (host): {what} needs {bytes_text(nbytes)} but {room.source} "
            f"(the OS would kill the process instead of raising)"
        )


def check_size(size_mib: int, free_bytes: int | None) -> None:
    """The page's cap: one tensor may not be larger than the device's free memory."""
    if free_bytes is not None and size_mib * MIB > free_bytes:
        raise ConfigError(
            f"size {size_mib} MiB is more than the {free_bytes // MIB} MiB free on this device "
            f"(the limit for one tensor)"
        )


def _max_rss_bytes() -> int:
    """The process's RSS high-water mark (Linux reports KiB): it catches a step's transient peak."""
    import resource
    import sys

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


# How a PYTORCH_CUDA_ALLOC_CONF key appears in the snapshot's "allocator_settings" (torch's
# memory_snapshot: PYTORCH_CUDA_ALLOC_CONF, max_split_size in bytes, garbage_collection_threshold,
# expandable_segments, pinned_num_register_threads, release_lock_on_cudamalloc,
# pinned_use_cuda_host_register, roundup_power2_divisions).
_REPORTED_AS = {
    "expandable_segments": ("expandable_segments", "bool"),
    "max_split_size_mb": ("max_split_size", "mib"),
    "garbage_collection_threshold": ("garbage_collection_threshold", "float"),
    "release_lock_on_cudamalloc": ("release_lock_on_cudamalloc", "bool"),
    "pinned_use_cuda_host_register": ("pinned_use_cuda_host_register", "bool"),
    "pinned_num_register_threads": ("pinned_num_register_threads", "int"),
}
ASYNC_BACKEND = "cudaMallocAsync"
ASYNC_NOTE = (
    "backend:cudaMallocAsync keeps no block list, so torch refuses memory snapshots with it ('Calling "
    "snapshot with backend:cudaMallocAsync is not meaningful'): no segment map, fragmentation numbers or "
    "allocation history in this run; allocated/reserved/peak and the driver's numbers are measured"
)


def settings_not_applied(requested: dict[str, str], backend: str | None, reported: dict | None) -> list[str]:
    """Each requested allocator setting the allocator itself does not report, in words.

    ``PYTORCH_ALLOC_CONF``/``PYTORCH_CUDA_ALLOC_CONF`` can be silently ignored (read too late, a typo, a
    wrapper that overrides it): the allocator's own report (``get_allocator_backend()`` and the
    snapshot's ``allocator_settings``) is what the run really used.
    """
    out = []
    if backend is not None and requested.get("backend", "native") != backend:
        out.append(f"backend: asked {requested.get('backend', 'native')}, the allocator runs {backend}")
    for key, value in requested.items():
        if key not in _REPORTED_AS or reported is None:
            continue
        name, kind = _REPORTED_AS[key]
        got = reported.get(name)
        want = {"bool": lambda v: v == "True", "int": int, "float": float, "mib": lambda v: int(v) * MIB}[kind](value)
        if got is None or (abs(float(got) - want) > 1e-9 if kind == "float" else got != want):
            out.append(f"{key}: asked {value}, the allocator reports {name}={got}")
    return out


def seen_setting() -> dict[str, str | None]:
    """The allocator setting this process really has in its environment."""
    return {key: os.environ.get(key) for key in ENV_KEYS}


def _setting_text(env: dict[str, str | None]) -> str:
    value = env.get("PYTORCH_ALLOC_CONF") or env.get("PYTORCH_CUDA_ALLOC_CONF")
    return value or "default"


class _Recorder:
    """Reads every counter after a step; CUDA-only fields are None on a CPU (not zero)."""

    def __init__(self, torch, ctx: Context, cfg: AllocatorConfig) -> None:
        import psutil

        self.torch, self.ctx, self.cfg = torch, ctx, cfg
        self.process = psutil.Process()
        self.setting = _setting_text(seen_setting())
        self._last_trace_us = -1
        self._trace_budget = cfg.history_entries
        # What the allocator itself says it runs with (the variable alone can be silently ignored).
        self.backend = torch.cuda.memory.get_allocator_backend() if ctx.is_cuda else None
        self.snapshots = self.backend != ASYNC_BACKEND
        self.reported_settings: dict | None = None

    def settings_report(self) -> dict:
        """For the run's meta: the backend and settings the allocator reported, and what it ignored."""
        if not self.ctx.is_cuda:
            return {}
        report = {
            "allocator_backend": self.backend,
            "allocator_settings_reported": self.reported_settings,
            "alloc_conf_not_applied": settings_not_applied(
                parse_alloc_conf(self.cfg.alloc_conf), self.backend, self.reported_settings
            ),
        }
        if not self.snapshots:
            report["snapshot_note"] = ASYNC_NOTE
        return report

    def start_history(self) -> None:
        if self.ctx.is_cuda and self.cfg.history_entries and self.snapshots:
            history.start(self.torch, self.cfg.history_entries)

    def stop_history(self) -> None:
        if self.ctx.is_cuda and self.cfg.history_entries and self.snapshots:
            history.stop(self.torch)

    def row(self, index: int, step: Step | None, ws: _Workspace, status: str = "ok", note: str = "") -> dict:
        device_bytes, host_bytes = ws.live_bytes()
        row = {
            "index": index,
            "step": f"{index}. {step.title}" if step else "0. start",
            "op": step.text if step else "",
            "status": status,
            "note": note,
            "alloc_conf_seen": self.setting,
            "rss_bytes": self.process.memory_info().rss,
            "max_rss_bytes": _max_rss_bytes(),
            "live_device_bytes": device_bytes,
            "live_host_bytes": host_bytes,
        }
        row.update(self._cuda_fields() if self.ctx.is_cuda else dict.fromkeys(CUDA_FIELDS))
        return row

    def _cuda_fields(self) -> dict:
        cuda, dev = self.torch.cuda, self.torch.device(self.ctx.device)
        cuda.synchronize(dev)
        free, total = cuda.mem_get_info(dev)
        stats = cuda.memory_stats(dev)
        out = {
            "allocated_bytes": cuda.memory_allocated(dev),
            "reserved_bytes": cuda.memory_reserved(dev),
            "peak_allocated_bytes": cuda.max_memory_allocated(dev),
            "driver_used_bytes": total - free,
            "driver_total_bytes": total,
            "segments": stats.get("segment.all.current"),
            "alloc_count": stats.get("allocation.all.allocated"),
            "free_count": stats.get("allocation.all.freed"),
            "inactive_split_bytes": stats.get("inactive_split_bytes.all.current"),
            "alloc_retries": stats.get("num_alloc_retries"),
            "ooms": stats.get("num_ooms"),
            "device_alloc_count": stats.get("num_device_alloc"),
            "device_free_count": stats.get("num_device_free"),
        }
        if not self.snapshots:
            return out | dict.fromkeys(
                ("largest_free_block_bytes", "free_in_reserved_bytes", "fragmentation_ratio", "segment_map", "trace")
            )
        snapshot = cuda.memory._snapshot()
        if self.reported_settings is None:
            self.reported_settings = snapshot.get("allocator_settings")
        segments = [s for s in snapshot.get("segments", []) if s.get("device", dev.index or 0) == (dev.index or 0)]
        compact, numbers = segment_view(segments)
        out.update(numbers)
        out["segment_map"] = compact if self.cfg.segment_map else None
        out["trace"] = self._new_trace(snapshot) if self.cfg.history_entries else None
        return out

    def _new_trace(self, snapshot: dict) -> list[list]:
        """History entries since the previous step as [time_us, action, size], within the run's budget."""
        traces = snapshot.get("device_traces") or [[]]
        index = self.torch.device(self.ctx.device).index or 0
        fresh = [e for e in (traces[index] if index < len(traces) else []) if e.get("time_us", 0) > self._last_trace_us]
        if fresh:
            self._last_trace_us = max(e.get("time_us", 0) for e in fresh)
        kept = fresh[: max(0, self._trace_budget)]
        self._trace_budget -= len(kept)
        return [[e.get("time_us", 0), e.get("action", ""), e.get("size", 0)] for e in kept]


CUDA_FIELDS = (
    "allocated_bytes",
    "reserved_bytes",
    "peak_allocated_bytes",
    "driver_used_bytes",
    "driver_total_bytes",
    "segments",
    "alloc_count",
    "free_count",
    "inactive_split_bytes",
    "alloc_retries",
    "ooms",
    "device_alloc_count",
    "device_free_count",
    "largest_free_block_bytes",
    "free_in_reserved_bytes",
    "fragmentation_ratio",
    "segment_map",
    "trace",
)


def _is_oom(exc: BaseException) -> bool:
    """The lab's own host refusal, or any allocation failure torch or a CUDA library reports."""
    return isinstance(exc, StepOutOfMemory) or memory.allocation_failure(exc) is not None


def _backward_summary(rows: list[dict], x_bytes: int) -> list[dict]:
    """Peak over each form (allocated at its reset → highest peak) as a multiple of size(x)."""
    out = []
    for form in BACKWARD_FORMS:
        phase = [r for r in rows if r["step"].split(". ", 1)[-1].startswith(form["phase"] + ":")]
        if not phase or phase[0]["allocated_bytes"] is None:
            continue
        base = phase[0]["allocated_bytes"]
        peak = max(r["peak_allocated_bytes"] for r in phase) - base
        out.append(
            {
                "form": form["form"],
                "x_bytes": x_bytes,
                "peak_bytes": peak,
                "peak_over_x": peak / x_bytes,
                "seed_claim_over_x": SEED_BACKWARD_CLAIMS[form["form"]],
                "autograd_count_over_x": len(form["tensors"]),
                "autograd_tensors": ", ".join(form["tensors"]),
            }
        )
    return out


def run(cfg: AllocatorConfig, ctx: Context):
    import torch

    if not ctx.is_cuda and cfg.scenario in GPU_ONLY_SCENARIOS:
        raise ctx.unsupported(
            f"the {cfg.scenario} scenario reads the CUDA caching allocator's counters "
            f"(memory_allocated, max_memory_allocated, memory_snapshot); a CPU has none — "
            f"run lifecycle or custom here"
        )
    steps = scenario_steps(cfg)
    ctx.check_fits(validate_steps(steps) * MIB, f"the {cfg.scenario} scenario (its tensors at their largest)")
    recorder = _Recorder(torch, ctx, cfg)
    ws = _Workspace(torch, ctx.device, _host_guard)
    if ctx.is_cuda:
        torch.cuda.init()  # the context exists before the first row, so step 1 shows only its tensor
        torch.cuda.reset_peak_memory_stats(ctx.device)
    recorder.start_history()
    total = len(steps)
    baseline = "baseline" + (" (CUDA context created)" if ctx.is_cuda else "")
    rows = [recorder.row(0, None, ws, note=baseline + ("" if recorder.snapshots else f"; {ASYNC_NOTE}"))]
    yield Progress(0, total, "baseline", rows=(rows[0],))
    try:
        for i, step in enumerate(steps, 1):
            try:
                note = ws.run(step)
            except BaseException as exc:  # noqa: BLE001 - only out-of-memory is turned into a stop
                if not _is_oom(exc):
                    raise
                first = first_line(exc, limit=10_000)
                row = recorder.row(i, step, ws, status="oom", note=first)
                yield Progress(i, total, f"out of memory at step {i}", rows=(row,))
                raise StepOutOfMemory(
                    f"out of memory at step {i}/{total} '{step.title}', the scenario stopped there — {first}"
                ) from None
            row = recorder.row(i, step, ws, note=note)
            if cfg.scenario == "lifecycle":
                row["seed_claim"] = LIFECYCLE_SEED_CLAIMS[i - 1]
            rows.append(row)
            yield Progress(i, total, step.title, rows=(row,))
    finally:
        recorder.stop_history()
        ws.tensors.clear()
    meta: dict = {
        "scenario": cfg.scenario,
        "steps": [s.text for s in steps],
        "alloc_conf_requested": cfg.alloc_conf,
        "alloc_conf_seen": recorder.setting,
        "alloc_conf_env": seen_setting(),
        "pid": os.getpid(),
        "planned_peak_device_mib_estimate": validate_steps(steps),
        **recorder.settings_report(),
    }
    if cfg.scenario == "backward-peak":
        meta["backward_peak"] = _backward_summary(rows, cfg.size_mib * MIB)
    return Output(rows=rows, meta=meta)


def worker_env(cfg: AllocatorConfig) -> dict[str, str]:
    """Both names torch reads, set to the run's setting ('' = default, overriding the parent's)."""
    return {key: cfg.alloc_conf for key in ENV_KEYS}


EXPERIMENTS = [
    Experiment(
        name="allocator",
        title="Allocator lab",
        config_type=AllocatorConfig,
        run=run,
        description=__doc__.splitlines()[0],
        fresh_process=True,
        worker_env=worker_env,
    )
]

"""The allocator lab's step language and its interpreter: ``alloc a 256``, ``free a``, ``matmul c a`` ….

A scenario is a list of named steps on named tensors. :func:`parse_step` reads one (a bad step is a
:class:`~core.errors.ConfigError` naming the rule it breaks), :func:`validate_steps` walks a list
symbolically — no torch — so a scenario that cannot run is refused before a worker starts, and
:class:`Workspace` runs the steps on a device. The ``allocator`` experiment records what the allocator
says after each step (:mod:`core.experiments.allocator`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from core.errors import ConfigError
from core.units import MIB

COLUMNS = 1024  # every tensor is (rows, 1024) fp32: 4 KiB a row, 256 rows a MiB
ROWS_PER_MIB = MIB // (COLUMNS * 4)
MATMUL_MIN_MIB = COLUMNS * COLUMNS * 4 // MIB  # ``a @ a[:1024]`` needs 1024 rows
MAX_SIZE_MIB = 2**20  # 1 TiB, beyond any device; the page caps sizes by free memory
MAX_STEPS = 64

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
            _backward(i, step, need(i, step, step.args[0]))
        peak_mib = max(peak_mib, sum(t.mib for t in live.values() if t.on_device) + transient)
    return peak_mib


def _backward(i: int, step: Step, t: _Planned) -> None:
    """A backward through ``t`` (step ``i``) as PyTorch would refuse it: no graph, a scale_backward of a tensor
    that is no leaf, or a graph an earlier backward freed; else its graph is used from now on."""
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


class Workspace:
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

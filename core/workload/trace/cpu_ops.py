"""The host side of a trace as columns: CPU operators, annotations, Python functions and runtime calls.

What :mod:`core.workload.trace.host_gaps` and :mod:`core.workload.trace.ops` read: each event's start and end (µs since the
trace's origin, as the GPU activities), its thread, its kind (:data:`OP`, :data:`ANNOTATION`, :data:`PYTHON`,
:data:`RUNTIME`), its name, its ``External id`` and ``correlation`` (-1 where absent), and, for the operators
whose FLOPs or bytes can be counted (:data:`SHAPED`), the text of its recorded ``Input Dims``, ``Input type`` and
``Concrete Inputs``; for any operator its ``Call stack`` where recorded. Kept bounded as the GPU columns are:
typed arrays of numbers (8 bytes each), names, shapes and stacks interned and cut to ``name_chars``, at most
``trace_names`` distinct of each: past that, a name is :data:`OVER_CAP` and shapes or stacks are not kept (both
counted in the trace's quirks). No Python object per event outlives its batch.
"""

from __future__ import annotations

import re
from array import array
from dataclasses import dataclass, field

import msgspec
import numpy as np

from core.intake import cut_name
from core.limits import LIMITS

OP, ANNOTATION, PYTHON, RUNTIME = range(4)
CPU_KINDS = {"cpu_op": OP, "operator": OP, "user_annotation": ANNOTATION, "python_function": PYTHON}
OVER_CAP = "(a name past the trace_names limit)"
# Operators whose FLOPs and bytes their recorded shapes give (core/workload/trace/op_flops.py): their shapes are kept.
SHAPED = re.compile(
    r"^aten::(mm|addmm|bmm|baddbmm|matmul|linear|_scaled_dot_product\w*|scaled_dot_product_attention|"
    r"_flash_attention_(forward|backward)|_efficient_attention_(forward|backward)|"
    r"convolution|_convolution|conv\dd|cudnn_convolution|miopen_convolution|convolution_backward)$"
)
SHAPES_OVER_CAP = "operators whose shapes were not kept (more distinct shapes than the trace_names limit)"
STACKS_OVER_CAP = "operators whose call stack was not kept (more distinct stacks than the trace_names limit)"


@dataclass
class CpuOps:
    """Every host event of a trace as arrays (µs since the trace's origin); ``shape`` and ``stack`` index
    ``shapes`` and ``stacks`` (-1 where none was kept)."""

    start: np.ndarray
    end: np.ndarray
    tid: np.ndarray
    kind: np.ndarray  # OP | ANNOTATION | PYTHON | RUNTIME
    name: np.ndarray  # index into names
    external: np.ndarray  # External id, -1 where absent
    correlation: np.ndarray  # runtime calls' correlation id, -1 where absent
    shape: np.ndarray
    stack: np.ndarray
    names: list[str]
    shapes: list[tuple[str, str, str]]  # (Input Dims, Input type, Concrete Inputs) as JSON text
    stacks: list[str]

    @classmethod
    def empty(cls) -> CpuOps:
        return _Columns().finish()


def _text(raw) -> str:
    """A raw JSON value (msgspec.Raw) as text, cut to ``name_chars``; empty where absent."""
    if raw is None or not len(raw):
        return ""
    return cut_name(bytes(raw).decode("utf-8", "replace"))


def _string(raw) -> str | None:
    """A raw JSON string's text, cut to ``name_chars`` (read no further than that); None for another value."""
    if raw is None or len(raw) < 3 or bytes(memoryview(raw)[:1]) != b'"':
        return None
    head = bytes(memoryview(raw)[: 4 * LIMITS.name_chars + 2])
    try:
        text = msgspec.json.decode(head if len(head) == len(raw) else head + b'"')
    except msgspec.DecodeError:
        return None
    return cut_name(text) if type(text) is str and text else None


def _intern(table: dict, key) -> int:
    """``key``'s number in ``table`` (numbered as first seen), or -1 once the table is full."""
    at = table.get(key)
    if at is None:
        if len(table) >= LIMITS.trace_names:
            return -1
        at = table[key] = len(table)
    return at


@dataclass
class _Columns:
    """The collector the trace reader feeds, one host event at a time."""

    start: array = field(default_factory=lambda: array("d"))
    end: array = field(default_factory=lambda: array("d"))
    tid: array = field(default_factory=lambda: array("q"))
    kind: array = field(default_factory=lambda: array("b"))
    name: array = field(default_factory=lambda: array("q"))
    external: array = field(default_factory=lambda: array("q"))
    correlation: array = field(default_factory=lambda: array("q"))
    shape: array = field(default_factory=lambda: array("q"))
    stack: array = field(default_factory=lambda: array("q"))
    names: dict[str, int] = field(default_factory=dict)
    shapes: dict[tuple[str, str, str], int] = field(default_factory=dict)
    stacks: dict[str, int] = field(default_factory=dict)
    shaped_names: dict[int, bool] = field(default_factory=dict)
    dropped: dict[str, int] = field(default_factory=dict)
    cut: int = 0

    def add(self, kind: int, ts: float, end: float, tid: int, name: str, external, correlation, args) -> None:
        n = self.names.get(name)
        if n is None:
            if len(name) > LIMITS.name_chars:
                self.cut += 1
            cut = cut_name(name)
            n = _intern(self.names, cut)
            if n < 0:
                n = self.names.setdefault(OVER_CAP, len(self.names))
                self.dropped[OVER_CAP] = self.dropped.get(OVER_CAP, 0) + 1
        self.start.append(ts)
        self.end.append(end)
        self.tid.append(tid)
        self.kind.append(kind)
        self.name.append(n)
        self.external.append(-1 if external is None else external)
        self.correlation.append(-1 if correlation is None else correlation)
        shape = stack = -1
        if args is not None and kind == OP:
            shaped = self.shaped_names.get(n)
            if shaped is None:
                shaped = self.shaped_names[n] = bool(SHAPED.match(name))
            if shaped and len(args.dims):
                shape = _intern(self.shapes, (_text(args.dims), _text(args.types), _text(args.concrete)))
                if shape < 0:
                    self.dropped[SHAPES_OVER_CAP] = self.dropped.get(SHAPES_OVER_CAP, 0) + 1
            if (text := _string(args.stack)) is not None:
                stack = _intern(self.stacks, text)
                if stack < 0:
                    self.dropped[STACKS_OVER_CAP] = self.dropped.get(STACKS_OVER_CAP, 0) + 1
        self.shape.append(shape)
        self.stack.append(stack)

    def finish(self) -> CpuOps:
        def col(a: array, dtype) -> np.ndarray:
            return np.frombuffer(a, dtype).astype(np.int64 if dtype == np.int8 else dtype, copy=True)

        names = list(self.names)
        return CpuOps(
            start=col(self.start, np.float64),
            end=col(self.end, np.float64),
            tid=col(self.tid, np.int64),
            kind=col(self.kind, np.int8),
            name=col(self.name, np.int64),
            external=col(self.external, np.int64),
            correlation=col(self.correlation, np.int64),
            shape=col(self.shape, np.int64),
            stack=col(self.stack, np.int64),
            names=names,
            shapes=list(self.shapes),
            stacks=list(self.stacks),
        )

"""A memory snapshot's stack frames: which are shown (the recorder's, the allocator's and the interpreter's are not,
as in torch's memory_viz), the one line that names an allocation site, and a stored stack's Python frames apart from
its C++ ones. Plain text and regular expressions: the command that prints a snapshot's report reads its stored
stacks with these, without the analysis (and its numpy) the import runs in the worker."""

from __future__ import annotations

import re

Frame = tuple[str, int, str]  # (filename, line, function)
SEP = re.compile(r"[\\/]+")  # a path's separators, Windows' too


# Frames of the recorder, the allocator and the interpreter, which every stack recorded with C++ frames
# (``_record_memory_history()``'s default, stacks="all") carries: torch's memory_viz drops the same names
# (``torch/cuda/_memory_viz.py``: ``_frame_filter``), and the caching allocator's own frames say nothing about
# who asked for the memory either. Hidden from every stack shown, never used to name a site.
HIDDEN_NAMES = (
    "unwind::unwind",
    "CapturedTraceback::gather",
    "gather_with_cpp",
    "_start",
    "__libc_start_main",
    "PyEval_",
    "PyObject_",
    "PyFunction_",
    "CUDACachingAllocator",
)
HIDDEN_FILES = (
    "core/boxing",
    "/Register",
    "/Redispatch",
    "pythonrun.c",
    "Modules/main.c",
    "Objects/call.c",
    "Objects/methodobject.c",
    "pycore_ceval.h",
    "ceval.c",
    "cpython/abstract.h",
)
# C++ plumbing between an operator and the allocator (dispatch, output allocation, tensor teardown): shown,
# but a C++-only stack is named by the first frame past them.
PLUMBING_NAMES = (
    "c10::impl::",
    "c10::Dispatcher",
    "c10::KernelFunction",
    "c10::intrusive_ptr",
    "c10::StorageImpl",
    "c10::TensorImpl::~TensorImpl",
    "THPVariable_",
    "at::_ops::",
    "at::detail::empty",
    "at::empty",
    "at::TensorIteratorBase::",
    "at::(anonymous namespace)::",
    "at::meta::",
)
_PY_API = re.compile(r"_?Py[A-Za-z]*_")  # the interpreter's C API (PyEval_…, _PyFunction_…, Py_RunMain)
_AUTOGRAD_NODE = re.compile(r"torch::autograd::generated::(\w+)::apply")


def hidden_frame(filename: str, name: str) -> bool:
    """A recorder, allocator or interpreter frame (memory_viz's filter, plus the caching allocator)."""
    return (
        any(part in name for part in HIDDEN_NAMES)
        or any(part in filename for part in HIDDEN_FILES)
        or _PY_API.match(name) is not None
    )


def shown_stack(stack: tuple[Frame, ...]) -> tuple[Frame, ...]:
    """A stack without its hidden frames (a stack of Python frames only is unchanged)."""
    return tuple(f for f in stack if not hidden_frame(f[0], f[2]))


def is_python_frame(frame: Frame) -> bool:
    path = frame[0]
    return path.endswith((".py", ".pyw")) or (path.startswith("<") and path.endswith(">"))


def _user_python(path: str) -> bool:
    return (
        path.endswith((".py", ".pyw"))
        and "/torch/" not in path
        and "/lib/python" not in path
        and "/site-packages/" not in path
        and "/torchinductor_" not in path  # code torch.compile generated
    )


def _cpp_name(name: str) -> str:
    """A C++ frame's function without its argument list (``at::native::div(at::Tensor const&, …)`` → ``at::native::div``)."""
    depth, cut = 0, len(name)
    for i in range(len(name) - 1, -1, -1):  # the last top-level parenthesis group is the argument list
        if name[i] == ")":
            depth += 1
        elif name[i] == "(":
            depth -= 1
            if depth == 0:
                cut = i
                break
    return name[:cut] or name


def frame_text(frame: Frame) -> str:
    filename, line, name = frame
    return f"{SEP.sub('/', filename)}:{line} {name}"


def site_label(stack: tuple[Frame, ...]) -> str:
    """A stack in one line. The innermost Python frame of the user's code (outside torch, the standard library,
    site-packages and torch.compile's generated code); else the innermost Python frame; a stack with no Python
    frame (an autograd engine thread) by its first frame past the recorder, allocator and dispatch plumbing,
    with the autograd node it runs in. Recorder, allocator and interpreter frames never name a site."""
    if not stack:
        return "(no stack recorded)"
    shown = [(SEP.sub("/", f[0]), f[1], f[2]) for f in shown_stack(stack)]
    python = [f for f in shown if is_python_frame(f)]
    if python or not shown:  # the user's innermost line, else the innermost Python one, else the recorder's own
        path, line, name = next((f for f in python if _user_python(f[0])), python[0]) if python else stack[0]
        return f"{SEP.sub('/', path).rsplit('/', 1)[-1]}:{line} {name}"
    first = next((f for f in shown if not any(part in f[2] for part in PLUMBING_NAMES)), shown[0])
    label = _cpp_name(first[2])
    node = next((m.group(1) for f in shown if (m := _AUTOGRAD_NODE.search(f[2]))), None)
    if node and node not in label:
        label += f" in {node}"
    return label


_FRAME_TEXT = re.compile(r"^(.*?):(-?\d+) (.*)$")


def parse_frame(text: str) -> Frame:
    m = _FRAME_TEXT.match(text)
    return (m.group(1), int(m.group(2)), m.group(3)) if m else ("", 0, text)


def python_and_cpp(stack: list[str]) -> tuple[list[str], list[str]]:
    """A stored stack's frames (``"file:line name"``, innermost first) as its Python frames and its C++ ones, each in
    their order: a stack recorded with C++ frames starts with a score of them (the allocator, the dispatcher), and a
    reader looks for the Python line that asked for the memory, so every view lists the Python frames first."""
    frames = [(text, is_python_frame(parse_frame(text))) for text in stack]
    return [t for t, python in frames if python], [t for t, python in frames if not python]

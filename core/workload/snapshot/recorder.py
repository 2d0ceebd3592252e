"""Record a memory snapshot of your own training, with safe defaults.

In a script::

    from core.workload.snapshot.recorder import record_memory

    with record_memory("snapshot.pickle"):
        train()          # the snapshot is written when the block ends, also when it raises (an OOM)

From a shell: ``python -m core record -o snapshot.pickle -- python train.py --epochs 1`` (runs the script
under :func:`record_memory` in its own interpreter; ``-m module`` and ``-c code`` work too).

Defaults, and why: Python stacks only (``stacks="all"`` adds C++ frames and has made one dump take 461 s
against 4 s), stacks of allocations only (a free's stack is not what anyone asks about), at most
100,000 events kept (``max_entries`` is unbounded by default; each event costs a few KB), pickle
protocol 4 (protocol 5, Python 3.14's default, breaks older readers). Without CUDA nothing is recorded:
a line on stderr says so and the script runs unchanged.
"""

from __future__ import annotations

import os
import pickle
import runpy
import signal
import stat
import sys
import tempfile
import threading
import traceback
from contextlib import contextmanager
from pathlib import Path

from core.units import bytes_text

DEFAULT_MAX_ENTRIES = 100_000
PICKLE_PROTOCOL = 4
PREFIX = "gpulab record:"


def _say(text: str) -> None:
    print(f"{PREFIX} {text}", file=sys.stderr, flush=True)


def output_problem(path: str | os.PathLike) -> str | None:
    """Why ``path`` cannot receive the snapshot (checked before anything runs); None when it can.

    The snapshot is written beside it and renamed over it, so the folder must exist and be writable, and
    an existing ``path`` must be a regular file: a folder, a device, a pipe or a socket is never replaced."""
    path = Path(path)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        return f"{path}: cannot be read ({exc.strerror or exc})"
    if mode is not None and stat.S_ISDIR(mode):
        return f"{path} is a folder; give the snapshot's file name, e.g. {path / 'snapshot.pickle'}"
    if mode is not None and not stat.S_ISREG(mode):
        return f"{path} exists and is not a regular file (a device, a pipe or a socket); record never writes over one"
    folder = path.absolute().parent
    if not folder.is_dir():
        return f"{path}: the folder {folder} does not exist"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"{path}: the folder {folder} is not writable"
    return None


class Terminated(BaseException):
    """SIGTERM reached the recorded program: it stops like on Ctrl-C, and its snapshot is written."""


@contextmanager
def _signals_held():
    """While the snapshot is written, a second Ctrl-C or SIGTERM does not cut the dump short."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


@contextmanager
def record_memory(
    path: str | os.PathLike = "snapshot.pickle", *, max_entries: int = DEFAULT_MAX_ENTRIES, stacks: str = "python"
):
    """Record the CUDA caching allocator's history while the block runs; write the snapshot when it ends.

    Yields the path the snapshot will be written to, or None where CUDA is unavailable.
    """
    import torch

    if stacks not in ("python", "all"):
        raise ValueError(f"stacks must be 'python' or 'all', got {stacks!r}")
    problem = output_problem(path)
    if problem:
        raise ValueError(problem)
    if not torch.cuda.is_available():
        _say(
            f"CUDA is not available here (torch {torch.__version__}); no memory snapshot is recorded, "
            f"the program runs unchanged"
        )
        yield None
        return
    path = Path(path)
    torch.cuda.memory._record_memory_history(enabled="all", context="alloc", stacks=stacks, max_entries=max_entries)
    _say(f"recording CUDA memory history (max {max_entries:,} events, {stacks} stacks) → {path}")
    try:
        yield path
    finally:
        with _signals_held():
            try:
                snapshot = torch.cuda.memory._snapshot()
                partial = path.with_name(f".{path.name}.partial")
                with open(partial, "wb") as fh:
                    pickle.dump(snapshot, fh, protocol=PICKLE_PROTOCOL)
                problem = output_problem(path)  # something took the name while the program ran
                if problem:
                    raise OSError(f"{problem}; the snapshot is kept in {partial}")
                partial.replace(path)
                events = sum(len(t) for t in snapshot.get("device_traces", []))
                _say(
                    f"wrote {path} ({bytes_text(path.stat().st_size)}, {events:,} events); "
                    f"read it with: python -m core snapshot {path}"
                )
            finally:
                torch.cuda.memory._record_memory_history(enabled=None)


def _run_program(args: list[str]) -> int:
    """Run ``script.py args`` / ``-m module args`` / ``-c code args`` as ``python`` would; its exit code."""
    if not args:
        _say("nothing to run: give a script, -m module or -c code")
        return 2
    try:
        if args[0] == "-m" and len(args) > 1:
            sys.argv = [args[1], *args[2:]]
            runpy.run_module(args[1], run_name="__main__", alter_sys=True)
        elif args[0] == "-c" and len(args) > 1:
            sys.argv = ["-c", *args[2:]]
            with tempfile.TemporaryDirectory(prefix="gpulab-record-") as folder:
                program = Path(folder) / "program.py"
                program.write_text(args[1], encoding="utf-8")
                runpy.run_path(str(program), run_name="__main__")
        else:
            script = os.path.abspath(args[0])
            sys.argv = list(args)
            sys.path[0] = os.path.dirname(script)
            runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        code = exc.code
        if code is None or isinstance(code, int):
            return code or 0
        print(code, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        traceback.print_exc()
        return 128 + signal.SIGINT
    except Terminated:
        _say("stopped by SIGTERM")
        return 128 + signal.SIGTERM
    except BaseException:  # noqa: BLE001 - the program's error is reported as python would, then its snapshot is kept
        traceback.print_exc()
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m core.workload.snapshot.recorder --output P [--max-entries N] [--stacks S] -- PROGRAM ARGS``."""
    import argparse

    argv = list(sys.argv[1:] if argv is None else argv)
    split = argv.index("--") if "--" in argv else len(argv)
    parser = argparse.ArgumentParser(prog="python -m core.workload.snapshot.recorder")
    parser.add_argument("--output", default="snapshot.pickle")
    parser.add_argument("--max-entries", type=int, default=DEFAULT_MAX_ENTRIES)
    parser.add_argument("--stacks", default="python", choices=("python", "all"))
    opts = parser.parse_args(argv[:split])
    _stop_once_on_signals()
    code = 0
    try:
        with record_memory(opts.output, max_entries=opts.max_entries, stacks=opts.stacks):
            code = _run_program(argv[split + 1 :])
    except (OSError, ValueError) as exc:
        _say(f"error: the snapshot was not written: {exc}")
        return code or 1  # the program's own failure first; else this one
    return code


def _stop_once_on_signals() -> None:
    """Ctrl-C reaches both ``record`` and this program (one process group), and ``record`` forwards what it
    gets: the first SIGINT or SIGTERM stops the program, later ones are ignored so the snapshot is written."""
    stopping = False

    def stop(signum, frame) -> None:
        nonlocal stopping
        if stopping:
            return
        stopping = True
        if signum == signal.SIGTERM:
            raise Terminated()
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)


def run_recorded(
    command: list[str], output: str, *, max_entries: int = DEFAULT_MAX_ENTRIES, stacks: str = "python"
) -> int:
    """``python -m core record``: run a Python command in its own interpreter under :func:`record_memory`."""
    import subprocess

    if not command:
        print("error: give the command to run after --, e.g. -- python train.py", file=sys.stderr)
        return 2
    if not Path(command[0]).name.startswith("python"):
        print(
            f"error: record runs a Python program (`-- python train.py …`), got {command[0]!r}; for other launchers "
            f"(torchrun, accelerate) wrap your training in core.workload.snapshot.recorder.record_memory",
            file=sys.stderr,
        )
        return 2
    if max_entries < 1:
        print(f"error: --max-entries must be at least 1, got {max_entries}", file=sys.stderr)
        return 2
    problem = output_problem(output)
    if problem:
        print(f"error: -o {problem}", file=sys.stderr)
        return 2
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    args = [
        command[0],
        "-m",
        "core.workload.snapshot.recorder",
        "--output",
        os.path.abspath(output),
        "--max-entries",
        str(max_entries),
        "--stacks",
        stacks,
        "--",
        *command[1:],
    ]
    try:
        child = subprocess.Popen(args, env=env)
    except OSError as exc:
        print(f"error: cannot run {command[0]!r}: {exc.strerror or exc}", file=sys.stderr)
        return 2

    def forward(signum, frame) -> None:  # the program stops and writes its snapshot; record waits for it
        try:
            child.send_signal(signum)
        except OSError:
            pass

    saved = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        code = child.wait()
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main())

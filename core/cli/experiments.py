"""One sub-command per experiment, generated from its config dataclass.

One option per field; tuples take comma lists; ``field(metadata={"help": ..., "cli": ...})`` names
and documents them. The run is submitted to the same :class:`~core.jobs.JobManager` the pages use
and printed as the stored :class:`~core.result.RunResult`.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import signal
import sys
import typing
from collections.abc import Callable
from typing import Literal

from core import registry
from core.cli.output import open_store, print_run
from core.errors import ConfigError
from core.experiment import Experiment
from core.result import RunResult
from core.text import MAX_LABEL_CHARS, terminal_text

ORDER = 100


def register(sub, common) -> None:
    command = getattr(common, "command", None)
    if command in sub.choices:
        return  # another group's command (this group registers last): no experiment module is imported
    try:
        exp = registry.get(command or "")  # running one experiment: import only its module (the planner needs no torch)
    except ConfigError:  # --help, or a command nobody has: every experiment listed (their modules import no torch)
        for e in registry.listing():
            sub.add_parser(e.name, parents=[common], description=e.description, **_listed(e.title, e.command))
        return
    p = sub.add_parser(exp.name, parents=[common], description=exp.description, **_listed(exp.title, exp.command))
    p.add_argument(
        "--device",
        default="auto",
        help="auto (first GPU, else CPU), cpu, cuda, cuda:N, or all (every GPU at once, one run)",
    )
    p.add_argument("--no-save", action="store_true", help="do not store the run")
    p.add_argument(
        "--timeout",
        type=seconds,
        help="wall-clock limit in seconds, counted from when the worker "
        "takes the job (a wait for the device lock counts)",
    )
    p.add_argument("--name", default="", help=f"a label for the stored run (at most {MAX_LABEL_CHARS} characters)")
    add_config_options(p, exp.config_type)
    p.set_defaults(handler=lambda args, exp=exp: run(args, exp))


def _listed(title: str, command: bool) -> dict:
    """A parser added without ``help`` is accepted but not listed in ``--help``."""
    return {"help": title} if command else {}


def add_config_options(parser: argparse.ArgumentParser, config_type: type) -> None:
    """One option per field of a config dataclass (also the torchrun rank program's options)."""
    hints = typing.get_type_hints(config_type)
    for f in dataclasses.fields(config_type):
        tp = hints[f.name]
        flag = "--" + f.metadata.get("cli", f.name.replace("_", "-"))
        default = f.default if f.default is not dataclasses.MISSING else None
        help_text = f.metadata.get("help", "")
        if typing.get_origin(tp) is Literal:
            help_text += f" ({'|'.join(map(str, typing.get_args(tp)))})"
        if default is not None:
            shown = ",".join(map(str, default)) if isinstance(default, tuple) else default
            help_text += f" [default: {shown}]"
        if tp is bool:
            parser.add_argument(
                flag, dest=f.name, action=argparse.BooleanOptionalAction, default=argparse.SUPPRESS, help=help_text
            )
        else:
            parser.add_argument(flag, dest=f.name, default=argparse.SUPPRESS, metavar=f.name.upper(), help=help_text)


def config_values(args: argparse.Namespace, config_type: type) -> dict:
    """The fields of ``config_type`` given on the command line (an option not given is absent: its default applies)."""
    names = {f.name for f in dataclasses.fields(config_type)}
    return {k: v for k, v in vars(args).items() if k in names}


def seconds(text: str) -> float:
    """``--timeout``: a positive, finite number of seconds (nan never fires, 0 or less cannot be met)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"must be a positive, finite number of seconds, got {text!r}")
    return value


def _progress_printer(job, event: dict) -> None:
    kind = event.get("type")
    if kind == "progress":
        print(
            f"[{event.get('done')}/{event.get('total')}] {terminal_text(event.get('message', ''))}",
            file=sys.stderr,
            flush=True,
        )
    elif kind in ("waiting", "started"):
        print(
            f"{kind}: {terminal_text(event.get('message') or event.get('device', {}).get('label', ''))}",
            file=sys.stderr,
            flush=True,
        )


class CancelOnSignal:
    """While a run is on, Ctrl-C (SIGINT) and SIGTERM cancel its job — however many times they come —
    so the run ends stored as cancelled with its finished points, never as a traceback or a run left
    'running'. The note goes straight to fd 2: a handler must not re-enter a buffered print."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.job = None
        self.count = 0
        self._previous: dict = {}

    def attach(self, job) -> None:
        self.job = job
        if self.count:
            job.cancel()

    def __call__(self, signum, frame) -> None:
        self.count += 1
        if self.job is not None:
            self.job.cancel()
        note = "cancelling… (the run is stored as cancelled)" if self.count == 1 else "still cancelling…"
        os.write(2, f"{note}\n".encode())

    def __enter__(self) -> CancelOnSignal:
        self._previous = {s: signal.signal(s, self) for s in self.SIGNALS}
        return self

    def __exit__(self, *exc) -> None:
        # Once a signal has cancelled the run, later presses (a user hammering Ctrl-C while the result
        # prints) must not turn into a KeyboardInterrupt on the way out: they are ignored from here on.
        for sig, handler in self._previous.items():
            signal.signal(sig, signal.SIG_IGN if self.count else handler)


def submit_and_wait(
    args, experiment: str, values: dict, device: str, show: Callable[[RunResult], None], timeout_s: float | None = None
) -> tuple[RunResult, int]:
    """One job from the shell: progress on stderr, Ctrl-C cancels it, ``show`` prints the result; the exit code."""
    from core.jobs import JobManager

    store = None if args.no_save else open_store(args)
    with CancelOnSignal() as cancel:
        manager = JobManager(store=store)
        try:
            job = manager.submit(
                experiment, values, device, timeout_s=timeout_s, name=args.name, on_event=_progress_printer
            )
            cancel.attach(job)
            while (result := job.wait(0.2)) is None:  # short waits: the handler runs between them
                pass
        finally:
            manager.shutdown()
        show(result)
    if job.store_error:
        print(f"warning: {terminal_text(job.store_error)}", file=sys.stderr)
    # From the run's error_kind: bad input only the worker can tell (a GPU this box lacks, a run that
    # cannot fit) exits 2 like any other.
    return result, result.exit_code


def run(args, exp: Experiment) -> int:
    return submit_and_wait(
        args,
        exp.name,
        config_values(args, exp.config_type),
        args.device,
        lambda result: print_run(result, args.json),
        timeout_s=args.timeout,
    )[1]

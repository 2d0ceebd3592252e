"""One sub-command per experiment, generated from its config dataclass.

One option per field; tuples take comma lists; ``field(metadata={"help": ..., "cli": ...})`` names
and documents them. The run is submitted to the same :class:`~core.jobs.JobManager` the pages use
and printed as the stored :class:`~core.result.RunResult`.
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
import typing
from typing import Literal

from core import registry
from core.cli.output import open_store, print_run
from core.experiment import Experiment

ORDER = 100
EXIT = {"ok": 0, "unsupported": 3}


def register(sub, common) -> None:
    command = getattr(common, "command", None)
    # Running one experiment: import only its module (the planner then needs no torch). Otherwise all.
    wanted = [registry.get(command)] if command and command.replace("-", "_") in registry.module_names() \
        else registry.experiments().values()
    for exp in wanted:
        p = sub.add_parser(exp.name, parents=[common], help=exp.title, description=exp.description)
        p.add_argument("--device", default="auto",
                       help="auto (first GPU, else CPU), cpu, cuda, cuda:N, or all (every GPU at once, one run)")
        p.add_argument("--no-save", action="store_true", help="do not store the run")
        p.add_argument("--timeout", type=float, help="wall-clock limit in seconds")
        p.add_argument("--name", default="", help="a label for the stored run")
        add_config_options(p, exp.config_type)
        p.set_defaults(handler=lambda args, exp=exp: run(args, exp))


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
            parser.add_argument(flag, dest=f.name, action=argparse.BooleanOptionalAction, default=argparse.SUPPRESS,
                                help=help_text)
        else:
            parser.add_argument(flag, dest=f.name, default=argparse.SUPPRESS, metavar=f.name.upper(), help=help_text)


def _progress_printer(job, event: dict) -> None:
    kind = event.get("type")
    if kind == "progress":
        print(f"[{event.get('done')}/{event.get('total')}] {event.get('message', '')}", file=sys.stderr, flush=True)
    elif kind in ("waiting", "started"):
        print(f"{kind}: {event.get('message') or event.get('device', {}).get('label', '')}", file=sys.stderr,
              flush=True)


def run(args, exp: Experiment) -> int:
    from core.jobs import JobManager

    names = {f.name for f in dataclasses.fields(exp.config_type)}
    values = {k: v for k, v in vars(args).items() if k in names}
    store = None if args.no_save else open_store(args)
    manager = JobManager(store=store)
    try:
        job = manager.submit(exp.name, values, args.device, timeout_s=args.timeout, name=args.name,
                             on_event=_progress_printer)
        try:
            result = job.wait()
        except KeyboardInterrupt:
            print("cancelling…", file=sys.stderr)
            job.cancel()
            result = job.wait()
    finally:
        manager.shutdown()
    print_run(result, args.json)
    if job.store_error:
        print(f"warning: {job.store_error}", file=sys.stderr)
    if result.status == "error" and (result.error or "").startswith("invalid request:"):
        return 2  # e.g. a GPU index this box does not have: bad input, found by the worker
    return EXIT.get(result.status, 1)

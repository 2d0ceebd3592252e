"""What the import commands (``snapshot``, ``trace``, ``trace-ranks``, ``hang``) share: their storing options, the
one way they run an import (a job on the CPU queue, as every command runs a job), their ``--json`` and their
escaped report lines."""

from __future__ import annotations

import sys

from core.cli.output import dump
from core.text import terminal_text


def import_options(p) -> None:
    p.add_argument("--name", default="", help="a label for the stored run")
    p.add_argument("--no-save", action="store_true", help="do not store the run")


def run_import(args, experiment: str, values: dict):
    """Run the import experiment on the CPU queue; (exit code, result), a failure said on stderr."""
    from core.cli.experiments import submit_and_wait

    def show_failure(result) -> None:
        if result.status != "ok":
            print(f"error: {terminal_text(result.error_detail or result.status, multiline=True)}", file=sys.stderr)

    result, code = submit_and_wait(args, experiment, values, "cpu", show_failure)
    return code, result


def print_json(args, run, **rows: list[dict]) -> None:
    """An import's ``--json``: the run's id, whether it was stored, its meta (less the worker's) and ``rows``."""
    meta = {k: v for k, v in run.meta.items() if k not in ("worker", "requested_device")}
    print(dump({"run_id": run.id, "stored": not args.no_save, **meta, **rows}))


def say(text: str) -> None:
    """A line of the report: names, frames and labels come from the imported file, so escaped."""
    print(terminal_text(text))


def stored_text(args, run) -> str:
    """Where an import's run went, as its report's first line says: "stored as run <id>", or not (--no-save)."""
    return "stored as run " + run.id[:12] if not args.no_save else "not stored (--no-save)"

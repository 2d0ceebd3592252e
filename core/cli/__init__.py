"""``python -m core``: the same engine as the dashboard, from a shell.

Every module of this package is a group of sub-commands: it defines ``ORDER`` (its place in
``--help``) and ``register(sub, common)``, which adds its parsers and sets ``handler`` on each.
Adding a command is adding a module (and naming it in :data:`COMMAND_MODULES`, so that the command builds
its parser from that module alone); :func:`build_parser` finds it. ``report`` (and ``health --html``) asks
the renderers for its HTML inside its handler (:mod:`core.cli.report`, the one declared import of ``render``), so
the engine runs without them. Experiment sub-commands are
generated from the experiments' config dataclasses (:mod:`core.cli.experiments`). ``common.command``
is the sub-command being run (None when only the help is asked for): a group whose registration is
costly may register just that one, so ``python -m core estimate`` imports no torch.

Exit codes: 0 done, 1 the run failed, 2 bad input (named on stderr), 3 unsupported on this device.
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
import threading

from core.errors import ConfigError


class _Common(argparse.ArgumentParser):
    command: str | None = None  # the sub-command being run (see above)


def _common() -> _Common:
    common = _Common(add_help=False)
    common.add_argument("--db", help="run database (default: $GPULAB_DB or ~/.local/share/gpulab/runs.sqlite)")
    common.add_argument("--json", action="store_true", help="print JSON instead of text")
    return common


# The module that registers each hand-written command: ``python -m core trace …`` imports that module alone, not
# every command's (the experiments' commands, generated from the registry, and ``--help`` take them all);
# tests/core/test_cli.py checks the table against what the modules register.
COMMAND_MODULES = {
    "info": "info",
    "doctor": "doctor",
    "health": "health",
    "runs": "runs",
    "report": "report",
    "examples": "workload",
    "record": "workload",
    "snapshot": "workload",
    "trace": "workload",
    "trace-diff": "workload",
    "hang": "hang",
}


def _command_modules(command: str | None = None) -> list:
    """The modules that register commands, in ``--help``'s order; only ``command``'s where the table names it."""
    if command in COMMAND_MODULES:
        names = [COMMAND_MODULES[command]]
    else:
        import pkgutil

        names = [i.name for i in pkgutil.iter_modules(__path__)]
    modules = [importlib.import_module(f"{__name__}.{name}") for name in names]
    return sorted((m for m in modules if hasattr(m, "register")), key=lambda m: m.ORDER)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    common = _common()
    common.command = command
    parser = argparse.ArgumentParser(prog="python -m core", description="GPU Lab engine: run experiments, manage runs.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in _command_modules(command):
        module.register(sub, common)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    command = argv[0] if argv and not argv[0].startswith("-") else None
    from core.workerlaunch import prestart_for, stop_prestarted

    if prestart_for(argv):  # its worker starts now (python -m core started it already, before importing this)
        try:
            return _run(command, argv)
        finally:  # not taken (the command was refused first): it serves no later command of this process
            stop_prestarted()
    return _run(command, argv)


def _ctrl_c_to_the_command() -> None:
    """Ctrl-C raises KeyboardInterrupt again from here on (``python -m core`` ends at once before: see
    core/__main__.py): a run cancels itself and is stored as cancelled, any other command exits 130."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _store_errors() -> tuple[type[Exception], ...]:
    """The run store's error, where the command opened the store: a command that stores nothing (an import with
    ``--no-save``) never imports it, nor SQLite."""
    store = sys.modules.get("core.store")
    return (store.StoreError,) if store is not None else ()


def _run(command: str | None, argv: list[str]) -> int:
    parser = build_parser(command)
    args = parser.parse_args(argv)
    from core.cli.output import OutputError
    from core.limits import check_limits
    from core.result import SchemaError
    from core.text import terminal_text

    try:
        check_limits()
        _ctrl_c_to_the_command()
        return args.handler(args)
    except (ConfigError, OutputError, SchemaError) as exc:
        print(f"error: {terminal_text(exc)}", file=sys.stderr)
        return 2
    except Exception as exc:
        if not isinstance(exc, (KeyError, *_store_errors())):
            raise
        print(f"error: {terminal_text(exc.args[0] if exc.args else exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C outside a run (a run cancels itself and is stored as cancelled)
        print("interrupted", file=sys.stderr)
        return 130

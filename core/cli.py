"""``python -m core``: the same engine as the dashboard, from a shell.

Experiment sub-commands are generated from each experiment's config dataclass (one option per
field; tuples take comma lists; ``field(metadata={"help": ..., "cli": ...})`` names and documents
them), submitted to the same :class:`~core.jobs.JobManager` the pages use, and print the
:class:`~core.result.RunResult` — as JSON with ``--json``, as a table otherwise.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import typing
from typing import Any, Literal

from core import registry
from core.experiment import ConfigError, Experiment, json_ready
from core.result import RunResult

EXIT = {"ok": 0, "unsupported": 3}


def _dump(obj: Any) -> str:
    return json.dumps(json_ready(obj), indent=2, allow_nan=False)


def _common() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--db", help="run database (default: $GPULAB_DB or ~/.local/share/gpulab/runs.sqlite)")
    common.add_argument("--json", action="store_true", help="print JSON instead of text")
    return common


def _add_config_options(parser: argparse.ArgumentParser, exp: Experiment) -> None:
    hints = typing.get_type_hints(exp.config_type)
    for f in dataclasses.fields(exp.config_type):
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


def build_parser() -> argparse.ArgumentParser:
    common = _common()
    parser = argparse.ArgumentParser(prog="python -m core", description="GPU Lab engine: run experiments, manage runs.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    sub.add_parser("info", parents=[common], help="describe the devices of this box (with datasheet peaks)")

    runs = sub.add_parser("runs", help="list, show, export, import or delete stored runs")
    rsub = runs.add_subparsers(dest="runs_command", required=True, metavar="ACTION")
    p = rsub.add_parser("list", parents=[common], help="stored runs, newest first")
    p.add_argument("--experiment")
    p.add_argument("--device", help="part of the device name")
    p.add_argument("--status")
    p.add_argument("--since", help="ISO date, e.g. 2026-11-01")
    p.add_argument("--limit", type=int)
    p = rsub.add_parser("show", parents=[common], help="one run with its rows")
    p.add_argument("id", help="run id or unique prefix")
    p = rsub.add_parser("export", parents=[common], help="write runs as a JSON runs file")
    p.add_argument("ids", nargs="*", help="run ids or prefixes (default: all)")
    p.add_argument("-o", "--output", help="file to write (default: stdout)")
    p = rsub.add_parser("import", parents=[common], help="add the runs of a runs file (marked imported)")
    p.add_argument("file")
    p = rsub.add_parser("delete", parents=[common], help="delete runs")
    p.add_argument("ids", nargs="+")

    p = sub.add_parser("report", parents=[common], help="write one self-contained HTML report of stored runs")
    p.add_argument("ids", nargs="+", help="run ids or unique prefixes")
    p.add_argument("-o", "--output", default="report.html", help="HTML file to write [default: report.html]")

    for exp in registry.experiments().values():
        p = sub.add_parser(exp.name, parents=[common], help=exp.title, description=exp.description)
        p.add_argument("--device", default="auto", help="auto (first GPU, else CPU), cpu, cuda or cuda:N")
        p.add_argument("--no-save", action="store_true", help="do not store the run")
        p.add_argument("--timeout", type=float, help="wall-clock limit in seconds")
        p.add_argument("--name", default="", help="a label for the stored run")
        _add_config_options(p, exp)
    return parser


def _store(args):
    from core.store import RunStore

    return RunStore(args.db)


def _print_run(run: RunResult, as_json: bool) -> None:
    if as_json:
        print(_dump(run.to_dict()))
        return
    device = run.device.get("label") or run.device.get("name")
    print(f"{run.experiment}  {run.id}  [{run.status}]  on {device}  at {run.started_at}")
    if run.error:
        print(f"  {run.error}")
    if run.rows:
        import pandas as pd

        with pd.option_context("display.max_rows", 200, "display.max_columns", 30, "display.width", 200):
            frame = run.frame()
            nested = [c for c in frame.columns if frame[c].map(lambda v: isinstance(v, (list, dict))).any()]
            print(frame.drop(columns=nested).to_string(index=False))
    for key, value in run.meta.items():
        if key not in ("worker", "traceback") and not isinstance(value, (list, dict)):
            print(f"  {key}: {value}")


def _cmd_info(args) -> int:
    from core.device import describe_all

    info = describe_all()
    if args.json:
        print(_dump(info))
        return 0
    v = info["versions"]
    print(f"torch {v['torch']}  CUDA {v['cuda']}  cuDNN {v['cudnn']}  driver {v['driver']}  python {v['python']}")
    if not info["cuda_available"]:
        print(f"No GPU: {info['cuda_unavailable_reason']}")
    for d in info["devices"]:
        mem = d.get("total_memory_bytes")
        print(f"- {d['label']}  memory {mem / 2**30:.1f} GiB" if mem else f"- {d['label']}")
        if d["kind"] == "cuda":
            spec = d["spec"]
            print(f"  compute capability {d['compute_capability']}, {d['multiprocessors']} SMs, "
                  f"bf16 {'yes' if d['bf16_supported'] else 'no'}, TF32 flags {d['tf32']}")
            print(f"  datasheet: {spec['name'] + ' ' + str(spec['tflops']) if spec else 'no datasheet entry'}")
    return 0


def _cmd_runs(args) -> int:
    from core.store import ImportRefused

    store = _store(args)
    action = args.runs_command
    if action == "list":
        runs = store.list(experiment=args.experiment, device=args.device, status=args.status, since=args.since,
                          limit=args.limit)
        if args.json:
            print(_dump([{k: v for k, v in r.to_dict().items() if k != "rows"} | {"row_count": len(r.rows)}
                         for r in runs]))
        elif not runs:
            print(f"no runs stored in {store.path}")
        else:
            for r in runs:
                print(f"{r.id[:12]}  {r.started_at[:19]}  {r.experiment:<14} {r.status:<12} "
                      f"{r.device.get('name', '')[:40]:<40} {r.name}{'  (imported)' if r.imported else ''}")
        return 0
    if action == "show":
        _print_run(store.find(args.id), args.json)
        return 0
    if action == "export":
        ids = [store.find(i).id for i in args.ids] if args.ids else None
        text = store.export_json(ids)
        if args.output:
            with open(args.output, "w", encoding="utf-8") as fh:
                fh.write(text)
            print(f"wrote {len(store.export_data(ids)['runs'])} run(s) to {args.output}", file=sys.stderr)
        else:
            print(text)
        return 0
    if action == "import":
        try:
            added, skipped = store.import_file(args.file)
        except ImportRefused as exc:
            print(f"import refused: {exc}", file=sys.stderr)
            return 2
        print(_dump({"added": added, "already_present": skipped}) if args.json
              else f"imported {added} run(s); {skipped} already present")
        return 0
    if action == "delete":
        removed = store.delete(store.find(i).id for i in args.ids)
        print(f"deleted {removed} run(s)")
        return 0
    return 2


def _cmd_report(args) -> int:
    store = _store(args)
    runs = [store.find(i) for i in args.ids]
    try:
        from pages.common.report import write_report  # plotly lives outside core, imported only here
    except ImportError as exc:
        print(f"error: the HTML report needs plotly and the GPU Lab pages package ({exc}); "
              f"pip install plotly pandas, and run from the repository root", file=sys.stderr)
        return 2
    size = write_report(runs, args.output)
    print(f"wrote {len(runs)} run(s) to {args.output} ({size / 2**20:.1f} MiB, opens offline)", file=sys.stderr)
    return 0


def _progress_printer(job, event: dict) -> None:
    kind = event.get("type")
    if kind == "progress":
        print(f"[{event.get('done')}/{event.get('total')}] {event.get('message', '')}", file=sys.stderr, flush=True)
    elif kind in ("waiting", "started"):
        print(f"{kind}: {event.get('message') or event.get('device', {}).get('label', '')}", file=sys.stderr,
              flush=True)


def _cmd_experiment(args, exp: Experiment) -> int:
    from core.jobs import JobManager

    names = {f.name for f in dataclasses.fields(exp.config_type)}
    values = {k: v for k, v in vars(args).items() if k in names}
    store = None if args.no_save else _store(args)
    manager = JobManager(store=store)
    try:
        job = manager.submit(exp.name, values, args.device, timeout_s=args.timeout, name=args.name,
                             on_event=_progress_printer)
        try:
            run = job.wait()
        except KeyboardInterrupt:
            print("cancelling…", file=sys.stderr)
            job.cancel()
            run = job.wait()
    finally:
        manager.shutdown()
    _print_run(run, args.json)
    if job.store_error:
        print(f"warning: {job.store_error}", file=sys.stderr)
    if run.status == "error" and (run.error or "").startswith("invalid request:"):
        return 2  # e.g. a GPU index this box does not have: bad input, found by the worker
    return EXIT.get(run.status, 1)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from core.store import StoreError

    try:
        if args.command == "info":
            return _cmd_info(args)
        if args.command == "runs":
            return _cmd_runs(args)
        if args.command == "report":
            return _cmd_report(args)
        return _cmd_experiment(args, registry.get(args.command))
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (StoreError, KeyError) as exc:
        print(f"error: {exc.args[0] if exc.args else exc}", file=sys.stderr)
        return 2

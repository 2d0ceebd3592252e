"""How the CLI prints: JSON (``--json``) or a readable table of a run, shared by every command."""
from __future__ import annotations

import json
import sys
from typing import Any

from core.experiment import json_ready
from core.result import RunResult


def dump(obj: Any) -> str:
    return json.dumps(json_ready(obj), indent=2, allow_nan=False)


def open_store(args):
    from core.store import RunStore

    return RunStore(args.db)


def print_run(run: RunResult, as_json: bool) -> None:
    if as_json:
        print(dump(run.to_dict()))
        warn_measurement_errors(run)
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
    warn_measurement_errors(run)


def warn_measurement_errors(run: RunResult) -> None:
    """Said on stderr whatever the output format, so a script reading JSON still sees it."""
    for error in run.meta.get("measurement_errors") or []:
        print(f"warning: {error}", file=sys.stderr)

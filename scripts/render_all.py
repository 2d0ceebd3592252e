"""Every shipped file through every view, written to a folder, so a refactor can show it changed nothing.

Imports each trace, rank folder, trace pair, memory snapshot and flight-recorder dump under ``tests/data`` and
``examples/``, and reads each stored-run fixture of ``tests/data/runs``, through the CLI as a user runs it (text
and ``--json``), then draws every stored run's charts and its HTML report's text. What differs from one
capture to the next by design (run ids, times, the temporary paths) is replaced by a fixed word, so two
captures of the same code are byte-identical and ``diff -r BEFORE AFTER`` lists only what a change did.

    python3 scripts/render_all.py OUT_DIR
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

WORKLOAD = ROOT / "tests/data/workload"
RUNS = ROOT / "tests/data/runs"
FR = ROOT / "tests/data/flight_recorder"
EXAMPLES = ROOT / "examples"

_VOLATILE = [
    (re.compile(r"\b[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}\b"), "<uuid>"),
    (re.compile(r"\b[0-9a-f]{12,32}\b"), "<hex>"),
    (re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?([+-]\d\d:\d\d|Z)?"), "<time>"),
    (
        re.compile(r'"(created|started|finished|started_at|finished_at|created_at|wall_s|elapsed_s)": [0-9.e+-]+'),
        r'"\1": 0',
    ),
]


def _steady(text: str, tmp: str) -> str:
    text = text.replace(tmp, "<tmp>").replace(str(ROOT), "<root>")
    for pattern, word in _VOLATILE:
        text = pattern.sub(word, text)
    return text


def _cases() -> list[tuple[str, list[str]]]:
    """(name, CLI arguments) for every shipped file."""
    cases: list[tuple[str, list[str]]] = []
    for f in sorted(WORKLOAD.glob("*.json*")):
        cases.append((f"trace-{f.name}", ["trace", str(f)]))
    recsys = sorted(WORKLOAD.glob("hta_recsys_sampled_rank*.json.gz"))
    cases.append(("trace-ranks-recsys", ["trace", *map(str, recsys)]))
    cases.append(
        (
            "trace-diff-workers",
            [
                "trace-diff",
                str(WORKLOAD / "kineto_v100_resnet50_workers0_step.json.gz"),
                str(WORKLOAD / "kineto_v100_resnet50_workers4_step.json.gz"),
            ],
        )
    )
    for f in sorted((WORKLOAD / "snapshots").glob("*")):
        if f.is_file() and not f.name.endswith((".md", ".py", ".txt")):
            cases.append((f"snapshot-{f.name}", ["snapshot", str(f)]))
    for d in sorted(p for p in FR.iterdir() if p.is_dir()):
        cases.append((f"hang-{d.name}", ["hang", str(d)]))
    for example in _examples():
        cases.append((f"example-{example['name']}", example["open"].split()[3:]))
    return cases


def _examples() -> list[dict]:
    out = subprocess.run(
        [sys.executable, "-m", "core", "examples", "--json"], capture_output=True, text=True, cwd=ROOT, check=True
    )
    return json.loads(out.stdout)


def _cli(args: list[str], db: str, tmp: str) -> str:
    env = {**os.environ, "GPULAB_DB": db}
    done = subprocess.run([sys.executable, "-m", "core", *args], capture_output=True, text=True, cwd=ROOT, env=env)
    # how far a reader had got when it said so depends on the machine's speed, not on the code
    said = "".join(line for line in done.stderr.splitlines(keepends=True) if "events decoded" not in line)
    return _steady(f"exit {done.returncode}\n{done.stdout}\n--- stderr\n{said}", tmp)


def main(out_dir: str) -> None:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "runs.sqlite")
        for name, args in _cases():
            (out / f"{name}.txt").write_text(_cli(args, db, tmp) + _cli([*args, "--json", "--no-save"], db, tmp))
            print(name, flush=True)
        for f in [*sorted(RUNS.glob("*.json")), *sorted(EXAMPLES.glob("*.json"))]:
            (out / f"runs-{f.name}.txt").write_text(_cli(["runs", "import", str(f)], db, tmp))
        _draw_stored(db, out, tmp)


def _draw_stored(db: str, out: Path, tmp: str) -> None:
    """Each stored run: ``runs show`` as text, its charts as Plotly JSON (in the order the store lists them)."""
    from core.store import RunStore
    from render.plots import figures_for, overlay_for

    store = RunStore(db)
    runs = [store.get(s.id) for s in store.summaries(limit=10_000)]
    runs.sort(key=lambda r: (r.experiment, r.name or "", json.dumps(r.meta, sort_keys=True, default=str)[:200]))
    for i, run in enumerate(runs):
        stem = f"stored-{i:03d}-{run.experiment}"
        text = _cli(["runs", "show", run.id], db, tmp)
        charts = [
            {
                "name": c.name,
                "figure": c.figure.to_plotly_json(),
                "data": None if c.data is None else c.data.to_json(orient="split", default_handler=str),
            }
            for c in figures_for(run)
        ]
        (out / f"{stem}.txt").write_text(text)
        (out / f"{stem}.charts.json").write_text(
            _steady(json.dumps(charts, sort_keys=True, indent=1, default=str), tmp)
        )
    by_experiment: dict[str, list] = {}
    for run in runs:
        by_experiment.setdefault(run.experiment, []).append(run)
    for experiment, group in sorted(by_experiment.items()):
        # runs take fixed ids here: an overlay names (and colours) each run by its id, which each capture draws anew
        fixed = [dataclasses.replace(run, id=f"{i:032x}") for i, run in enumerate(group)]
        overlay = overlay_for(fixed) or []
        charts = [{"name": c.name, "figure": c.figure.to_plotly_json()} for c in overlay]
        (out / f"overlay-{experiment}.json").write_text(
            _steady(json.dumps(charts, sort_keys=True, indent=1, default=str), tmp)
        )


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "render-all")

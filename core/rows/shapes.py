"""What each experiment's stored runs must hold for its views to read them: the one place a run is checked beyond
the result schema, on import and whenever the store reads it back (:func:`core.store.read_run`).

A view reads a stored run's rows, meta and config by key, without a default (a doctor run's rows become
``Check(**row)``, a health row's ``unit`` formats its value, Training memory labels a run by its config's model). A
run whose fields do not hold what those reads expect would raise inside the page of every visitor, so it is refused
at import and listed as damaged when read. A shape names only what the views read and what every version of the
experiment has stored (so no run the lab made is refused); what a view reads only where present is typed where
present. Torch-free, and a shape is plain data: the store checks a 100 MB run without building anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from core.result import NONE, NUMBER, SCALAR, RunResult
from core.text import quoted

TEXT = (str,)
WHOLE = (int,)
FLAG = (bool,)
ANY = (str, int, float, bool, NONE, list, dict)


@dataclass(frozen=True)
class Obj:
    """A JSON object: the keys a view reads without a default (``need``), those it reads where present (``may``)."""

    need: Mapping[str, Spec] = field(default_factory=dict)
    may: Mapping[str, Spec] = field(default_factory=dict)
    or_none: bool = False


@dataclass(frozen=True)
class ListOf:
    """A JSON list whose every item is ``item``."""

    item: Spec
    or_none: bool = False


@dataclass(frozen=True)
class MapOf:
    """A JSON object of any keys whose every value is ``item`` (a table by dtype)."""

    item: Spec
    or_none: bool = False


@dataclass(frozen=True)
class OneOf:
    """Text that is one of ``values`` (a view looks it up in a table of its own)."""

    values: tuple[str, ...]


Spec = tuple[type, ...] | Obj | ListOf | MapOf | OneOf


@dataclass(frozen=True)
class Shape:
    """An experiment's runs: their config, every row, the rows of a ``kind``, and the meta of a run that ended ok (a
    failed run keeps what it had)."""

    config: Obj = Obj()
    rows: Obj = Obj()
    kinds: Mapping[str, Obj] = field(default_factory=dict)
    meta: Obj = Obj()


_TYPE_WORDS = {str: "text", int: "a whole number", float: "a number", bool: "true/false", NONE: "null"}
_TYPE_WORDS |= {list: "a list", dict: "an object"}


def _expected(spec: Spec) -> str:
    if isinstance(spec, Obj):
        return "an object" + (" or null" if spec.or_none else "")
    if isinstance(spec, ListOf):
        return "a list" + (" or null" if spec.or_none else "")
    if isinstance(spec, MapOf):
        return "an object" + (" or null" if spec.or_none else "")
    if isinstance(spec, OneOf):
        return "one of " + ", ".join(spec.values)
    return " or ".join(dict.fromkeys(_TYPE_WORDS[t] for t in spec))


def _wrong_type(value: Any, types: tuple[type, ...]) -> bool:
    if isinstance(value, bool):
        return bool not in types
    return not isinstance(value, types)


def problem(value: Any, spec: Spec, where: str) -> str | None:
    """What is wrong with ``value`` against ``spec`` (``where`` names it), or None."""
    if isinstance(spec, OneOf):
        return None if value in spec.values else f"{where} is {quoted(value, 40)}, not {_expected(spec)}"
    if isinstance(spec, tuple):
        return None if not _wrong_type(value, spec) else f"{where} is {_kind(value)}, not {_expected(spec)}"
    if value is None and spec.or_none:
        return None
    if isinstance(spec, ListOf):
        if not isinstance(value, list):
            return f"{where} is {_kind(value)}, not {_expected(spec)}"
        return next((p for i, v in enumerate(value) if (p := problem(v, spec.item, f"{where}[{i}]"))), None)
    if not isinstance(value, dict):
        return f"{where} is {_kind(value)}, not {_expected(spec)}"
    if isinstance(spec, MapOf):
        return next((p for k, v in value.items() if (p := problem(v, spec.item, f"{where}.{k}"))), None)
    missing = [k for k in spec.need if k not in value]
    if missing:
        return f"{where} lacks {', '.join(map(repr, missing))}"
    for key, item in (*spec.need.items(), *spec.may.items()):
        if key in value and (p := problem(value[key], item, f"{where}.{key}")):
            return p
    return None


def _kind(value: Any) -> str:
    return "null" if value is None else _TYPE_WORDS.get(type(value), type(value).__name__)


def run_problem(run: RunResult) -> str | None:
    """What keeps a run from being read by its experiment's views, or None (also for an experiment with no shape)."""
    shape = SHAPES.get(run.experiment)
    if shape is None:
        return None
    found = problem(run.config, shape.config, "config")
    for i, row in enumerate(run.rows):
        if found:
            break
        found = problem(row, shape.rows, f"rows[{i}]")
        kind = row.get("kind")
        of_kind = shape.kinds.get(kind) if isinstance(kind, str) else None
        found = found or (problem(row, of_kind, f"rows[{i}] ({kind})") if of_kind else None)
    if not found and run.status == "ok":
        found = problem(run.meta, shape.meta, "meta")
    article = "an" if run.experiment[:1] in "aeiou" else "a"
    return f"{article} {run.experiment} run's {found}" if found else None


def _opt(types: tuple[type, ...]) -> tuple[type, ...]:
    return types + (NONE,)


# A health check's row (core/rows/health.py: HealthRow), read by its table, banner and HTML report.
_CLOCKS = Obj(need={"text": TEXT, "state": TEXT, "faults": ListOf(TEXT)}, or_none=True)
_HEALTH_ROW = Obj(
    need={
        "figure": TEXT,
        "where": TEXT,
        "verdict": TEXT,
        "unit": TEXT,
        "measured": SCALAR,
        "reference": SCALAR,
        "reference_label": _opt(TEXT),
        "reason": _opt(TEXT),
    },
    may={
        "node": _opt(TEXT),
        "clocks": _CLOCKS,
        "per_clock": Obj(need={"text": TEXT}, or_none=True),
        "history": Obj(may={"text": TEXT}, or_none=True),
        "source": _opt(TEXT),
        "reference_card": _opt(TEXT),
        "not_comparable": _opt(TEXT),
        "device_kind": _opt(TEXT),
    },
)
_RUN_IDS = ListOf(TEXT)
# The stuck collective of a hang and the rank that entered late (core/workload/hang/analysis.py), read by the Interconnect
# page's hang section and its grid chart.
_STUCK = Obj(
    need={"op": TEXT, "seq_id": SCALAR, "group": SCALAR},
    may={"kind": TEXT, "ranks_missing": ListOf(ANY), "ranks_mismatched": ListOf(ANY), "ranks_waiting": ListOf(ANY)},
    or_none=True,
)

SHAPES: dict[str, Shape] = {
    # core/doctor.py: a check per row (Report.from_run makes each a Check), the runs it made by id
    "doctor": Shape(
        config=Obj(may={"device": TEXT}),
        rows=Obj(
            need={"check": TEXT, "result": TEXT, "expected": TEXT, "verdict": OneOf(("pass", "fail", "unsupported"))},
            may={"reason": TEXT},
        ),
        meta=Obj(may={"wall_s": NUMBER, "run_ids": _RUN_IDS}),
    ),
    "health": Shape(
        rows=_HEALTH_ROW,
        meta=Obj(
            may={
                "wall_s": NUMBER,
                "verdict": TEXT,
                "answer": TEXT,
                "run_ids": _RUN_IDS,
                "judged": _RUN_IDS,
                "nodes": ListOf(Obj()),
                "parts": ListOf(Obj()),
                "box": Obj(may={"host": _opt(TEXT), "devices": ListOf(TEXT)}),
                "rules": ListOf(Obj()),
                "judged_again": Obj(or_none=True),
            }
        ),
    ),
    # Training memory: the compare section labels each run by its config; the charts read the peaks and the
    # timeline's rows
    "train-memory": Shape(
        config=Obj(need={"model": TEXT, "precision": TEXT, "optimizer": TEXT, "batch": WHOLE}),
        rows=Obj(may={"t_ms": NUMBER}),
        meta=Obj(
            need={
                "peak_measured_bytes": NUMBER,
                "peak_estimated_bytes": NUMBER,
                "peak_phase": TEXT,
                "peak_t_ms": NUMBER,
                "error_pct": NUMBER,
            },
            may={"peak_phase_estimated": TEXT, "method": TEXT, "trace_peak_bytes": NUMBER},
        ),
    ),
    # the planner's answer in words (core/experiments/estimate.py: answer_lines)
    "estimate": Shape(
        meta=Obj(
            need={
                "model": TEXT,
                "params": WHOLE,
                "precision": TEXT,
                "optimizer": TEXT,
                "batch": WHOLE,
                "context": WHOLE,
                "peak_estimated_bytes": NUMBER,
                "peak_moment": TEXT,
                "device_total_estimated_bytes": NUMBER,
            },
        ),
    ),
    # a hang's diagnosis: the ranks read, the file, the recorder's version, the stuck collective
    "flight-recorder": Shape(
        kinds={"rank": Obj(need={"rank": SCALAR})},
        meta=Obj(
            need={"ranks": ListOf(ANY), "file": TEXT, "version": SCALAR},
            may={
                "stuck": _STUCK,
                "late": Obj(need={"after_ns": NUMBER, "rank": SCALAR, "op": TEXT, "seq_id": SCALAR}, or_none=True),
                "world_size": _opt(WHOLE),
                "backend": _opt(TEXT),
                "group": SCALAR,
            },
        ),
    ),
    # every row says what it measured (host↔GPU copies, the peer matrix, a collective, one rank's figures)
    "interconnect": Shape(rows=Obj(need={"kind": TEXT})),
    # the best point of each dtype, the figure a health check and Compare's trend judge (core/health/figures.py)
    "matmul": Shape(
        meta=Obj(may={"best": MapOf(Obj(need={"m": WHOLE, "n": WHOLE, "k": WHOLE}, may={"tflops": SCALAR}))})
    ),
}

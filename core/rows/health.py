"""A health check's verdict table as the check stores it and its views read it: one :class:`HealthRow` per figure
or check, with what NVML read while a throughput was measured (:class:`ClocksSaid`), its per-clock efficiency
(:class:`PerClock`), the box's history of the figure (:class:`History`) and, in a cluster's run, the fleet's
median (:class:`FleetShare`).

The verdict (``core.health.verdict``) builds the rows and stores ``to_row()``: the keys and order checks have
always had (a figure's row carries its device, shape and comparability; a check's or a step's does not). A row
read from a store keeps the keys it does not name (``extra``). Torch-free.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any

from core.hardware.clocks import ClockReading
from core.result import RunResult
from core.rows.stored import known, read

Value = float | int | str | None  # a figure's number; a check's words ("3 of 3 ok")


@dataclass(frozen=True)
class ClocksSaid:
    """What NVML read while a figure was measured, and the state and faults it adds up to, as judged then."""

    sm_clock_mhz: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    max_sm_clock_mhz: float | None = None
    reasons: tuple[str, ...] | None = None
    state: str = "not sampled"  # fault | power-limited | full clock | not sampled
    faults: tuple[str, ...] = ()
    text: str = ""

    @classmethod
    def of(cls, reading: ClockReading) -> ClocksSaid:
        return cls(
            reading.sm_clock_mhz,
            reading.power_w,
            reading.power_limit_w,
            reading.max_sm_clock_mhz,
            reading.reasons,
            reading.state,
            tuple(reading.faults()),
            reading.text(),
        )

    @classmethod
    def from_dict(cls, stored: Mapping[str, Any]) -> ClocksSaid:
        reasons = stored.get("reasons")
        return cls(
            **known(
                cls,
                stored,
                reasons=tuple(reasons) if isinstance(reasons, list) else None,
                faults=tuple(stored.get("faults") or ()),
            )
        )

    def to_dict(self) -> dict:
        return asdict(self) | {
            "reasons": list(self.reasons) if self.reasons is not None else None,
            "faults": list(self.faults),
        }


@dataclass(frozen=True)
class PerClock:
    """TFLOPS per GHz of SM clock against the card's datasheet peak per GHz, and the sentence that says it."""

    tflops_per_ghz: float
    peak_per_ghz: float
    efficiency: float
    sm_clock_mhz: float
    peak_clock_mhz: float
    source: str
    text: str


@dataclass(frozen=True)
class History:
    """One figure's earlier values on this box, and whether the new one regressed beyond their spread."""

    figure: str
    where: str
    unit: str
    value: float
    earlier: list[float]  # oldest first
    earlier_ids: list[str]
    median: float
    low: float
    high: float
    regressed: bool

    @property
    def text(self) -> str:
        unit = f" {self.unit}"
        head = f"{self.value:.4g}{unit} now; earlier {len(self.earlier)} runs: median {self.median:.4g}{unit} " + (
            f"(range {self.low:.4g}–{self.high:.4g})"
        )
        return ("regressed: " if self.regressed else "") + head

    def to_dict(self) -> dict:
        return asdict(self) | {"text": self.text}


@dataclass(frozen=True)
class FleetShare:
    """A cluster's figure against the median of the same figure on the same GPU model across its nodes."""

    median: float
    fraction: float
    values: int


# a figure's row: every key, in its stored order; a check's or a step's row stores these less FIGURE_ONLY
FIGURE_KEYS = (
    "figure where device device_kind measured unit reference reference_kind reference_label reference_card source "
    "date fraction verdict reason slowdown shape searched not_comparable published_note clocks per_clock history "
    "regressed"
).split()
FIGURE_ONLY = frozenset(("device", "device_kind", "shape", "searched", "not_comparable", "published_note"))
STEP_KEYS = [k for k in FIGURE_KEYS if k not in FIGURE_ONLY]
# what a node's check (slow_gpu) and then a cluster's run (node, host, fleet, outlier) add after them, when set
MARKS = ("slow_gpu", "node", "host", "fleet", "outlier")
_NESTED = {"clocks": ClocksSaid.from_dict, "per_clock": partial(read, PerClock), "history": partial(read, History),
           "fleet": partial(read, FleetShare)}  # fmt: skip


@dataclass(frozen=True)
class HealthRow:
    """One figure judged against its reference (``figure_row``), or a doctor's check or a step that did not run
    (``step_row``: no ``device``)."""

    figure: str
    where: str
    verdict: str  # one of core.health.verdict.ROW_VERDICTS
    reason: str = ""
    measured: Value = None
    unit: str = ""  # "" for a check or a step: its measured and reference are words
    reference: Value = None
    reference_kind: str | None = None  # published | datasheet | ceiling | same shape per clock | check
    reference_label: str = ""
    reference_card: str = ""  # the card the reference was measured on, where it is not the user's
    source: str = ""
    date: str = ""
    fraction: float | None = None  # measured / reference (per clock for a fixed shape); None: not judged
    slowdown: str = ""
    device: str | None = None  # a figure's rows only, with the five below
    device_kind: str | None = None
    shape: tuple[int, ...] | None = None
    searched: bool = False
    not_comparable: str = ""
    published_note: str = ""
    clocks: ClocksSaid | None = None
    per_clock: PerClock | None = None
    history: History | None = None
    regressed: bool = False
    slow_gpu: bool = False
    node: str | None = None  # a cluster's run: the node's name and host
    host: str | None = None
    fleet: FleetShare | None = None
    outlier: bool = False
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def is_figure(self) -> bool:
        return self.device is not None

    @property
    def judged(self) -> bool:
        """Held against a reference: what its chart draws."""
        return isinstance(self.fraction, int | float)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> HealthRow:
        names = set(FIGURE_KEYS) | set(MARKS)
        shape = row.get("shape")
        return cls(
            **known(
                cls,
                row,
                **{k: str(row.get(k) or "") for k in ("figure", "where", "verdict", "reason")},
                shape=tuple(shape) if isinstance(shape, list) else None,
                **{k: read(row[k]) if isinstance(row.get(k), Mapping) else None for k, read in _NESTED.items()},
                extra={k: v for k, v in row.items() if k not in names},
            )
        )

    def to_row(self) -> dict:
        keys = FIGURE_KEYS if self.is_figure else STEP_KEYS
        row = {k: _stored(getattr(self, k)) for k in keys}
        marks = {k: _stored(getattr(self, k)) for k in MARKS if getattr(self, k) not in (None, False)}
        return row | marks | dict(self.extra)


def _stored(value: Any) -> Any:
    if isinstance(value, ClocksSaid | History):
        return value.to_dict()
    if isinstance(value, PerClock | FleetShare):
        return asdict(value)
    return list(value) if isinstance(value, tuple) else value


def health_rows(rows: Sequence[Mapping[str, Any]] | RunResult) -> list[HealthRow]:
    """A stored check's rows (a run's, or a node's as it sent them), typed."""
    return [HealthRow.from_row(r) for r in (rows.rows if isinstance(rows, RunResult) else rows)]


@dataclass(frozen=True)
class Rule:
    """A rule of the verdict, what it says and its source (core.hardware.health_reference.RULES), as judged."""

    rule: str = ""
    says: str = ""
    source: str = ""


@dataclass(frozen=True)
class JudgedAgain:
    """A stored check judged again by today's rules: which check, when, and the box it was measured on."""

    of: str
    at: str
    origin: str
    imported: bool = False


@dataclass(frozen=True)
class NodeSummary:
    """A node of a cluster's check: its name, host, how it ended and how many rows it sent."""

    node: str
    host: str = "?"
    status: str = ""
    error: str = ""
    rows: int = 0


@dataclass(frozen=True)
class HealthSummary:
    """A stored check's meta as its views read it: the verdict and its words, the box, the rules it was judged
    by, whether it was judged again, and a cluster's nodes."""

    verdict: str | None = None  # absent in a check stored before the verdict was kept
    answer: str = ""
    host: str = "?"  # the box: its host and its GPUs' ids
    devices: tuple[str, ...] = ()
    thresholds: str = ""
    rules: tuple[Rule, ...] = ()
    judged_again: JudgedAgain | None = None
    wall_s: float | None = None
    nodes: tuple[NodeSummary, ...] = ()
    judged: tuple[str, ...] | None = None  # the ids of the runs the rows judge (None: a check stored before)
    run_ids: tuple[str, ...] = ()

    @classmethod
    def from_run(cls, run: RunResult) -> HealthSummary:
        meta = run.meta
        box = meta.get("box")
        box = box if isinstance(box, Mapping) else {}
        again, judged, wall = meta.get("judged_again"), meta.get("judged"), meta.get("wall_s")
        return cls(
            **known(
                cls,
                meta,
                host=str(box.get("host") or "?"),
                devices=tuple(box.get("devices") or ()),
                rules=tuple(read(Rule, r) for r in meta.get("rules") or () if isinstance(r, Mapping)),
                judged_again=read(JudgedAgain, again) if isinstance(again, Mapping) else None,
                wall_s=float(wall) if isinstance(wall, int | float) else None,
                nodes=tuple(
                    NodeSummary(**known(NodeSummary, n)) for n in meta.get("nodes") or () if isinstance(n, Mapping)
                ),
                judged=tuple(judged) if isinstance(judged, list) else None,
                run_ids=tuple(meta.get("run_ids") or ()),
            )
        )

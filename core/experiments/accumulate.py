"""``accumulate``: repeat ``s += x`` for every accumulator × addend dtype, as the course note does.

Each pair runs the note's Python loop on the selected device (one in-place add per step, so every
partial sum is rounded to the accumulator's dtype), and the result is compared with the exact sum
``value × steps`` of the typed decimal. Two more numbers separate the two error sources:
``addend_stored`` (what the addend dtype holds for ``value``) and ``error_vs_stored_addend``
(the loop's error against ``steps × addend_stored``: accumulation error alone).

Rows: one per pair (``method: "loop"``) plus one per dtype for ``torch.sum`` of the same data
(``method: "torch.sum"``; the reduction kernel's own accumulator and summation order decide).
``meta["curve"]``: the running sum at ``meta["curve"]["steps"]`` for each pair (up to
``curve_points`` checkpoints), so the page can draw the error over the steps and show where a
low-precision accumulator stalls (``stalled_at_step``: first step that left the sum unchanged).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING

from core.errors import ConfigError
from core.experiment import Context, Experiment, Output, Progress
from core.hardware import dtypes
from core.rows.accumulate import AccumulateSummary, CurveSeries, SumRow

if TYPE_CHECKING:
    import torch

DTYPES = ("fp64", "fp32", "fp16", "bf16")
MAX_STEPS = 100_000


@dataclass(frozen=True)
class AccumulateConfig:
    value: float = field(default=0.01, metadata={"help": "the addend x in s += x"})
    steps: int = field(default=1000, metadata={"help": f"additions per pair (1..{MAX_STEPS})"})
    dtypes: tuple[str, ...] = field(default=DTYPES, metadata={"help": "accumulator and addend dtypes"})
    curve_points: int = field(default=400, metadata={"help": "checkpoints kept for the error curve"})

    def __post_init__(self) -> None:
        if not 1 <= self.steps <= MAX_STEPS:
            raise ConfigError(f"steps must be between 1 and {MAX_STEPS}, got {self.steps}")
        unknown = [d for d in self.dtypes if d not in DTYPES]
        if unknown or not self.dtypes:
            raise ConfigError(f"dtypes must be a non-empty list of {', '.join(DTYPES)}; got {', '.join(unknown)}")
        if not 2 <= self.curve_points <= 5000:
            raise ConfigError(f"curve_points must be between 2 and 5000, got {self.curve_points}")
        if not abs(self.value) < 1e300:
            raise ConfigError(f"value must be finite and below 1e300 in magnitude, got {self.value}")


def checkpoints(steps: int, points: int) -> list[int]:
    """Steps at which the running sum is recorded: every step if few, else evenly spaced (always the last)."""
    if steps <= points:
        return list(range(1, steps + 1))
    return sorted({max(1, round(i * steps / (points - 1))) for i in range(points)} | {steps})


def accumulate(
    value: float, steps: int, acc: torch.dtype, addend: torch.dtype, device: str, record: set[int]
) -> tuple[float, list[float], int | None]:
    """The note's loop. Returns (final sum, sums at the ``record`` steps, first step that changed nothing)."""
    import torch

    s = torch.zeros((), dtype=acc, device=device)
    x = torch.tensor(value, dtype=addend, device=device)
    stalled = torch.zeros((), dtype=torch.int64, device=device)  # 0 = never stalled
    sums = add_loop(s, x, stalled, steps, record)
    curve = torch.stack(sums).double().tolist() if sums else []
    first = int(stalled.item())
    return float(s.double().item()), curve, first or None


def add_loop(s: torch.Tensor, x: torch.Tensor, stalled: torch.Tensor, steps: int, record: set[int]) -> list:
    """``s += x`` ``steps`` times in place, all on the device: no host round trip per step (the step number
    goes into ``torch.where`` as a scalar argument, not as a new tensor copied from the host each step).
    ``stalled`` gets the first step that left ``s`` unchanged; returns the sums at the ``record`` steps."""
    import torch

    sums: list[torch.Tensor] = []
    for step in range(1, steps + 1):
        before = s.clone()
        s += x
        stalled.copy_(torch.where((stalled == 0) & (s == before), step, stalled))
        if step in record:
            sums.append(s.clone())
    return sums


def _sum_row(acc: str, add: str, result: float, exact: Decimal, steps: int, stored: float, stalled: int | None) -> dict:
    """The stored row of one pair; ``acc`` is "torch.sum" for torch's own reduction of the addends."""

    def diff(a: float, b: Decimal) -> float:
        return float(Decimal(a) - b) if abs(a) != float("inf") and a == a else a - float(b)

    err = diff(result, exact)
    reduced = acc == "torch.sum"
    return SumRow(
        method="torch.sum" if reduced else "loop",
        accumulator=acc,
        addend=add,
        pair=f"torch.sum({add})" if reduced else f"{acc} += {add}",
        steps=steps,
        result=result,
        exact=float(exact),
        addend_stored=stored,
        error=err,
        abs_error=abs(err),
        rel_error=abs(err) / abs(float(exact)) if exact else abs(err),
        error_vs_stored_addend=diff(result, Decimal(stored) * steps),
        stalled_at_step=stalled,
        result_dtype=add if reduced else acc,
    ).to_row()


def run(cfg: AccumulateConfig, ctx: Context):
    import torch

    exact = Decimal(repr(cfg.value)) * cfg.steps
    pairs = [(a, b) for a in cfg.dtypes for b in cfg.dtypes]
    record = checkpoints(cfg.steps, cfg.curve_points)
    record_set = set(record)
    rows, series = [], []
    total = len(pairs) + 1
    for i, (acc, add) in enumerate(pairs):
        result, curve, stalled = accumulate(
            cfg.value, cfg.steps, dtypes.torch_dtype(acc), dtypes.torch_dtype(add), ctx.device, record_set
        )
        stored = torch.tensor(cfg.value, dtype=dtypes.torch_dtype(add)).double().item()
        row = _sum_row(acc, add, result, exact, cfg.steps, stored, stalled)
        rows.append(row)
        series.append(CurveSeries(acc, add, tuple(curve)))
        yield Progress(i + 1, total, f"{acc} += {add}: {result:.6g}", rows=(row,))
    for add in cfg.dtypes:  # the same data, reduced by torch.sum in its own dtype
        data = torch.full((cfg.steps,), cfg.value, dtype=dtypes.torch_dtype(add), device=ctx.device)
        result = float(data.sum().double().item())
        stored = data[0].double().item()
        rows.append(_sum_row("torch.sum", add, result, exact, cfg.steps, stored, None))
    yield Progress(total, total, "torch.sum", rows=tuple(rows[-len(cfg.dtypes) :]))
    return Output(
        rows=rows,
        meta=AccumulateSummary(tuple(record), tuple(series), str(exact)).to_meta(),
    )


EXPERIMENTS = [
    Experiment(
        name="accumulate",
        title="Accumulation error: s += x by accumulator and addend dtype",
        config_type=AccumulateConfig,
        run=run,
        description=(__doc__ or "").partition("\n")[0],
    )
]

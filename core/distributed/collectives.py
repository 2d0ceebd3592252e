"""One collective at one message size, timed inside an initialised process group, with nccl-tests' figures.

Sizes follow nccl-tests (:mod:`core.measure.nccl_tests`): ``bytes`` is the largest buffer of a rank — the
buffer of all_reduce and broadcast, the gathered output of all_gather, the input of reduce_scatter, each
rank's send buffer of all_to_all. algbw = bytes / time; busbw = algbw × a factor that makes collectives
comparable with the link speed: 2(n−1)/n for all_reduce, (n−1)/n for all_gather, reduce_scatter and
all_to_all, 1 for broadcast.

Timing: the ranks warm up together (rank 0 decides when the warm-up has lasted long enough and
how many calls to time, and tells the others, so every rank makes the same calls), then every call
is timed on its own — CUDA events on a GPU, ``perf_counter_ns`` on a CPU — with nothing but the
collective between the two clock reads. Each rank's samples give its median; the job's time per
call is the **slowest rank's** median (its p20/p80 the spread), as a rank-by-rank timing loop would
report it. ``call_max_median_ms`` adds the median over calls of the per-call maximum over ranks:
how long until every rank had finished, stragglers included.
Inputs are fresh integer-valued floats in ±1…±8 (never zero); sums of them are exact in float32 in
any order. The timed calls run back to back on the same buffers, as nccl-tests' do (all_reduce works
in place, so its values grow from call to call; work between calls would desynchronise the ranks
and land in the next call's time). Then the inputs are restored, one more call runs, and its output
is checked value for value against an expectation each rank computes from the other ranks' seeds.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from core.measure.nccl_tests import busbw_factor
from core.measure.stats import gbs_summary, summarize, time_fields
from core.rows.interconnect import CollectivePoint, RankPoint
from core.units import GIB, KIB, MIB, exact_size_text

if TYPE_CHECKING:  # torch is imported where the ranks run, so the interconnect config reads this module without it
    import torch

    from core.measure.timing import TimingPlan

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all")
GPU_SIZES = tuple(KIB * 4**i for i in range(11))  # 1 KiB … 1 GiB, the issue's and nccl-tests' range
CPU_SIZES = tuple(KIB * 4**i for i in range(8))  # 1 KiB … 16 MiB: a default Gloo run takes seconds
MAX_BYTES = 16 * GIB
ELEMENT_BYTES = 4  # float32 payload
PROCESS_OVERHEAD_BYTES = 400 * MIB  # what a rank (Python + torch + the backend) holds besides its buffers
_UNSUPPORTED = re.compile(r"not supported|unsupported|not implemented|no support", re.IGNORECASE)


def resolve_backend(requested: str, on_gpu: bool) -> str:
    """The backend an ``auto`` request means: NCCL between GPUs where the job runs on a GPU, else Gloo."""
    if requested != "auto":
        return requested
    return "nccl" if on_gpu else "gloo"


@dataclass(frozen=True)
class Point:
    """One collective at one size; ``elements`` is a multiple of the world size so chunks are equal."""

    collective: str
    nbytes: int  # the size measured (the request rounded down to whole chunks)
    elements: int
    world: int

    @property
    def chunk(self) -> int:
        return self.elements // self.world

    @property
    def label(self) -> str:
        return f"{self.collective} {exact_size_text(self.nbytes)}"


def make_point(collective: str, requested_bytes: int, world: int) -> Point:
    elements = max(world, requested_bytes // ELEMENT_BYTES // world * world)
    return Point(collective, elements * ELEMENT_BYTES, elements, world)


def host_bytes_needed(rank_buffer_bytes: int, local_ranks: int) -> int:
    """Host memory the ranks of one box need together (they share its RAM): each rank's buffers plus its process."""
    return local_ranks * (rank_buffer_bytes + PROCESS_OVERHEAD_BYTES)


def buffer_bytes(collective: str, nbytes: int, world: int) -> int:
    """Bytes one rank allocates for a point: its buffers, plus the expectation and one regenerated input."""
    part = nbytes // world
    return {
        "all_reduce": 4 * nbytes,
        "all_gather": 2 * nbytes + 2 * part,
        "reduce_scatter": 2 * nbytes + 2 * part,
        "broadcast": 2 * nbytes,
        "all_to_all": 4 * nbytes,
    }[collective]


# --- the process group, as the measurement needs it ---------------------------------------------------


@dataclass(frozen=True)
class Comm:
    rank: int
    world: int
    device: str  # "cpu" or "cuda:N": where this rank's buffers live

    @property
    def is_cuda(self) -> bool:
        return self.device.startswith("cuda")

    def sync(self) -> None:
        if self.is_cuda:
            import torch

            torch.cuda.synchronize(self.device)

    def agree(self, value: int) -> int:
        """Rank 0's ``value`` on every rank."""
        import torch
        import torch.distributed as dist

        t = torch.tensor([int(value)], dtype=torch.int64, device=self.device)
        dist.broadcast(t, 0)
        return int(t.item())

    def all_floats(self, values: list[float]) -> torch.Tensor:
        """Every rank's ``values`` (same length on all ranks) as a world × len float64 CPU tensor."""
        import torch

        mine = torch.tensor(values, dtype=torch.float64, device=self.device)
        out = torch.empty(self.world * len(values), dtype=torch.float64, device=self.device)
        _all_gather(out, mine)
        return out.view(self.world, len(values)).cpu()


def _all_gather(out: torch.Tensor, inp: torch.Tensor) -> None:
    import torch.distributed as dist

    fn = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor  # torch < 2.13
    fn(out, inp)


def _reduce_scatter(out: torch.Tensor, inp: torch.Tensor) -> None:
    import torch.distributed as dist

    fn = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor  # torch < 2.13
    fn(out, inp)


# --- inputs, the operation and its expected result ------------------------------------------------------


def input_values(seed: int, rank: int, elements: int, device: str) -> torch.Tensor:
    """Rank ``rank``'s input: integer-valued float32 in ±1…±8, reproducible by any rank from the seed."""
    import torch

    gen = torch.Generator(device=device).manual_seed(seed * 100_003 + rank)
    magnitude = torch.randint(1, 9, (elements,), generator=gen, device=device, dtype=torch.int32)
    sign = torch.randint(0, 2, (elements,), generator=gen, device=device, dtype=torch.int32) * 2 - 1
    return (magnitude * sign).to(torch.float32)


@dataclass
class Operation:
    op: Callable[[], object]  # the timed call
    reset: Callable[[], object] | None  # restores fresh inputs before the checked call (in-place collectives)
    result: torch.Tensor  # what the checked call writes


def operation(point: Point, comm: Comm, seed: int) -> Operation:
    import torch
    import torch.distributed as dist

    c, n, dev = point.chunk, point.elements, comm.device
    name = point.collective
    if name == "all_reduce":
        pristine = input_values(seed, comm.rank, n, dev)
        buf = pristine.clone()
        return Operation(lambda: dist.all_reduce(buf), lambda: buf.copy_(pristine), buf)
    if name == "all_gather":
        inp, out = input_values(seed, comm.rank, c, dev), torch.empty(n, device=dev)
        return Operation(lambda: _all_gather(out, inp), None, out)
    if name == "reduce_scatter":
        inp, out = input_values(seed, comm.rank, n, dev), torch.empty(c, device=dev)
        return Operation(lambda: _reduce_scatter(out, inp), None, out)
    if name == "broadcast":
        pristine = input_values(seed, comm.rank, n, dev)
        buf = pristine.clone()
        return Operation(lambda: dist.broadcast(buf, 0), lambda: buf.copy_(pristine), buf)
    if name == "all_to_all":
        inp, out = input_values(seed, comm.rank, n, dev), torch.empty(n, device=dev)
        return Operation(lambda: dist.all_to_all_single(out, inp), None, out)
    raise ValueError(f"unknown collective {name!r}")


def expected(point: Point, comm: Comm, seed: int) -> torch.Tensor:
    """What this rank must hold after the call, rebuilt from every rank's seed."""
    import torch

    c, n, dev, r = point.chunk, point.elements, comm.device, comm.rank
    ranks = range(comm.world)
    name = point.collective
    if name == "broadcast":
        return input_values(seed, 0, n, dev)
    if name == "all_gather":
        return torch.cat([input_values(seed, j, c, dev) for j in ranks])
    if name == "all_to_all":
        return torch.cat([input_values(seed, j, n, dev)[r * c : (r + 1) * c] for j in ranks])
    total = torch.zeros(n if name == "all_reduce" else c, device=dev)
    for j in ranks:
        values = input_values(seed, j, n, dev)
        total += values if name == "all_reduce" else values[r * c : (r + 1) * c]
    return total


def check(result: torch.Tensor, want: torch.Tensor) -> tuple[int, float]:
    """(elements that differ, largest absolute difference); exact inputs make any difference an error."""
    diff = (result - want).abs()
    return int((diff > 0).sum()), float(diff.max()) if diff.numel() else 0.0


# --- timing ---------------------------------------------------------------------------------------------


def unsupported_reason(exc: BaseException) -> str | None:
    """The backend's own words when it refuses a collective (every rank refuses alike, so none hangs)."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text if isinstance(exc, (RuntimeError, NotImplementedError)) and _UNSUPPORTED.search(text) else None


@dataclass
class Measured:
    """What every rank measured for one point, gathered on every rank (rank 0 writes the rows)."""

    point: Point
    samples: torch.Tensor  # world × reps milliseconds
    mismatches: list[int]
    max_error: list[float]


def measure(point: Point, comm: Comm, plan: TimingPlan, seed: int) -> Measured:
    """Warm up, time, then check one more call on fresh inputs, on every rank. Raises what the backend raises."""
    from core.measure.timing import timed_calls, warm_up

    call = operation(point, comm, seed)
    # Every rank warms up until rank 0 has warmed up ``plan.warmup_ms``, and times as many calls as rank 0
    # decided. A blocking collective makes the current stream of the rank's device wait for NCCL's stream,
    # so the events of ``timed_calls`` on that stream bracket exactly the collective.
    reps = warm_up(call.op, comm.sync, plan, decide=comm.agree)
    samples = timed_calls(call.op, comm.device, reps)
    if call.reset:
        call.reset()
    call.op()
    comm.sync()
    wrong, err = check(call.result, expected(point, comm, seed))
    del call
    gathered = comm.all_floats(samples + [wrong, err])
    return Measured(
        point, gathered[:, :reps], [int(v) for v in gathered[:, reps]], [float(v) for v in gathered[:, reps + 1]]
    )


# --- rows -----------------------------------------------------------------------------------------------


def point_rows(m: Measured, backend: str, ranks: list[dict]) -> list[dict]:
    """One ``collective`` row (the job's figures) and one ``rank`` row per rank."""
    per_rank = [summarize(m.samples[r].tolist()) for r in range(m.point.world)]
    slowest = max(range(m.point.world), key=lambda r: per_rank[r]["median"])
    job = _job_figures(m, backend, slowest, per_rank[slowest], len({r.get("group_rank") for r in ranks}))
    own = [_rank_figures(m, backend, r, per_rank[r], ranks[r] if r < len(ranks) else {}) for r in range(m.point.world)]
    return [job.to_row(), *(r.to_row() for r in own)]


def _point(p: Point, backend: str) -> dict[str, Any]:
    """The fields of a collective's row and its ranks' rows that name the point."""
    size = exact_size_text(p.nbytes)
    return {"collective": p.collective, "backend": backend, "nbytes": p.nbytes, "size": size, "world_size": p.world}


def _job_figures(m: Measured, backend: str, slowest: int, stats: dict, nodes: int) -> CollectivePoint:
    """The job's figures: the slowest rank's time per call, algbw and busbw, the check of every rank's values."""
    p = m.point
    factor = busbw_factor(p.collective, p.world)
    algbw = gbs_summary(p.nbytes, stats)
    wrong = _mismatches(m)
    times: dict[str, Any] = dict(time_fields(stats))  # median_ms … p80_ms, reps
    return CollectivePoint(
        **_point(p, backend),
        dtype="float32",
        elements=p.elements,
        status="error" if wrong else "ok",
        reason=wrong,
        **times,
        algbw_gbs=algbw["gbs"],
        busbw_gbs=algbw["gbs"] * factor,
        busbw_factor=factor,
        algbw_gbs_p20=algbw["gbs_p20"],
        algbw_gbs_p80=algbw["gbs_p80"],
        busbw_gbs_p20=algbw["gbs_p20"] * factor,
        busbw_gbs_p80=algbw["gbs_p80"] * factor,
        check="mismatch" if wrong else "ok",
        slowest_rank=slowest,
        call_max_median_ms=summarize(m.samples.max(dim=0).values.tolist())["median"],
        nodes=nodes,
        samples_ms=tuple(m.samples[slowest].tolist()),
    )


def _mismatches(m: Measured) -> str | None:
    """Which ranks' values came back wrong, and how wrong, or None."""
    p = m.point
    wrong = [r for r in range(p.world) if m.mismatches[r]]
    out_elements = p.chunk if p.collective == "reduce_scatter" else p.elements
    if not wrong:
        return None
    return "wrong values on " + ", ".join(
        f"rank {r} ({m.mismatches[r]} of {out_elements} elements, largest difference {m.max_error[r]:g})" for r in wrong
    )


def _rank_figures(m: Measured, backend: str, rank: int, stats: dict, info: dict) -> RankPoint:
    """One rank's own time per call, where it ran (the launcher's ``info``) and whether its values were right."""
    return RankPoint(
        **_point(m.point, backend),
        dtype="float32",
        elements=m.point.elements,
        rank=rank,
        host=info.get("host"),
        group_rank=info.get("group_rank"),
        local_rank=info.get("local_rank"),
        device=info.get("device"),
        median_ms=stats["median"],
        p20_ms=stats["p20"],
        p80_ms=stats["p80"],
        min_ms=stats["min"],
        max_ms=stats["max"],
        check="mismatch" if m.mismatches[rank] else "ok",
        samples_ms=tuple(m.samples[rank].tolist()),
    )


def not_measured_row(point: Point, backend: str, status: str, reason: str) -> dict:
    """A point the ranks did not run (unsupported by the backend, or too large), with the reason."""
    factor = busbw_factor(point.collective, point.world)
    skipped = CollectivePoint(
        **_point(point, backend), elements=point.elements, status=status, reason=reason, busbw_factor=factor
    )
    return skipped.to_row()

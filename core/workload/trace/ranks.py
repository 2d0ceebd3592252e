"""Every rank of one job: its rank traces read one at a time, each by the single-trace analysis, side by side.

A rank is named by the trace's ``distributedInfo.rank``, else by its file name (``rank-3``, ``rank_3``,
``rank3``). The files must be ranks of one job: the same ``distributedInfo`` world size and backend, no rank
twice, no rank past the world size, and — where the ranks have ``ProfilerStep`` annotations — at least one
step number in common (ranks of one job profile the same steps). Anything else is refused, naming the files.

Per rank, from :func:`core.workload.trace.timeline.analyse_trace` on that rank's busiest GPU: kernel time (sum of
kernel durations), compute (union of compute kernels: HolisticTraceAnalysis's temporal ``compute_time``),
communication (union of collective kernels) and its *exposed* part (no compute hides it), idle (span − busy),
idle by cause, and each ``ProfilerStep``'s times. The **straggler** is judged once over every figure
(:func:`judge`): the rank the others wait for at the collectives, else a host-bound rank, else the rank with the
most compute time where it is over the others by more than noise. The rank with the most compute time;
its margin is measured against the other ranks' compute time (their median, the mean of the middle two for an
even count; the straggler is never among them, so with two ranks it is the other rank's), in µs and %, and its
kernel time per compute group against the other ranks' (where the extra time goes); and what each rank's host did while its GPU idled, by cause (rows of kind
``host_gap``: data loading, synchronisation, copies… with the operator holding most of each), so a rank that
waits on its DataLoader while the others compute is named by its cause, each step's part of it with the step;
and each rank's operators by GPU time (rows of kind ``op``, the top :data:`OPS_KEPT`), the straggler's extra time
by operator against the other ranks' (an operator's name is the same on every rank, where its kernels' may not
be); and each collective matched across the ranks, who arrived last and how long the others waited for it (rows
of kind ``arrival``, :mod:`core.workload.trace.arrivals`). Only the summary of a rank is kept before the next is read, so memory is one trace's columns at a time.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from core.arrays import median
from core.errors import ConfigError, InputRefused
from core.rows.trace import TraceStep
from core.rows.trace_ranks import Rank, RankGroup, RankHostGap, RankOp, RankStep, RankTables
from core.workload.files import job_files
from core.workload.findings import OTHERS
from core.workload.trace.arrivals import Call, arrivals, rank_calls
from core.workload.trace.host_gaps import host_gaps
from core.workload.trace.ops import PLACEHOLDERS, op_totals
from core.workload.trace.timeline import analyse_trace, read_trace

_RANK_NAME = re.compile(r"rank[-_]?(\d+)", re.I)
# What a rank row (and a rank's step row) keeps of the single-trace summary, under its name here (µs unless
# named otherwise): compute and communication are the unions of their kernels.
_RANK_FIELDS = {
    "kernel_time_us": "kernel_time_us", "kernel_count": "kernel_count", "busy_us": "busy_us", "span_us": "span_us",
    "idle_us": "idle_us", "idle_share": "idle_share", "compute_us": "compute_union_us",
    "communication_us": "communication_union_us", "exposed_communication_us": "exposed_communication_us",
    "compute_and_communication_us": "compute_and_communication_us", "copy_us": "copy_union_us",
}  # fmt: skip
_NOT_COMPUTE = {"communication", "memory"}  # kernel groups outside the compute the straggler is named by
# what a rank's step row keeps of the trace's step (its fields, stored under their names; 0 where the step has none)
_STEP_FIELDS = ("wall_us", "kernel_time_us", "compute_us", "communication_us", "exposed_communication_us", "idle_us",
                "host_wait_us")  # fmt: skip
OPS_KEPT = 20  # each rank's operators stored as rows, the most GPU time first (the straggler's are found on all)


def rank_files(paths: list[str] | tuple[str, ...]) -> list[Path]:
    """The rank traces of an import (:func:`core.workload.files.job_files`)."""
    return job_files(paths, "rank trace", "the ranks to compare")


@dataclass
class RankTrace:
    """What is kept of one rank once its trace is dropped: its row, its steps' rows, its kernel groups and what
    its host did while its GPU idled (:func:`core.workload.trace.host_gaps.host_gaps`, by cause), and its operators'
    GPU time (:func:`core.workload.trace.ops.op_totals`: every operator, over every module), and its collective calls
    (:func:`core.workload.trace.arrivals.rank_calls`), to be matched across the ranks."""

    row: Rank
    steps: list[RankStep]
    groups: list[RankGroup]
    step_numbers: set[int] = field(default_factory=set)
    quirks: dict[str, int] = field(default_factory=dict)
    host_gaps: list[RankHostGap] = field(default_factory=list)
    ops: list[RankOp] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)


def read_rank(path: Path) -> RankTrace:
    """One rank's trace read and analysed; a file that is not a trace is refused naming it."""
    try:
        trace = read_trace(path)
    except InputRefused as exc:
        raise ConfigError(f"{path.name}: {exc}") from None
    rank = trace.rank
    if rank is None and (m := _RANK_NAME.search(path.name)):
        rank = int(m.group(1))
    if rank is None:
        raise ConfigError(f"{path.name}: no rank: the trace has no distributedInfo.rank and its name no rank-N")
    world, backend, origin = trace.world_size, trace.backend, trace.origin_us
    tables, meta = analyse_trace(trace, top=1)
    if not meta.get("gpu_activities"):
        raise ConfigError(f"{path.name}: rank {rank} has no GPU kernels or copies to compare")
    gaps, by_step = host_gaps(trace, meta["device"], top=1, steps=tables.steps)
    ops = [RankOp(rank=rank, op=o["op"], gpu_time_us=o["gpu_time_us"], kernels=o["kernels"], calls=o["calls"])
           for o in op_totals(trace, meta["device"])]  # fmt: skip
    calls = rank_calls(trace, meta["device"])
    del trace
    row = Rank.of(
        {
            "rank": rank,
            "file": path.name,
            "world_size": world,
            "backend": backend,
            "origin_us": origin,
            "device": meta["device"],
            "device_name": meta["device_name"],
            **{name: meta[key] for name, key in _RANK_FIELDS.items()},
            **meta["idle_causes"],  # on the rank's device timeline: they add up to its idle
            **{  # HolisticTraceAnalysis' idle breakdown, each stream's gaps added up
                key.removesuffix("_us") + "_summed_over_streams_us": us
                for key, us in (meta.get("idle_causes_summed_over_streams") or {}).items()
            },
            "steps": meta["steps"],
        }
    )
    steps = [_rank_step(rank, s, held) for s, held in zip(tables.steps, by_step)]
    groups = [RankGroup(rank=rank, group=g.group, count=g.count, total_us=g.total_us) for g in tables.groups if g.count]
    causes = [  # what the host did while the rank's GPU idled, by cause, with the operator that held most of it
        RankHostGap(
            rank=rank,
            cause=c["cause"],
            time_us=c["time_us"],
            share=c["share"],
            top_op=c["top_ops"][0]["op"] if c["top_ops"] else None,
        )
        for c in gaps.get("causes") or []
    ]
    quirks = dict(meta.get("quirks") or {})
    return RankTrace(row, steps, groups, {s.step for s in steps}, quirks, causes, ops, calls)


def _rank_step(rank: int, step: TraceStep, held: dict[str, float]) -> RankStep:
    """A step of a rank: the trace step's figures (0 where it has none) and its GPU window's idle by the host's cause."""
    figures = {name: 0.0 if (v := getattr(step, name)) is None else v for name in _STEP_FIELDS}
    return RankStep.of({"rank": rank, "step": step.step, **figures}).adding(window_causes=held)


def check_one_job(first: RankTrace, other: RankTrace, seen: dict[int, str]) -> None:
    """Refuse ``other`` when it is not a rank of ``first``'s job (or repeats a rank already ``seen``)."""
    a, b = first.row, other.row

    def job(r: Rank) -> str:
        return f"world size {r.world_size if r.world_size is not None else 'unknown'}, backend {r.backend or 'unknown'}"

    if (a.world_size, a.backend) != (b.world_size, b.backend):
        raise ConfigError(
            f"ranks of two different jobs: {a.file} says {job(a)}; {b.file} says {job(b)} (distributedInfo)"
        )
    if b.rank in seen:
        raise ConfigError(f"{seen[b.rank]} and {b.file} are both rank {b.rank}: one job has each rank once")
    if b.world_size is not None and not 0 <= b.rank < b.world_size:
        raise ConfigError(f"{b.file}: rank {b.rank} is outside world size {b.world_size}")
    if first.step_numbers and other.step_numbers and not first.step_numbers & other.step_numbers:
        raise ConfigError(
            f"ranks of two different jobs (or profiling windows): {a.file} has ProfilerSteps "
            f"{_steps_text(first.step_numbers)}, {b.file} has {_steps_text(other.step_numbers)}, none in common"
        )


def _steps_text(steps: set[int]) -> str:
    s = sorted(steps)
    return f"{s[0]}–{s[-1]}" if len(s) > 1 else str(s[0])


def others_median(values: dict[int, float], rank: int) -> float:
    """The median of ``values`` over the ranks but ``rank`` (its own value where it is the only rank): a rank is
    held against the others, never against a median it takes part in (with two ranks, that is half its margin)."""
    others = [v for r, v in values.items() if r != rank]
    return median(others) if others else values[rank]


def straggler(rank_rows: Sequence[Rank]) -> dict:
    """The rank with the most compute time (the lowest such rank on a tie) against the other ranks'."""
    compute = {r.rank: float(r.compute_us) for r in rank_rows}
    worst = max(compute, key=lambda k: (compute[k], -k))
    median = others_median(compute, worst)
    margin = compute[worst] - median
    return {
        "rank": worst,
        "compute_us": compute[worst],
        "median_compute_us": median,
        "margin_us": margin,
        "margin_pct": 100.0 * margin / median if median else 0.0,
        "against": OTHERS,
        "measure": "compute time (union of compute kernels) against the median over the other ranks",
    }


NOISE_PCT = 2.0  # a rank's compute within this of the other ranks' is noise, not what holds the job back
HOST_BOUND = 0.10  # a rank whose GPU waits on its host this much more of its span than the others' is host-bound


def judge(rank_rows: Sequence[Rank], worst: dict, arrived: dict, host_rows: Sequence[RankHostGap]) -> dict:
    """One judgement of which rank holds the job back, over every figure that can say it: who arrives last at the
    collectives matched across the ranks (the others wait for it: the most direct evidence), whose GPU waits on its
    own host far more than the other ranks' (host-bound), and whose compute is over the other ranks' by more
    than :data:`NOISE_PCT` (``worst``: :func:`straggler`). ``{"rank"`` (None: no rank stands out)``, "reasons",
    "compute_pct", "host_wait_share", "median_host_wait_share", "host_cause", "last_arrivals", "matched",
    "waited_us"}``, reasons among ``arrives_last``, ``host_bound``, ``compute``."""
    host = {r.rank: (r.host_wait_us or 0.0) / r.span_us for r in rank_rows if r.span_us}
    bound = max(host, key=lambda k: (host[k], -k)) if host else None
    if bound is not None and host[bound] - others_median(host, bound) < HOST_BOUND:
        bound = None
    by_compute = worst["rank"] if worst["margin_pct"] >= NOISE_PCT and len(rank_rows) > 1 else None
    matched, last = arrived.get("matched", 0), arrived.get("last_rank")
    by_arrival = last if matched and 2 * arrived.get("last_arrivals", 0) > matched else None
    rank = next((r for r in (by_arrival, bound, by_compute) if r is not None), None)
    reasons = [why for why, r in (("arrives_last", by_arrival), ("host_bound", bound), ("compute", by_compute))
               if r is not None and r == rank]  # fmt: skip
    compute = {r.rank: r.compute_us for r in rank_rows}
    median_compute = others_median(compute, rank) if rank is not None else 0.0
    mine = [h for h in host_rows if h.rank == rank]
    cause = max(mine, key=lambda h: h.time_us, default=None)
    return {
        "rank": rank,
        "reasons": reasons,
        "compute_pct": 100.0 * (compute[rank] - median_compute) / median_compute
        if rank is not None and median_compute
        else None,
        "host_wait_share": host.get(rank) if rank is not None else None,
        "median_host_wait_share": others_median(host, rank) if rank is not None and rank in host else None,
        "host_cause": {"cause": cause.cause, "time_us": cause.time_us, "op": cause.top_op} if cause else None,
        "last_arrivals": arrived.get("last_arrivals", 0) if rank == by_arrival and rank is not None else 0,
        "matched": matched,
        "waited_us": arrived.get("waited_us", 0.0) if rank == by_arrival and rank is not None else 0.0,
        "measure": "the rank arriving last at most of the collectives matched across the ranks, else the rank whose "
        f"GPU waits on its host ≥ {HOST_BOUND:.0%} of its span more than the other ranks' median, else the rank "
        f"whose compute is ≥ {NOISE_PCT:g}% over the other ranks' median",
    }


def extra_by_group(ranks: list[RankTrace], rank: int) -> list[dict]:
    """Where the straggler's extra time goes: ``rank``'s kernel time in each compute group against the median
    over the other ranks of that group's (a rank without the group counts 0), the largest extra first. Group times
    are sums of kernel durations, so the extras need not add up to the margin, which is a union."""
    by_rank = {r.row.rank: {g.group: g.total_us for g in r.groups} for r in ranks}
    return _against_median(by_rank, rank, "group", "kernel_time_us", _NOT_COMPUTE)


def extra_by_op(ranks: list[RankTrace], rank: int, top: int = 5) -> list[dict]:
    """The operators holding the straggler's extra time: ``rank``'s GPU time in each operator against the median
    over the other ranks of that operator's (a rank without it counts 0), the ``top`` largest extras. Like the groups,
    sums of durations (kernels, copies and sets), so they need not add up to the margin. Activity no operator
    launched names nothing to change: it is left out."""
    by_rank = {r.row.rank: {o.op: o.gpu_time_us for o in r.ops} for r in ranks}
    return _against_median(by_rank, rank, "op", "gpu_time_us", set(PLACEHOLDERS))[:top]


def _against_median(
    by_rank: dict[int, dict[str, float]], rank: int, label: str, figure: str, left_out: set[str]
) -> list[dict]:
    """``rank``'s ``figure`` for each name any rank has (but those ``left_out``) against the median over the
    other ranks of that name's (a rank without it counts 0): ``{label, figure, "median_" + figure, "extra_us"}``,
    the largest extra first."""
    out = []
    for name in sorted({n for values in by_rank.values() for n in values} - left_out):
        own = by_rank[rank].get(name, 0.0)
        median = others_median({r: values.get(name, 0.0) for r, values in by_rank.items()}, rank)
        out.append({label: name, figure: own, f"median_{figure}": median, "extra_us": own - median})
    return sorted(out, key=lambda r: -r["extra_us"])


def combine(ranks: list[RankTrace]) -> tuple[RankTables, dict]:
    """The stored run of a job: rank rows by rank, then every rank's steps and kernel groups; the summary."""
    ranks = sorted(ranks, key=lambda r: r.row.rank)
    rank_rows = [r.row for r in ranks]
    first = rank_rows[0]
    common = set.intersection(*(r.step_numbers for r in ranks)) if all(r.step_numbers for r in ranks) else set()
    worst = straggler(rank_rows)
    worst["groups"] = extra_by_group(ranks, worst["rank"])
    worst["ops"] = extra_by_op(ranks, worst["rank"])
    arrival_rows, waits, arrived = arrivals({r.row.rank: r.calls for r in ranks})
    host_rows = [c for r in ranks for c in r.host_gaps]
    verdict = judge(rank_rows, worst, arrived, host_rows)
    tables = RankTables(
        ranks=tuple(rank_rows),
        steps=tuple(s for r in ranks for s in r.steps),
        groups=tuple(g for r in ranks for g in r.groups),
        host_gaps=tuple(host_rows),
        ops=tuple(o for r in ranks for o in r.ops[:OPS_KEPT]),
        arrivals=arrival_rows if arrived["matched"] else (),
        collective_waits=waits if arrived["matched"] else (),
    )
    meta = {
        "ranks": [r.rank for r in rank_rows],
        "files": [r.file for r in rank_rows],
        "world_size": first.world_size,
        "backend": first.backend,
        "straggler_rank": verdict["rank"],  # the rank that holds the job back, by every figure (None: no rank)
        "straggler": worst,  # the rank with the most compute, against the other ranks'
        "verdict": verdict,
        "common_steps": sorted(common),
        "arrivals": arrived,
        "quirks": {f"rank {r.row.rank}: {why}": n for r in ranks for why, n in r.quirks.items()},
        "measure": "per rank, on its busiest GPU: kernel time = sum of kernel durations; compute, communication = "
        "unions of compute and collective kernels on the device timeline; exposed = communication no compute hides; "
        "idle = span − busy; the straggler's groups: sums of kernel durations against the other ranks' median",
    }
    return tables, meta

"""The tables the profiler trace view lists under its charts, from a stored ``profiler-trace`` or
``profiler-trace-ranks`` run: the kernel group rules, each rank's times, each step's wall time rank by rank, what
the host did in each step's idle, each rank's operators, and the collectives as nccl-tests prints them.
No Streamlit and no Plotly: the page only places them."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from core.result import RunResult
from core.rows.trace import HOST_CAUSES, TraceTables
from core.rows.trace_ranks import RankTables
from core.rows.trace_summary import LaunchSummary, TraceSummary
from render.table import with_dashes

RANK_COLUMNS = [
    "rank",
    "file",
    "device_name",
    "kernel_time_us",
    "compute_us",
    "communication_us",
    "exposed_communication_us",
    "idle_us",
    "span_us",
    "host_wait_us",
]


def count_text(items: Sequence, noun: str) -> str:
    """How many of ``noun`` a list holds, in words ("1 stream", "4 GPUs"), never the list's Python form."""
    return f"{len(items):,} {noun}{'' if len(items) == 1 else 's'}"


def launch_metric(launch: LaunchSummary) -> tuple[str, str, str, str]:
    """The page's launch figure (label, value, delta, help): the share of launch-bound activities (launched onto
    an idle GPU), or, where graphs launched everything, that it does not apply; a run stored before the
    redefinition has only HolisticTraceAnalysis' short kernels, named so."""
    if not launch.measured_launch_bound:
        return (
            "Shorter than their launch call",
            f"{launch.launch_bound_share:.1%}",
            f"median launch delay {launch.launch_delay_p50_us:,.1f} µs",
            "HolisticTraceAnalysis' short kernels: kernels (and copies) that ran shorter than their launch call "
            "took on the CPU. It says nothing of whether the GPU waited on launches (this run was stored before "
            "the lab measured that).",
        )
    own = launch.launched - launch.graph_launched
    graphs = (
        f" {launch.graph_launched:,} activities came from CUDA/HIP graph launches: the comparison does not "
        "apply to them."
        if launch.graph_launched
        else ""
    )
    about = (
        "Activities whose own launch call ended after every earlier activity on the GPU had ended: the GPU had "
        "nothing queued and waited on the launch (fuse the kernels, or capture them in a CUDA graph)."
        + graphs
        + f" HolisticTraceAnalysis' short kernels (shorter than their launch call): "
        f"{launch.shorter_than_launch_call_share:.1%}."
    )
    if not own:
        return "Launch-bound", "n/a: CUDA graphs", f"{launch.graph_launched:,} graph-launched", about
    return (
        "Launch-bound",
        f"{launch.launch_bound_share:.1%}",
        f"GPU idle {launch.launch_wait_us / 1000:,.3f} ms before them",
        about,
    )


def rules_table(s: TraceSummary) -> list[dict]:
    """What each kernel group rule matched, in milliseconds (empty for runs stored before the rules)."""
    return [{"rule": r.rule, "group": r.group, "kernels": r.count, "ms": r.us / 1000} for r in s.rules]


def trace_table(run: RunResult, name: str) -> pd.DataFrame:
    """One table of a trace (``kernels``, ``steps``), without the kind column; a figure a row lacks (a step the
    profiler stopped in before any kernel) reads "—"."""
    rows = TraceTables.from_run(run).frame(name)
    return rows if rows.empty else with_dashes(rows.drop(columns=["kind"]))


def ranks_table(run: RunResult) -> pd.DataFrame:
    """Each rank's file, GPU ("—" where its file names none) and times (µs), one row per rank."""
    return with_dashes(RankTables.from_run(run).frame("ranks").reindex(columns=RANK_COLUMNS))


def _per_rank_ms(
    rows: pd.DataFrame, index: str, values: str, top: int | None = None, none: float | None = 0.0
) -> pd.DataFrame:
    """``values`` (µs) of ``rows`` in ms, one row per ``index``, one column per rank ("rank 0", …), ``none`` where
    a rank has none (None: missing); with ``top``, the rows of the most time over the ranks first, ``top`` of them."""
    rows = rows.astype({"rank": int})
    table = rows.pivot_table(index=index, columns="rank", values=values, aggfunc="sum", fill_value=none) / 1000
    if top is not None:
        table = table.loc[table.sum(axis=1).sort_values(ascending=False).index[:top]]
    return table.rename(columns=lambda r: f"rank {r}")


def step_walls_ms(run: RunResult) -> pd.DataFrame:
    """Each step's wall time in ms, one row per step, one column per rank ("rank 0", …), missing where a rank has
    no such step; empty without steps."""
    steps = RankTables.from_run(run).frame("steps")
    return steps if steps.empty else _per_rank_ms(steps.astype({"step": int}), "step", "wall_us", none=None)


def host_gaps_ms(run: RunResult) -> pd.DataFrame:
    """What each rank's host did while its GPU idled: ms by cause (rows, the most time over the ranks first), one
    column per rank ("rank 0", …); a cause a rank did not have is 0 ms; empty for runs stored without them."""
    gaps = RankTables.from_run(run).frame("host_gaps")
    return gaps if gaps.empty else _per_rank_ms(gaps, "cause", "time_us", top=len(gaps))


def step_host_ms(run: RunResult) -> pd.DataFrame:
    """What the host did during each step's idle: ms by cause (columns, the causes some step has), one row per
    step; empty without steps or for runs stored before the per-step causes."""
    steps = TraceTables.from_run(run).steps
    held = [name for name in HOST_CAUSES if any(s.window_causes.get(name, 0.0) > 0 for s in steps)]
    if not held:
        return pd.DataFrame()
    ms = {name: [s.window_causes.get(name, float("nan")) / 1000 for s in steps] for name in held}
    return pd.DataFrame(ms, index=pd.Index([int(s.step) for s in steps], name="step"))


def ops_ms(run: RunResult, top: int = 10) -> pd.DataFrame:
    """Each rank's GPU time by operator in ms (rows: the ``top`` operators by time over the ranks; one column per
    rank, "rank 0", …; an operator not among a rank's stored ones is 0 ms); empty for runs stored without them."""
    ops = RankTables.from_run(run).frame("ops")
    return ops if ops.empty else _per_rank_ms(ops, "op", "gpu_time_us", top=top)


def collectives_table(run: RunResult) -> pd.DataFrame:
    """The trace's collectives as nccl-tests prints them (ms, GB/s); a figure nccl-tests has none for is missing;
    empty for runs stored before the figures or traces that recorded none."""
    calls = TraceTables.from_run(run).frame("collectives")
    if calls.empty:
        return calls
    return pd.DataFrame(
        {
            "collective": calls["collective"],
            "size": calls["size"],
            "dtype": calls["dtype"],
            "group": calls["group_size"].astype(int),
            "calls": calls["calls"].astype(int),
            "median ms": calls["median_us"] / 1000,
            "total ms": calls["total_us"] / 1000,
            "algbw GB/s": calls["algbw_gbs"],
            "busbw GB/s": calls["busbw_gbs"],
        }
    )


def collective_waits_ms(run: RunResult) -> pd.DataFrame:
    """Each collective matched across the ranks: its calls, its kernels' time over calls and ranks (ms) and how
    much of it waited for the last rank; empty where nothing was matched or for runs stored before."""
    rows = RankTables.from_run(run).frame("collective_waits")
    if rows.empty:
        return rows
    return pd.DataFrame(
        {
            "collective": rows["collective"],
            "calls": rows["calls"].astype(int),
            "kernel ms": rows["kernel_time_us"] / 1000,
            "waited ms": rows["waited_us"] / 1000,
            "% waited": rows["waited_share"] * 100,
        }
    )


def arrivals_ms(run: RunResult) -> pd.DataFrame:
    """Each rank's wait for the last rank to arrive at the collectives matched across the ranks (ms), and how
    often it arrived last; empty where nothing was matched or for runs stored before."""
    rows = RankTables.from_run(run).frame("arrivals")
    if rows.empty:
        return rows
    return pd.DataFrame(
        {
            "rank": rows["rank"].astype(int),
            "collectives matched": rows["collectives"].astype(int),
            "waited ms": rows["waited_us"] / 1000,
            "arrived last": rows["last_arrivals"].astype(int),
        }
    )

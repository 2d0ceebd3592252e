"""What an imported trace says, in words: one trace (``python -m core trace FILE``), a job's ranks (``trace DIR``)
and two traces compared (``trace-diff``). Plain text from the typed tables (:mod:`core.rows.trace`) and the run's
summary, beside the engine, so the CLI and the page say the same and the engine never imports the renderers."""

from __future__ import annotations

from collections.abc import Sequence

from core.rows.trace import Change, Rank, RankTables, TraceStep, TraceTables
from core.text import quirk_lines
from core.units import duration_text
from core.workload.findings import against_text
from core.workload.trace.arrivals import matching_text
from core.workload.trace.collective_calls import collective_lines
from core.workload.trace.diff import TraceDiff, largest_changes
from core.workload.trace.host_gaps import before_first_kernel_lines, host_gap_lines
from core.workload.trace.ops import op_lines
from core.workload.trace.timeline import KERNEL_WAIT_US, gpu_text

MS = 1000.0  # µs in a ms


def _ms(us: float) -> str:
    """A time in µs as the lab writes durations."""
    return duration_text(us / 1e6)


# --- one trace --------------------------------------------------------------------------------------------------


def trace_lines(meta: dict, tables: TraceTables) -> list[str]:
    """Everything the trace command says after its findings: the host's side of the gaps, the operators, the
    collectives and the summary."""
    host = before_first_kernel_lines(meta) + host_gap_lines(meta)
    return host + op_lines(meta) + collective_lines(tables.collectives) + report_lines(meta, tables)


def report_lines(meta: dict, tables: TraceTables) -> list[str]:
    """The trace summary as text: the GPU's times, idle by cause, launches, groups, rules, kernels, steps."""
    if not meta.get("gpu_activities"):
        return [meta.get("note", "no GPU activity")]
    out = _summary_lines(meta) + _idle_lines(meta) + _launch_summary(meta)
    out += _group_lines(tables) + _rule_lines(meta) + _kernel_lines(tables) + _step_lines(meta, tables.steps)
    return out + quirk_lines(meta)


def _summary_lines(meta: dict) -> list[str]:
    return [
        f"{meta['events']:,} events; GPU {meta['device']} ({gpu_text(meta)}; the file "
        f"has GPU {listed(meta['devices'])}): {meta['kernel_count']:,} kernels on streams {listed(meta['streams'])}",
        f"kernel time {meta['kernel_time_us'] / MS:,.3f} ms (sum of durations); busy {meta['busy_us'] / MS:,.3f} ms "
        f"of a {meta['span_us'] / MS:,.3f} ms span — idle {meta['idle_us'] / MS:,.3f} ms ({meta['idle_share']:.1%})",
        f"compute {meta['compute_union_us'] / MS:,.3f} ms, copies {meta['copy_union_us'] / MS:,.3f} ms, "
        f"communication {meta['communication_union_us'] / MS:,.3f} ms (exposed "
        f"{meta['exposed_communication_us'] / MS:,.3f} ms); overlap compute∩comm "
        f"{meta['compute_and_communication_us'] / MS:,.3f} ms, compute∩copy {meta['compute_and_copy_us'] / MS:,.3f} ms",
    ]


def _idle_lines(meta: dict) -> list[str]:
    out = []
    threshold = f"(< {meta.get('kernel_wait_threshold_us', KERNEL_WAIT_US):g} µs)"
    if causes := meta.get("idle_causes"):  # runs stored before the idle breakdown have none
        device = meta.get("idle_causes_basis") == "device"
        out.append(
            (
                "idle by cause (gaps on the device timeline, the union of its streams; they add up to the idle): "
                if device
                else "idle by cause (gaps between kernels on each stream, summed over streams): "
            )
            + f"host wait {causes['host_wait_us'] / MS:,.3f} ms, kernel wait {causes['kernel_wait_us'] / MS:,.3f} ms "
            f"{threshold}, other {causes['other_wait_us'] / MS:,.3f} ms"
        )
    if hta := meta.get("idle_causes_summed_over_streams"):
        out.append(
            f"  per stream, summed over streams (HolisticTraceAnalysis' idle breakdown; can exceed the idle): host "
            f"wait {hta['host_wait_us'] / MS:,.3f} ms, kernel wait {hta['kernel_wait_us'] / MS:,.3f} ms, other "
            f"{hta['other_wait_us'] / MS:,.3f} ms"
        )
    return out


def _launch_summary(meta: dict) -> list[str]:
    launch = meta.get("launch") or {}
    if not launch.get("launched"):
        return []
    return [
        f"launches: {launch['launched']:,} activities matched to their launch call; start − call start median "
        f"{launch['launch_delay_p50_us']:,.1f} µs, p90 {launch['launch_delay_p90_us']:,.1f} µs, p99 "
        f"{launch['launch_delay_p99_us']:,.1f} µs, max {launch['launch_delay_max_us']:,.1f} µs",
        *("  " + line for line in launch_lines(launch)),
    ]


def launch_lines(launch: dict) -> list[str]:
    """What the launches say, in words: launch-bound (the GPU waited on them), CUDA graphs, HTA's short kernels."""
    if "shorter_than_launch_call" not in launch:  # a run stored before: launch_bound was HTA's short kernels
        return [
            f"{launch['launch_bound']:,} of {launch['launched']:,} ({launch['launch_bound_share']:.1%}) ran shorter "
            "than their launch call (HolisticTraceAnalysis' short kernels; not whether the GPU waited on launches)"
        ]
    own = launch["launched"] - launch["graph_launched"]
    out = []
    if own:
        out.append(
            f"launch-bound (launched onto an idle GPU: the call ended after every earlier activity had ended) "
            f"{launch['launch_bound']:,} of {own:,} ({launch['launch_bound_share']:.1%}), the GPU idle "
            f"{launch['launch_wait_us'] / 1000:,.3f} ms before them"
        )
    if launch["graph_launched"]:
        out.append(
            f"CUDA/HIP graphs: {launch['graph_launched']:,} activities launched by a graph (cudaGraphLaunch, or "
            "several on one launch call): launch-bound and the launch call's length do not apply to them"
        )
    out.append(
        f"shorter than their launch call (HolisticTraceAnalysis' short kernels): {launch['shorter_than_launch_call']:,}"
        f" of {launch['launched']:,} ({launch['shorter_than_launch_call_share']:.1%})"
    )
    return out


def _group_lines(tables: TraceTables) -> list[str]:
    out = ["groups (share of GPU time: kernels + copies + memsets, summed; of kernel time: kernels only):"]
    for g in tables.groups:
        if g.count:
            kernels = f"{g.kernel_share:6.1%} of kernel time" if g.kernel_share is not None else " " * 20
            out.append(
                f"  {g.group:<18} {g.total_us / MS:>10,.3f} ms  {g.share:6.1%} of GPU time  {kernels}  "
                f"{g.count:>7,} launches"
            )
    return out


def _rule_lines(meta: dict) -> list[str]:
    if not meta.get("rules"):
        return []
    out = ["rules (what each matched):"]
    for r in meta["rules"]:
        if r["count"]:
            out.append(f"  {r['us'] / MS:>10,.3f} ms  ×{r['count']:<7,} {r['group']:<14} {r['rule']}")
    return out


def _kernel_lines(tables: TraceTables) -> list[str]:
    out = ["top kernels (share of GPU time: kernels + copies + memsets):"]
    for k in tables.kernels:
        name = k.name if len(k.name) <= 90 else k.name[:87] + "…"
        out.append(f"  {k.total_us / MS:>10,.3f} ms  {k.share:6.1%}  ×{k.count:<6,} [{k.group}] {name}")
    return out


def _step_lines(meta: dict, steps: Sequence[TraceStep]) -> list[str]:
    out = [f"steps ({meta['step_basis']}):" if steps else meta["step_basis"]]
    for r in steps:  # runs stored before the GPU windows put busy beside the wall
        out.append(
            f"  step {r.step:>5}: wall {r.wall_us / MS:,.3f} ms, kernels {(r.kernel_time_us or 0) / MS:,.3f} ms"
            + (f"; GPU window {r.gpu_window_us / MS:,.3f} ms: " if r.gpu_window_us is not None else ", ")
            + f"busy {(r.busy_us or 0) / MS:,.3f} ms, idle {(r.idle_us or 0) / MS:,.3f} ms"
            + (f", host wait {r.host_wait_us / MS:,.3f} ms" if r.host_wait_us is not None else "")
            + step_host_text(r)
        )
    return out


def step_host_text(step: TraceStep) -> str:
    """The two causes holding most of a step's gaps on the host's side (runs stored before them: nothing)."""
    held = sorted(((us, name) for name, us in step.window_causes.items() if us), reverse=True)[:2]
    return "; the host: " + ", ".join(f"{name} {us / 1000:,.3f} ms" for us, name in held) if held else ""


def listed(ids: list[int]) -> str:
    """GPU or stream ids as a person writes them: "0, 1 and 7", never a Python list."""
    text = [str(i) for i in ids]
    return " and ".join([", ".join(text[:-1]), text[-1]]) if len(text) > 1 else "".join(text)


# --- a job's ranks ----------------------------------------------------------------------------------------------


def ranks_lines(meta: dict, tables: RankTables) -> list[str]:
    """Everything the trace command says of a job's ranks after its findings."""
    out = _rank_table(meta, tables.ranks) + _straggler_lines(meta)
    out += _rank_step_lines(tables) + _rank_gap_lines(tables) + _arrival_lines(meta, tables)
    return out + _rank_op_lines(meta, tables) + quirk_lines(meta)


def _rank_table(meta: dict, ranks: Sequence[Rank]) -> list[str]:
    out = [f"{'rank':>5} {'compute':>10} {'comm':>10} {'exposed':>10} {'idle':>10} {'span':>10} {'kernels':>10}  file"]
    for r in ranks:
        mark = " ← straggler" if r.rank == meta["straggler_rank"] else ""
        out.append(
            f"{r.rank:>5} {_ms(r.compute_us):>10} {_ms(r.communication_us):>10} "
            f"{_ms(r.exposed_communication_us):>10} {_ms(r.idle_us):>10} {_ms(r.span_us):>10} "
            f"{_ms(r.kernel_time_us):>10}  {r.file}{mark}"
        )
    return out


def verdict_text(meta: dict) -> str | None:
    """Which rank holds the job back and why, in words; None for runs stored before the judgement."""
    verdict = meta.get("verdict") or {}
    if not verdict:
        return None
    held, said = verdict["rank"], ", ".join(r.replace("_", " ") for r in verdict["reasons"])
    return f"holding the job back: rank {held} ({said})" if held is not None else "no rank holds the job back"


def _straggler_lines(meta: dict) -> list[str]:
    s = meta["straggler"]
    out = [text] if (text := verdict_text(meta)) else []
    return out + [
        f"most compute: rank {s['rank']}, {_ms(s['compute_us'])} against {against_text(s, len(meta['ranks']))} "
        f"{_ms(s['median_compute_us'])}: {_ms(s['margin_us'])} ({s['margin_pct']:+.1f}%)"
    ]


def _rank_step_lines(tables: RankTables) -> list[str]:
    if not tables.steps:
        return []
    out = ["step wall time per rank:"]
    for step in sorted({r.step for r in tables.steps}):
        on = sorted((r for r in tables.steps if r.step == step), key=lambda r: r.rank)
        out.append(f"  step {step:>6}: " + ", ".join(f"rank {r.rank} {_ms(r.wall_us)}" for r in on))
    return out


def _rank_gap_lines(tables: RankTables) -> list[str]:
    if not tables.host_gaps:
        return []
    out = ["the host while each rank's GPU idled (launching thread):"]
    for rank in sorted({r.rank for r in tables.host_gaps}):
        mine = sorted((r for r in tables.host_gaps if r.rank == rank), key=lambda r: -r.time_us)
        out.append(f"  rank {rank}: " + ", ".join(f"{r.cause} {_ms(r.time_us)}" for r in mine))
    return out


def _arrival_lines(meta: dict, tables: RankTables) -> list[str]:
    out = [matching] if (matching := matching_text(meta.get("arrivals") or {})) else []
    if tables.arrivals:
        a = meta["arrivals"]
        out.append(
            f"rank {a['last_rank']} arrived last at {a['last_arrivals']:,}; each rank's wait for the last to arrive: "
            + ", ".join(f"rank {r.rank} {_ms(r.waited_us)}" for r in tables.arrivals)
        )
    if tables.collective_waits:
        out.append("each collective's kernel time waiting for the last rank (over its calls and ranks):")
        for r in tables.collective_waits[:10]:
            share = f" ({r.waited_share:.1%})" if r.waited_share is not None else ""
            out.append(f"  {_ms(r.waited_us):>10} of {_ms(r.kernel_time_us)}{share}  ×{r.calls:,} {r.collective}")
    return out


def _rank_op_lines(meta: dict, tables: RankTables) -> list[str]:
    s, out = meta["straggler"], []
    if extra := s.get("ops"):
        out.append(f"the straggler's operators against {against_text(s, len(meta['ranks']))} (summed GPU time):")
        for o in extra:
            out.append(
                f"  {_ms(o['extra_us']):>10}  {o['op']} ({_ms(o['gpu_time_us'])} against {_ms(o['median_gpu_time_us'])})"
            )
    if tables.ops:
        out.append("top operators per rank (GPU time):")
        for rank in sorted({r.rank for r in tables.ops}):
            mine = sorted((r for r in tables.ops if r.rank == rank), key=lambda r: -r.gpu_time_us)[:3]
            out.append(f"  rank {rank}: " + ", ".join(f"{r.op} {_ms(r.gpu_time_us)}" for r in mine))
    return out


# --- two traces compared ----------------------------------------------------------------------------------------


def diff_lines(base_label: str, new_label: str, compared: TraceDiff, top: int) -> list[str]:
    """What ``trace-diff`` says: where the files differ, the headline, the whole trace and the steps, the causes,
    the groups, the operators and the kernels that changed most (``top`` of each)."""
    t, total = compared.tables, compared.total
    out = [f"note: {text}" for text in compared.mismatches]
    out.append(f"{base_label} → {new_label}: {compared.headline}")
    pct = f" ({total['delta_pct']:+.1f}%)" if total["delta_pct"] is not None else ""
    out.append(
        f"GPU time (kernels, copies and memsets) {_ms(total['base_us'])} → {_ms(total['new_us'])}: "
        f"{_ms(total['delta_us'])}{pct}"
    )
    for r in (*t.whole, *t.steps):
        change = f" ({r.delta_pct:+.1f}%)" if r.delta_pct is not None else ""
        out.append(f"  {r.figure:<38} {_change(r)}{change}")
    if t.causes:
        out.append("the GPU idle inside the median step, by the host's cause (largest change first):")
        out += [f"  {r.figure:<38} {_change(r)}" for r in t.causes]
    out.append("by group (largest slow-down first):")
    out += [f"  {r.group:<14} {_change(r)}  ×{r.base_count:,} → ×{r.new_count:,}" for r in t.groups]
    if t.ops:
        out.append("by CPU operator (kernels matched through the operator that launched them):")
        for r in largest_changes(t.ops, top):
            calls = f"  ×{r.base_count:,} → ×{r.new_count:,} calls" if r.base_count or r.new_count else ""
            out.append(f"  {_ms(r.delta_us):>11}  {_ms(r.base_us):>11} → {_ms(r.new_us):>11}  {r.op}{calls}")
    out.append("by kernel:")
    for r in largest_changes(t.kernels, top):
        name = r.kernel if len(r.kernel) <= 70 else r.kernel[:69] + "…"
        out.append(f"  {_ms(r.delta_us):>11}  {_ms(r.base_us):>11} → {_ms(r.new_us):>11}  [{r.group}] {name}")
    return out


def _change(r: Change) -> str:
    return f"{_ms(r.base_us):>11} → {_ms(r.new_us):>11}  {_ms(r.delta_us):>11}"

"""What an imported trace says, in words: one trace (``python -m core trace FILE``), a job's ranks (``trace DIR``)
and two traces compared (``trace-diff``). Plain text from the typed tables (:mod:`core.rows.trace`) and the run's
summary, beside the engine, so the CLI and the page say the same and the engine never imports the renderers. It
imports none of the analysis either: the command that prints it reads the worker's answer without numpy."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeVar

from core.rows.notes import RunNotes
from core.rows.trace import Collective, TraceStep, TraceTables
from core.rows.trace_breakdown import HostTime, ModuleTime, OpTime, TraceBreakdown
from core.rows.trace_summary import Arrivals, LaunchSummary, RankSetSummary, TraceSummary
from core.units import duration_text, rate_text, us_text
from core.workload.findings import against_text, by_kernel_text
from core.workload.trace.gpu_name import gpu_text

if TYPE_CHECKING:  # a diff's and a job's rows and the diff's engine are loaded by the commands that read them,
    # not by every trace's words (their row classes took 15-25 ms of the command's start beside its worker)
    from core.rows.trace_diff import Change
    from core.rows.trace_ranks import Rank, RankTables
    from core.workload.trace.diff import TraceDiff

MS = 1000.0  # µs in a ms


def _ms(us: float) -> str:
    """A time in µs as the lab writes durations."""
    return duration_text(us / 1e6)


# --- one trace --------------------------------------------------------------------------------------------------


def trace_lines(meta: dict, tables: TraceTables) -> list[str]:
    """Everything the trace command says after its findings: the host's side of the gaps, the operators, the
    collectives and the summary."""
    why = TraceBreakdown.from_meta(meta)
    host = _before_first_kernel_lines(why.host_before_first_kernel) + _host_gap_lines(why.host_gaps)
    return host + op_lines(why, meta) + collective_lines(tables.collectives) + report_lines(meta, tables)


def collective_lines(calls: Sequence[Collective]) -> list[str]:
    """The collectives as text (``python -m core trace FILE``), nccl-tests' figures at each one's median time."""
    if not calls:
        return []
    out = ["collectives (sizes and bandwidths as nccl-tests counts them; a call's time includes waiting for peers):"]
    for r in calls[:10]:
        size = f"{r.size} {r.dtype}" if r.size else f"{r.dtype} (no size: no nccl-tests figure)"
        rates = (
            f", algbw {rate_text(r.algbw_gbs, 'GB/s')}, busbw {rate_text(r.busbw_gbs, 'GB/s')}"
            if r.algbw_gbs is not None and r.busbw_gbs is not None  # nccl-tests' figures come together
            else ""
        )
        out.append(
            f"  {r.collective:<14} {size} ×{r.calls:,} in a group of {r.group_size:,}: "
            f"median {us_text(r.median_us)}, total {us_text(r.total_us)}{rates}"
        )
    return out


def _before_first_kernel_lines(b: HostTime) -> list[str]:
    """The host's time before the steps' first kernels."""
    if not b.causes:
        return []
    steps = f"{b.steps:,} steps'" if b.steps > 1 else "the step's"
    out = [f"the host before each step's first kernel ({us_text(b.time_us)} of {steps} {us_text(b.wall_us)} "
           "wall, the GPU idle):"]  # fmt: skip
    for c in b.causes:
        said = f"  most in {c.inner_op.op} {us_text(c.inner_op.time_us)}" if c.inner_op else ""
        out.append(f"  {c.cause:<18} {us_text(c.time_us):>10}  {c.share or 0:6.1%}{said}")
    return out


def _host_gap_lines(gaps: HostTime) -> list[str]:
    """The host's side of the GPU's gaps."""
    if not gaps.causes:
        return []
    out = [f"the host during the GPU's {gaps.gaps:,} gaps ({us_text(gaps.gap_us)}, on the launching thread):"]
    for c in gaps.causes:
        ops = "; ".join(
            f"{o.op} {us_text(o.time_us)} ×{o.count:,}" + (f" at {o.source}" if o.source else "") for o in c.top_ops[:3]
        )
        out.append(f"  {c.cause:<18} {us_text(c.time_us):>10}  {c.share or 0:6.1%}" + (f"  {ops}" if ops else ""))
    return out


def op_lines(why: TraceBreakdown, meta: dict) -> list[str]:
    """The top operators and modules."""
    if not why.ops:
        return []
    out = [
        f"top operators by GPU time ({why.ops_attributed_share:.1%} of {us_text(why.ops_gpu_time_us)} traced "
        "to an operator):"
    ]
    for r in why.ops[:10]:
        extra = ""
        if r.tflops is not None:
            extra += f", {r.tflops:,.1f} TFLOPS"
        if r.tbps is not None:
            extra += f", {r.tbps:,.2f} TB/s"
        if r.peak_share is not None:
            extra += f" ({r.peak_share:.0%} of peak)"
        out.append(
            f"  {us_text(r.gpu_time_us):>10}  {r.share or 0:6.1%}  {_launched(r):<24} {r.op} [{r.module}]{extra}"
        )
    if why.ops_reference:
        out.append(f"  (rates from recorded shapes, against {why.ops_reference})")
    if text := tensor_core_text(meta):
        out.append(text)
    out.append("top modules by GPU time:")
    for m in why.modules[:5]:
        out.append(f"  {us_text(m.gpu_time_us):>10}  {m.share or 0:6.1%}  {_launched(m):<24} {m.module}")
    return out


def _launched(row: OpTime | ModuleTime) -> str:
    """What an operator or module put on the GPU, in words: "412 kernels", "25 copies", "3 kernels, 1 memset" (one
    stored before copies and memsets were counted says its kernels only)."""
    counts = [(row.kernels, "kernel", "kernels"), (row.copies, "copy", "copies"), (row.memsets, "memset", "memsets")]
    said = [f"{n:,} {one if n == 1 else many}" for n, one, many in counts if n]
    return ", ".join(said) or "no kernel"


def report_lines(meta: dict, tables: TraceTables) -> list[str]:
    """The trace summary as text: the GPU's times, idle by cause, launches, groups, rules, kernels, steps."""
    s = TraceSummary.from_meta(meta)
    if not s.gpu_activities:
        return [s.note or "no GPU activity"]
    out = _summary_lines(s, meta) + _idle_lines(s) + _launch_summary(s.launch)
    out += _group_lines(tables) + _rule_lines(s) + _kernel_lines(tables) + _step_lines(s, tables.steps)
    return out + RunNotes.from_meta(meta).quirk_lines()


def _summary_lines(s: TraceSummary, meta: dict) -> list[str]:
    return [
        f"{s.events:,} events; GPU {s.device} ({gpu_text(meta)}; the file "
        f"has GPU {listed(s.devices)}): {s.kernel_count:,} kernels on streams {listed(s.streams)}",
        f"kernel time {s.kernel_time_us / MS:,.3f} ms (sum of durations); busy {s.busy_us / MS:,.3f} ms "
        f"of a {s.span_us / MS:,.3f} ms span — idle {s.idle_us / MS:,.3f} ms ({s.idle_share:.1%})",
        f"compute {s.compute_union_us / MS:,.3f} ms, copies {s.copy_union_us / MS:,.3f} ms, "
        f"communication {s.communication_union_us / MS:,.3f} ms (exposed "
        f"{s.exposed_communication_us / MS:,.3f} ms); overlap compute∩comm "
        f"{s.compute_and_communication_us / MS:,.3f} ms, compute∩copy {s.compute_and_copy_us / MS:,.3f} ms",
    ]


def _idle_lines(s: TraceSummary) -> list[str]:
    out = []
    threshold = f"(< {s.kernel_wait_threshold_us:g} µs)"
    if causes := s.idle_causes:  # runs stored before the idle breakdown have none
        out.append(
            (
                "idle by cause (gaps on the device timeline, the union of its streams; they add up to the idle): "
                if s.idle_on_device
                else "idle by cause (gaps between kernels on each stream, summed over streams): "
            )
            + f"host wait {causes.host_wait_us / MS:,.3f} ms, kernel wait {causes.kernel_wait_us / MS:,.3f} ms "
            f"{threshold}, other {causes.other_wait_us / MS:,.3f} ms"
        )
    if hta := s.idle_causes_summed_over_streams:
        out.append(
            f"  per stream, summed over streams (HolisticTraceAnalysis' idle breakdown; can exceed the idle): host "
            f"wait {hta.host_wait_us / MS:,.3f} ms, kernel wait {hta.kernel_wait_us / MS:,.3f} ms, other "
            f"{hta.other_wait_us / MS:,.3f} ms"
        )
    return out


def _launch_summary(launch: LaunchSummary) -> list[str]:
    if not launch.launched:
        return []
    return [
        f"launches: {launch.launched:,} activities matched to their launch call; start − call start median "
        f"{launch.launch_delay_p50_us:,.1f} µs, p90 {launch.launch_delay_p90_us:,.1f} µs, p99 "
        f"{launch.launch_delay_p99_us:,.1f} µs, max {launch.launch_delay_max_us:,.1f} µs",
        *("  " + line for line in launch_lines(launch)),
    ]


def launch_lines(launch: LaunchSummary) -> list[str]:
    """What the launches say, in words: launch-bound (the GPU waited on them), CUDA graphs, HTA's short kernels."""
    if not launch.measured_launch_bound:  # a run stored before: launch_bound was HTA's short kernels
        return [
            f"{launch.launch_bound:,} of {launch.launched:,} ({launch.launch_bound_share:.1%}) ran shorter "
            "than their launch call (HolisticTraceAnalysis' short kernels; not whether the GPU waited on launches)"
        ]
    own = launch.launched - launch.graph_launched
    out = []
    if own:
        out.append(
            f"launch-bound (launched onto an idle GPU: the call ended after every earlier activity had ended) "
            f"{launch.launch_bound:,} of {own:,} ({launch.launch_bound_share:.1%}), the GPU idle "
            f"{launch.launch_wait_us / 1000:,.3f} ms before them"
        )
    if launch.graph_launched:
        out.append(
            f"CUDA/HIP graphs: {launch.graph_launched:,} activities launched by a graph (cudaGraphLaunch, or "
            "several on one launch call): launch-bound and the launch call's length do not apply to them"
        )
    out.append(
        f"shorter than their launch call (HolisticTraceAnalysis' short kernels): {launch.shorter_than_launch_call:,}"
        f" of {launch.launched:,} ({launch.shorter_than_launch_call_share:.1%})"
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


def _rule_lines(s: TraceSummary) -> list[str]:
    if not s.rules:
        return []
    out = ["rules (what each matched):"]
    for r in s.rules:
        if r.count:
            out.append(f"  {r.us / MS:>10,.3f} ms  ×{r.count:<7,} {r.group:<14} {r.rule}")
    return out


def _kernel_lines(tables: TraceTables) -> list[str]:
    out = ["top kernels (share of GPU time: kernels + copies + memsets):"]
    for k in tables.kernels:
        name = k.name if len(k.name) <= 90 else k.name[:87] + "…"
        out.append(f"  {k.total_us / MS:>10,.3f} ms  {k.share:6.1%}  ×{k.count:<6,} [{k.group}] {name}")
    return out


def _step_lines(s: TraceSummary, steps: Sequence[TraceStep]) -> list[str]:
    out = [f"steps ({s.step_basis}):" if steps else s.step_basis]
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


def listed(ids: Sequence[int]) -> str:
    """GPU or stream ids as a person writes them: "0, 1 and 7", never a Python list."""
    text = [str(i) for i in ids]
    return " and ".join([", ".join(text[:-1]), text[-1]]) if len(text) > 1 else "".join(text)


# --- a job's ranks ----------------------------------------------------------------------------------------------


def ranks_lines(meta: dict, tables: RankTables) -> list[str]:
    """Everything the trace command says of a job's ranks after its findings."""
    s = RankSetSummary.from_meta(meta)
    out = _rank_table(s, tables.ranks) + _straggler_lines(s)
    out += _rank_step_lines(tables) + _rank_gap_lines(tables) + _arrival_lines(s.arrivals, tables)
    return out + _rank_op_lines(s, tables) + RunNotes.from_meta(meta).quirk_lines()


def _rank_table(s: RankSetSummary, ranks: Sequence[Rank]) -> list[str]:
    out = [f"{'rank':>5} {'compute':>10} {'comm':>10} {'exposed':>10} {'idle':>10} {'span':>10} {'kernels':>10}  file"]
    for r in ranks:
        mark = " ← straggler" if r.rank == s.straggler_rank else ""
        out.append(
            f"{r.rank:>5} {_ms(r.compute_us):>10} {_ms(r.communication_us):>10} "
            f"{_ms(r.exposed_communication_us):>10} {_ms(r.idle_us):>10} {_ms(r.span_us):>10} "
            f"{_ms(r.kernel_time_us):>10}  {r.file}{mark}"
        )
    return out


def verdict_text(s: RankSetSummary) -> str | None:
    """Which rank holds the job back and why, in words; None for runs stored before the judgement."""
    if s.verdict is None:
        return None
    held, said = s.verdict.rank, ", ".join(r.replace("_", " ") for r in s.verdict.reasons)
    return f"holding the job back: rank {held} ({said})" if held is not None else "no rank holds the job back"


def _straggler_lines(s: RankSetSummary) -> list[str]:
    t = s.straggler
    out = [text] if (text := verdict_text(s)) else []
    return out + [
        f"most compute: rank {t.rank}, {_ms(t.compute_us)} against {against_text(t.against, s.ranks)} "
        f"{_ms(t.median_compute_us)}: {_ms(t.margin_us)} ({t.margin_pct:+.1f}%)"
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


def _arrival_lines(a: Arrivals, tables: RankTables) -> list[str]:
    out = [matching] if (matching := matching_text(a)) else []
    if tables.arrivals:
        out.append(
            f"rank {a.last_rank} arrived last at {a.last_arrivals:,}; each rank's wait for the last to arrive: "
            + ", ".join(f"rank {r.rank} {_ms(r.waited_us)}" for r in tables.arrivals)
        )
    if tables.collective_waits:
        out.append("each collective's kernel time waiting for the last rank (over its calls and ranks):")
        for r in tables.collective_waits[:10]:
            share = f" ({r.waited_share:.1%})" if r.waited_share is not None else ""
            out.append(f"  {_ms(r.waited_us):>10} of {_ms(r.kernel_time_us)}{share}  ×{r.calls:,} {r.collective}")
    return out


def _rank_op_lines(s: RankSetSummary, tables: RankTables) -> list[str]:
    out = []
    if extra := s.straggler.ops:
        out.append(f"the straggler's operators against {against_text(s.straggler.against, s.ranks)} (summed GPU time):")
        for o in extra:
            out.append(f"  {_ms(o.extra_us):>10}  {o.op} ({_ms(o.gpu_time_us)} against {_ms(o.median_gpu_time_us)})")
    if tables.ops:
        out.append("top operators per rank (GPU time):")
        for rank in sorted({r.rank for r in tables.ops}):
            mine = sorted((r for r in tables.ops if r.rank == rank), key=lambda r: -r.gpu_time_us)[:3]
            out.append(f"  rank {rank}: " + ", ".join(f"{r.op} {_ms(r.gpu_time_us)}" for r in mine))
    return out


# --- two traces compared ----------------------------------------------------------------------------------------


C = TypeVar("C", bound="Change")


def largest_changes(rows: Sequence[C], top: int) -> list[C]:
    """The ``top`` rows that changed most either way (a speed-up matters as much as a slow-down), in the
    rows' own order."""
    keep = {id(r) for r in sorted(rows, key=lambda r: -abs(r.delta_us))[:top]}
    return [r for r in rows if id(r) in keep]


def diff_lines(base_label: str, new_label: str, compared: TraceDiff, top: int) -> list[str]:
    """What ``trace-diff`` says: where the files differ, the headline, the whole trace and the steps, the causes,
    the groups, the operators and the kernels that changed most (``top`` of each)."""
    t, total = compared.tables, compared.total
    out = [f"note: {text}" for text in compared.mismatches]
    out.append(f"{base_label} → {new_label}: {compared.headline}")
    pct = f" ({total.delta_pct:+.1f}%)" if total.delta_pct is not None else ""
    out.append(
        f"GPU time (kernels, copies and memsets) {_ms(total.base_us)} → {_ms(total.new_us)}: {_ms(total.delta_us)}{pct}"
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


# --- wording the page shares ------------------------------------------------------------------------------------


def matching_text(a: Arrivals) -> str:
    """How the collectives were matched and what was left out, in words ("" where nothing was matched or left
    out; runs stored before the checks say how many matched)."""
    matched, by_kernel, inconsistent, sequences = a.matched, a.matched_by_kernel, a.inconsistent, a.sequences_left_out
    said = []
    if matched:
        how = f" ({by_kernel_text(by_kernel)}: no collective figures recorded)" if by_kernel else ""
        said.append(f"{matched:,} collective{'s' * (matched != 1)} matched across the ranks{how}")
    if inconsistent:
        said.append(
            f"{inconsistent:,} left out: a rank's kernel ended before the last rank's began, which a collective "
            "every rank receives in cannot do — the ranks' clocks disagree, or the calls were not the same"
        )
    if sequences:
        said.append(f"{sequences:,} kernel sequence{'s' * (sequences != 1)} not matched: not alike on every rank")
    return "; ".join(said)


def tensor_core_text(meta: dict) -> str:
    """The kernel time that used no tensor core or kernels built for an older architecture, in words (the CLI
    and the page say it alike); empty where the trace had no kernels or the run predates the figure."""
    t = meta.get("tensor_cores") or {}
    if not t.get("kernel_time_us"):
        return ""
    ms = [duration_text(t[key] / 1e6) if t[key] else "none" for key in ("simt_us", "older_us", "kernel_time_us")]
    return (
        f"fp32 kernels without tensor cores {ms[0]}, kernels built for an older architecture {ms[1]}, "
        f"of {ms[2]} kernel time"
    )

"""The profiler trace section of the Step benchmark page: import a trace of the user's own job (parsed in a
worker, ``profiler-trace``), or several files or a folder as the ranks of one job (``profiler-trace-ranks``),
and show what the engine derived: the findings first, kernel time, GPU idle and why, the charts of
:mod:`render.plots.profiler_trace` and the tables. This module places widgets."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from core.result import RunResult
from core.rows.trace_breakdown import TraceBreakdown
from core.rows.trace_summary import IdleCauses, RankSetSummary, TraceSummary
from core.units import us_text
from core.workload.findings import against_text
from core.workload.trace.gpu_name import gpu_text
from core.workload.trace.text import matching_text
from pages.common import imports, run_panel
from pages.common.charts import show_charts
from pages.common.facts import fact
from pages.common.import_notes import findings, provenance, quirks
from pages.common.markdown import markdown_text
from pages.common.tables import show_table
from render import trace_view as view
from render import trace_why
from render.plots import profiler_trace as trace_plots
from render.plots import profiler_trace_ranks as trace_plots_ranks
from render.table import with_dashes


def section(key: str) -> None:
    st.write(
        "A Chrome/Kineto trace from `torch.profiler` (`prof.export_chrome_trace(...)` or "
        "`tensorboard_trace_handler`) recorded on any machine: kernel groups, top kernels, GPU busy vs idle, "
        "compute / copy / communication overlap, and a breakdown per `ProfilerStep`."
    )
    imports.importer(
        key,
        "profiler-trace",
        "Profiler trace",
        ".json or .json.gz; several files: the ranks of one job, side by side",
        ranks="profiler-trace-ranks",
    )
    shipped = imports.example_buttons(key, "trace")
    imports.reopen(key, "profiler-trace", "profiler-trace-ranks")
    run_panel.results(
        key,
        render,
        empty="No trace imported yet: upload one and press Import"
        + (", or open an example above." if shipped else "."),
    )


def render(run: RunResult) -> None:
    if run.experiment == "profiler-trace-ranks":
        render_ranks(run)
        return
    m, s = run.meta, TraceSummary.from_run(run)
    provenance(run)
    findings(m)
    quirks(m)
    if not s.gpu_activities:
        st.warning(s.note or "no GPU activity in this trace")
        return
    _headline(s)
    why = TraceBreakdown.from_meta(m)
    first = why.host_before_first_kernel
    if before := trace_why.host_gap_table(first):  # the host's time before any kernel
        st.write(f"What the host did before each step's first kernel ({first.steps:,} step(s), the GPU idle):")
        show_table(before, hide_index=True)
    if gaps := trace_why.host_gap_table(why.host_gaps):  # why the GPU idled, on the host's side: the answer first
        st.write(f"What the host did while the GPU idled ({why.host_gaps.gaps:,} gaps, on the launching thread):")
        show_table(gaps, hide_index=True)
        if not (per_step := view.step_host_ms(run)).empty:
            st.write("The same, in each step's idle (ms):")
            show_table(per_step)
    st.caption(
        f"{markdown_text(s.file)} · GPU {s.device} ({markdown_text(gpu_text(m))}) · "
        f"{view.count_text(s.devices, 'GPU')} in the file · {view.count_text(s.streams, 'stream')} on this GPU · "
        f"{s.events:,} events · {s.step_basis}"
    )
    if s.idle_causes:  # runs stored before the idle breakdown have none
        _waits(s, s.idle_causes)
    if patterns := trace_why.patterns_table(why):
        st.write("Patterns in the operators:")
        show_table(patterns, hide_index=True)
    if ops := trace_why.ops_table(why):  # kernels → operators → modules
        st.write(f"Top operators by GPU time ({why.ops_attributed_share:.1%} of it traced to an operator):")
        rates = {"TFLOPS": "{:,.1f}", "TB/s": "{:,.2f}", "% of peak": "{:.1f}"}  # "—" where shapes give none
        show_table(with_dashes(pd.DataFrame(ops), rates), hide_index=True)
        if line := trace_why.rates_caption(why, m):
            st.caption(markdown_text(line))
        with st.expander("Top modules by GPU time"):
            show_table(trace_why.modules_table(why), hide_index=True)
    if not (calls := view.collectives_table(run)).empty:
        st.write("Collectives, sized as nccl-tests sizes them (a call's time includes waiting for its peers):")
        rates = {"size": "{}", "algbw GB/s": "{:,.2f}", "busbw GB/s": "{:,.2f}"}  # "—" where nccl-tests has none
        show_table(with_dashes(calls, rates), hide_index=True)
    show_charts(trace_plots.figures(run), f"trace.{run.id}")
    if rules := view.rules_table(s):
        with st.expander("Kernel group rules: what each matched"):
            show_table(rules, hide_index=True)
    for name in ("kernels", "steps"):
        table = view.trace_table(run, name)
        if not table.empty:
            show_table(table, hide_index=True)


def _headline(s: TraceSummary) -> None:
    """Four figures that fit a 1280-px window (the exact µs are in the tables, the CLI and the stored run)."""
    cols = st.columns(4)
    steps = s.steps
    fact(
        cols[0],
        "Kernel time",
        _ms(s.kernel_time_us),
        f"{s.kernel_count:,} kernels" + (f" in {steps:,} step{'s' * (steps != 1)}" if steps else ""),
        help="Sum of kernel durations (overlapping kernels count twice).",
    )
    fact(
        cols[1],
        "GPU busy",
        _ms(s.busy_us),
        f"of {_ms(s.span_us)} span",
        help="Union of all kernels, copies and sets.",
    )
    fact(cols[2], "GPU idle", _ms(s.idle_us), f"{s.idle_share:.1%} of the span")
    cols[3].metric(
        "Exposed communication",
        _ms(s.exposed_communication_us),
        help="Communication kernels not hidden behind compute.",
    )


def _ms(us: float) -> str:
    """A trace's time in the lab's one way of writing times, to 0.01 of its unit ("none" for nothing at all, not
    "0.00 s" beside figures in ms)."""
    return us_text(us, digits=2) if us else "none"


def _waits(s: TraceSummary, causes: IdleCauses) -> None:
    """Why the GPU idled, and how many kernels waited for their launch."""
    waits = st.columns(4)
    share = causes.host_wait_share
    fact(
        waits[0],
        "Host wait",
        _ms(causes.host_wait_us),
        f"{share:.1%} of the {'idle' if s.idle_on_device else 'gaps'}" if share is not None else None,
        help=(
            "Gaps on the device timeline (the union of its streams) ended by an activity whose launch call came "
            "after the gap began: the GPU waited for the CPU. The three causes add up to the GPU idle; "
            "HolisticTraceAnalysis' per-stream breakdown is the chart below."
            if s.idle_on_device
            else "Gaps on a stream before a kernel whose launch call came after the previous kernel ended: "
            "the GPU waited for the CPU. Summed over streams (HolisticTraceAnalysis' idle breakdown)."
        ),
    )
    waits[1].metric(
        "Kernel wait",
        _ms(causes.kernel_wait_us),
        help=f"Other gaps shorter than {s.kernel_wait_threshold_us:g} µs: back-to-back launch overhead.",
    )
    waits[2].metric("Other wait", _ms(causes.other_wait_us), help="Events, other streams.")
    if s.launch.launched:
        label, value, note, text = view.launch_metric(s.launch)
        fact(waits[3], label, value, note, help=text)


def render_ranks(run: RunResult) -> None:
    """Every rank of a job side by side: the straggler, each rank's time, each step on each rank, and what each
    rank's host did while its GPU idled."""
    m = RankSetSummary.from_run(run)
    findings(run.meta)
    quirks(run.meta)
    s, verdict = m.straggler, m.judged
    cols = st.columns(4)
    fact(cols[0], "Ranks", m.ranks, f"of world size {m.world_size or 'not recorded'}")
    cols[1].metric(
        "Straggler",
        "none" if verdict.rank is None else f"rank {verdict.rank}",
        ", ".join(r.replace("_", " ") for r in verdict.reasons) or None,
        delta_color="off",
        help="The rank that holds the job back, judged on every figure: the rank arriving last at the collectives, "
        "else a host-bound rank, else the rank whose compute is over the other ranks' by more than noise.",
    )
    cols[2].metric(
        f"Most compute: rank {s.rank}",
        _ms(s.margin_us),
        f"{s.margin_pct:+.1f}% over {against_text(s.against, m.ranks)}",
        help="Its compute time (the union of its compute kernels) over the other ranks': their median, which the "
        "rank itself is never part of.",
    )
    cols[3].metric("Backend", m.backend or "unknown")
    st.caption(f"{markdown_text(m.file)} · files {markdown_text(', '.join(m.files))} · {markdown_text(m.measure)}")
    show_charts(trace_plots_ranks.figures(run), f"ranks.{run.id}")
    show_table(view.ranks_table(run), hide_index=True)
    walls = view.step_walls_ms(run)
    if not walls.empty:
        st.write("Each step's wall time (ms), rank by rank:")
        show_table(with_dashes(walls, dict.fromkeys(walls.columns, "{:,.3f}")))  # "—": a rank without the step
    gaps = view.host_gaps_ms(run)
    if not gaps.empty:
        st.write("What each rank's host did while its GPU idled (ms, on the launching thread), rank by rank:")
        show_table(gaps)
    waits = view.arrivals_ms(run)
    if not waits.empty:
        st.write("Each rank's wait for the last rank to arrive, at the collectives matched across the ranks:")
        show_table(waits, hide_index=True)
    if not (per_call := view.collective_waits_ms(run)).empty:
        st.write("Each collective's kernel time, and how much of it waited for the last rank (over calls and ranks):")
        show_table(per_call, hide_index=True)
    if matching := matching_text(m.arrivals):
        st.caption(markdown_text(matching))
    ops = view.ops_ms(run)
    if not ops.empty:
        st.write("Top operators by GPU time (ms), rank by rank:")
        show_table(ops)

"""Matmul throughput: achieved TFLOPS per dtype against the datasheet, with accuracy, roofline and clocks;
and the soak: one shape for a fixed time, burst against sustained."""

import streamlit as st

from core.experiments import matmul_soak as soak
from core.experiments.matmul import CPU_SIZES, GPU_SIZES
from core.hardware import dtypes, published
from core.measure.gemm import MAX_DIM
from core.measure.soak import DROP_THRESHOLD_PCT
from core.result import RunResult
from core.rows.matmul import MatmulMeta, MatmulPoint
from core.rows.matmul_soak import SoakMeta
from core.transformer.presets import DEFAULT_BATCH, DEFAULT_CONTEXT, PRESET_NAMES
from core.units import rate_text, throughput_unit
from pages.common import lab, node
from pages.common.charts import show_charts
from pages.common.facts import fact
from pages.common.markdown import markdown_text
from pages.common.methods import how_measured
from pages.common.run_panel import results, run_controls
from pages.common.tables import show_table
from render.node import is_all_gpus
from render.plots import matmul_soak as soak_plots
from render.plots.matmul import best_points, figures, measured, published_for, throughput
from render.table import with_dashes

KEY = "matmul"
SOAK_KEY = "matmul-soak"
MEASURES = {"sweep": "Throughput sweep", "soak": "Soak (burst vs sustained)"}
MODES = {"square": "Square sweep", "mnk": "Custom M×N×K", "model": "Model preset GEMMs", "search": "Find the max"}
# "throughput" is shown under the run's unit (TFLOPS on a GPU, GFLOPS on a CPU), like every chart.
TABLE_COLUMNS = (
    "device dtype m n k label median_ms p20_ms p80_ms min_ms reps throughput pct_of_peak pct_of_published "
    "published_note pct_of_best rel_error intensity_flop_per_byte sm_clock_mhz power_w vs_node_median"
).split()
SOAK_COLUMNS = "device second t_s throughput calls interval_s sm_clock_mhz temp_c power_w throttle_reasons".split()
COLUMN_NAMES = {
    "pct_of_peak": "% of datasheet",
    "pct_of_published": "% of the published best (like for like)",
    "published_note": "published figure: the card it was measured on, or why not comparable",
    "pct_of_best": "% of this run's best",
}
THIS_GPU = "the run's GPU"
NONE_FOR_CPU = "none (a CPU run: no published figures)"


def _selected_is_cuda() -> bool:
    info = lab.device_info(lab.selected_device())
    return info is not None and info.is_cuda


def _start_dtype(is_cuda: bool) -> str:
    """The sidebar's dtype, or fp32 on a CPU where the sidebar's needs a GPU's tensor cores (tf32, fp8)."""
    chosen = dtypes.get(lab.selected_dtype())
    return "fp32" if chosen.gpu_only and not is_cuda else chosen.name


def settings(is_cuda: bool) -> dict:
    values: dict = {}
    values["dtypes"] = st.multiselect(
        "Dtypes",
        dtypes.NAMES,
        default=list(dtypes.NAMES),
        key=f"{KEY}.dtypes",
        help="What the device cannot run is reported as unsupported, with the reason.",
    )
    mode = st.radio("Shapes", list(MODES), format_func=MODES.get, horizontal=True, key=f"{KEY}.mode")
    defaults = GPU_SIZES if is_cuda else CPU_SIZES
    if mode == "square":
        options = sorted(set(defaults) | set(CPU_SIZES) | set(GPU_SIZES))
        values["sizes"] = st.multiselect("Sizes (M = N = K)", options, default=list(defaults), key=f"{KEY}.sizes")
    elif mode == "mnk":
        cols = st.columns(3)
        values["mnk"] = [
            cols[i].number_input(name, 1, 131072, 1024 if is_cuda else 256, key=f"{KEY}.{name}")
            for i, name in enumerate("MNK")
        ]
    elif mode == "model":
        cols = st.columns(3)
        values["model"] = cols[0].selectbox(
            "Model preset", PRESET_NAMES, index=PRESET_NAMES.index(lab.selected_model()), key=f"{KEY}.model"
        )
        values["batch"] = cols[1].number_input("Batch", 1, 4096, DEFAULT_BATCH, key=f"{KEY}.batch")
        values["context"] = cols[2].number_input("Context", 1, 131072, DEFAULT_CONTEXT, key=f"{KEY}.context")
    else:
        cols = st.columns(5)
        start, stop, step = (256, 16384, 256) if is_cuda else (64, 1024, 64)
        values["search"] = True
        values["m_range"] = [
            cols[0].number_input("M from", 1, 131072, start, key=f"{KEY}.m0"),
            cols[1].number_input("M to", 1, 131072, stop, key=f"{KEY}.m1"),
            cols[2].number_input("step", 1, 131072, step, key=f"{KEY}.step"),
        ]
        values["n"] = cols[3].number_input("N", 1, 131072, 4096 if is_cuda else 512, key=f"{KEY}.n")
        values["k"] = cols[4].number_input("K", 1, 131072, 4096 if is_cuda else 512, key=f"{KEY}.k")
    with st.expander("Timing options"):
        cols = st.columns(4)
        values["warmup_ms"] = cols[0].number_input("warm-up per point (ms)", 0.0, 60000.0, 50.0, key=f"{KEY}.warm")
        values["rep_ms"] = cols[1].number_input("timed per point (ms)", 1.0, 600000.0, 200.0, key=f"{KEY}.rep")
        values["min_reps"] = cols[2].number_input("min calls", 1, 100000, 10, key=f"{KEY}.minr")
        values["max_reps"] = cols[3].number_input("max calls", 1, 100000, 500, key=f"{KEY}.maxr")
        cols = st.columns(3)
        values["flush"] = cols[0].checkbox("keep inputs out of cache", True, key=f"{KEY}.flush")
        values["accuracy"] = cols[1].checkbox("accuracy vs fp64", True, key=f"{KEY}.acc")
        values["roofline"] = cols[2].checkbox("measure copy bandwidth", True, key=f"{KEY}.roof")
    return values


def _published_choice(run: RunResult) -> str | None:
    """Which GPU's published maximum-achievable figures to show: the run's own (a GPU run), none (a CPU run:
    nothing is published for it), or any GPU the source measured."""
    own = THIS_GPU if run.device_info.is_cuda else NONE_FOR_CPU
    choice = st.selectbox(
        "Published best achievable of",
        [own, *published.ACCELERATORS],
        key=f"{KEY}.published",
        help="Measured maximum achievable matmul TFLOPS from elsewhere (mamf-finder, "
        "ml-engineering): labelled *published*, never a measurement of this box.",
    )
    return None if choice in (THIS_GPU, NONE_FOR_CPU) else choice


def render(run: RunResult) -> None:
    accelerator = _published_choice(run)
    df = measured(run, accelerator)
    if not df.empty:
        best = best_points(run, accelerator)
        cols = st.columns(min(len(best), 6) or 1)
        is_cuda = run.device_info.is_cuda
        for col, (p, compared) in zip(cols * 2, best):
            peak = f"{p.pct_of_peak:.0f}% of datasheet" if p.pct_of_peak is not None else None
            if compared.pct is not None:
                peak = f"{peak or ''}, {compared.pct:.0f}% of the published best".lstrip(", ")
            unit = throughput_unit(is_cuda, ops=p.dtype == "int8")[0]
            said = f"at {p.m}×{p.n}×{p.k}" + (f"; published figure: {compared.note}" if compared.note else "")
            fact(col, f"best {p.dtype} ({unit})", f"{throughput(run, p):.1f}", peak, help=said)
        node.show(run)
        show_charts(figures(run, accelerator), KEY)
        unit = throughput_unit(is_cuda)[0]
        show_table(
            with_dashes(
                df.loc[:, [c for c in TABLE_COLUMNS if c in df]].rename(
                    columns={"throughput": f"{unit} (int8: OPS)", **COLUMN_NAMES}
                )
            ),
            hide_index=True,
        )
        entries = published_for(run, accelerator)
        if entries:
            st.caption(
                "Published (not measured here): "
                + "; ".join(
                    f"{p.accelerator} {p.dtype} {p.tflops:g} of {p.theory_tflops:g} TFLOPS ({100 * p.efficiency:.1f}%), "
                    f"the best of a shape search at {p.best_shape}, torch {p.torch_version}, "
                    f"{published.provenance(p, run.device)}"
                    for p in entries
                )
                + f". Source: {published.SOURCE}."
            )
    skipped: dict[tuple, MatmulPoint] = {}  # each dtype's reason once, at its first point
    for point in map(MatmulPoint.from_row, run.rows):
        if not point.ok:
            skipped.setdefault((point.dtype, point.reason), point)
    if skipped:
        st.warning(
            "Not measured:\n" + "\n".join(f"- {p.dtype} {p.m}×{p.n}×{p.k}: {p.reason}" for p in skipped.values())
        )
    said = MatmulMeta.from_run(run)
    notes = list(said.notes)
    if not run.device_info.is_cuda:
        notes.append("CPU run: GFLOPS only — the datasheet column shows — (no CPU peaks in the lab).")
    if said.copy_bandwidth_gbs:
        notes.append(f"measured copy bandwidth {rate_text(said.copy_bandwidth_gbs, 'GB/s')} ({said.copy_counted})")
    if notes:
        st.caption(" · ".join(notes))


def soak_settings(is_cuda: bool) -> dict:
    """One dtype at one square size for a fixed time; the burst window and the flag threshold."""
    st.caption(
        "One matmul shape back to back for a fixed time, counted second by second: is the first seconds' "
        "speed (burst) what this device holds (sustained)?"
    )
    cols = st.columns(3)
    values: dict = {
        "dtype": cols[0].selectbox(
            "Dtype",
            dtypes.NAMES,
            index=dtypes.NAMES.index(_start_dtype(is_cuda)),
            key=f"{SOAK_KEY}.dtype",
            help="The sidebar's dtype to start with (fp32 on a CPU for one only a GPU runs); any dtype the device "
            "runs. bf16 on a CPU is measured as that CPU runs it (the run says whether the CPU lists native bf16).",
        ),
        "size": cols[1].number_input(
            "Size (M = N = K)", 1, MAX_DIM, soak.GPU_SIZE if is_cuda else soak.CPU_SIZE, key=f"{SOAK_KEY}.size"
        ),
        "duration_s": cols[2].number_input(
            "Duration (s)",
            soak.MIN_DURATION_S,
            soak.MAX_DURATION_S,
            soak.GPU_DURATION_S if is_cuda else soak.CPU_DURATION_S,
            key=f"{SOAK_KEY}.duration",
        ),
    }
    with st.expander("Burst window and flag"):
        cols = st.columns(2)
        values["burst_s"] = cols[0].number_input(
            "Burst window (s, 0 = default)",
            0.0,
            soak.MAX_DURATION_S / 2,
            0.0,
            key=f"{SOAK_KEY}.burst",
            help="Burst: the best sample begun in this window; 0 means 5 s, or a quarter of a shorter run.",
        )
        values["drop_threshold_pct"] = cols[1].number_input(
            "Flag a drop above (%)", 0.1, 99.9, DROP_THRESHOLD_PCT, key=f"{SOAK_KEY}.threshold"
        )
    return values


def render_soak(run: RunResult) -> None:
    """The answer in words first (per GPU on an all-GPU run), then the figures, the samples and the notes."""
    name, scale = soak_plots.unit(run)
    found = soak_plots.summaries(run)
    if not found:
        st.info(
            "No burst or sustained figure: the run ended before its last sample. The samples it took are drawn below."
        )
    several = len(found) > 1
    for device, s in found.items():
        reason = s.drop_reason
        said = (
            f"**{markdown_text(device)}**: {markdown_text(reason)}"
            if several
            else markdown_text(reason[:1].upper() + reason[1:])
        )
        (st.warning if s.drop_flagged else st.success)(said)
    if len(found) == 1:
        s = next(iter(found.values()))
        cols = st.columns(3)
        cols[0].metric(
            f"burst ({name})",
            f"{s.burst_tflops * scale:,.1f}",
            help=f"best sample begun in the first {s.burst_s:g} s",
        )
        cols[1].metric(
            f"sustained ({name})",
            f"{s.sustained_tflops * scale:,.1f}",
            help="median of the last half of the samples",
        )
        fact(cols[2], *soak_plots.change_figure(s), f"a drop is flagged above {s.drop_threshold_pct:g}%")
    node.show(run)
    show_charts(soak_plots.figures(run), SOAK_KEY)
    df = soak_plots.samples(run)
    if not df.empty:
        show_table(
            df.loc[:, [c for c in SOAK_COLUMNS if c in df and (c != "device" or several)]].rename(
                columns={"throughput": name}
            ),
            hide_index=True,
        )
    notes = list(SoakMeta.from_run(run, is_all_gpus(run)).notes)
    if not run.device_info.is_cuda:
        notes.append("CPU run: throughput in GFLOPS.")
    if notes:
        st.caption(" · ".join(markdown_text(n) for n in notes))


st.title("Matmul throughput")
st.write(
    "How fast is this device really, per dtype — and what does each dtype cost in accuracy? Every point is "
    "measured live: median time over many calls, TFLOPS against the datasheet peak, relative error against "
    "an fp64 product, and where small matmuls are bandwidth-bound."
)
device = lab.device_choice(KEY)
is_cuda = device == "all" or _selected_is_cuda()
if not is_cuda:
    gpu_only = [d.name for d in dtypes.MATMUL if d.gpu_only]
    st.info(
        f"Running on the **CPU**: results are GFLOPS and labelled CPU; {', '.join(gpu_only)} are reported as unsupported."
    )
how_measured("matmul", "all_gpus")
measure = st.radio("Measure", list(MEASURES), format_func=MEASURES.get, horizontal=True, key=f"{KEY}.measure")
if measure == "sweep":
    chosen = settings(is_cuda)
    run_controls(KEY, "matmul", lambda: chosen, device=device)
    results(KEY, render)
else:
    chosen = soak_settings(is_cuda)
    run_controls(SOAK_KEY, "matmul-soak", lambda: chosen, device=device)
    results(SOAK_KEY, render_soak, empty="No soak yet: choose a dtype, size and duration and press Run.")

"""Step benchmark: forward / backward / optimizer time, tokens per second, MFU, and what the kernels do."""

from pathlib import Path

import streamlit as st

from core.experiment import config_to_dict
from core.experiments.step_bench import StepBenchConfig
from core.result import RunResult
from core.transformer.presets import DTYPE_FOR_PRECISION, OPTIMIZERS, PRECISION_FOR_DTYPE, PRECISIONS
from core.units import MIB, bytes_text, throughput_unit
from pages.common import lab, node, run_panel, trace_panel
from pages.common.charts import show_charts
from pages.common.facts import fact
from pages.common.methods import MODEL_NOTE, how_measured
from render.chart import kind_rows
from render.plots.step_bench import cold_text, figures, kernel_table

KEY = "step_bench"
MAX_TRACE_DOWNLOAD_BYTES = 200 * MIB
DEFAULTS = StepBenchConfig()

st.title("Step benchmark")
st.write(
    f"One training step of the lab's own Transformer ({MODEL_NOTE}), timed phase by phase with a device synchronisation "
    "(CUDA events on a GPU, `perf_counter` on a CPU): forward, backward, optimizer step, the whole step — "
    "after warm-up, and step by step without it. Then `torch.profiler` shows which kernels the time goes "
    "to, and a sweep times every precision mode."
)
how_measured("step_bench", "model", "all_gpus")

model, device = lab.selected_model(), lab.device_choice(KEY)
st.caption(
    f"Model **{model}** and device **{device}** come from the sidebar."
    if device != "all"
    else f"Model **{model}** comes from the sidebar; the benchmark runs on **every GPU at once**."
)
if device == "cpu" and model not in ("tiny", "mini"):
    st.warning(f"`{model}` on a CPU takes minutes per step; `tiny` and `mini` finish in seconds.")

cols = st.columns(5)
batch = cols[0].number_input("Batch", 1, 4096, DEFAULTS.batch, key=f"{KEY}.batch")
context = cols[1].number_input("Context (tokens)", 2, 16384, DEFAULTS.context, key=f"{KEY}.context")
optimizer = cols[2].selectbox("Optimizer", OPTIMIZERS, index=OPTIMIZERS.index(DEFAULTS.optimizer), key=f"{KEY}.opt")
warmup = cols[3].number_input("Warm-up steps", 0, 1000, DEFAULTS.warmup_steps, key=f"{KEY}.warmup")
timed = cols[4].number_input("Timed steps", 2, 10_000, DEFAULTS.timed_steps, key=f"{KEY}.timed")
common = {
    "model": model,
    "batch": int(batch),
    "context": int(context),
    "optimizer": optimizer,
    "warmup_steps": int(warmup),
    "timed_steps": int(timed),
}


def metrics(run: RunResult) -> None:
    summary = next((r for r in run.rows if r.get("kind") == "summary"), None)
    if summary is None:
        return
    cols = st.columns(5)
    fact(
        cols[0],
        "Step (median)",
        f"{summary['step_ms_median']:.2f} ms",
        f"mean {summary['step_ms_mean']:.2f} ± {summary['step_ms_std']:.2f} ms",
    )
    cols[1].metric("Tokens / s", f"{summary['tokens_per_s']:,.0f}")
    unit, scale = throughput_unit(run.device.get("kind") == "cuda")
    fact(
        cols[2],
        f"Achieved ({unit})",
        f"{summary['achieved_tflops'] * scale:,.1f}",
        f"{summary['model_flops_per_step'] / 1e9:,.2f} GFLOP per step",
    )
    if summary.get("mfu") is not None:
        fact(cols[3], "MFU", f"{summary['mfu']:.1%}", f"of {summary['peak_tflops']:g} TFLOPS {summary['peak_unit']}")
    else:
        fact(cols[3], "MFU", "n/a", summary.get("mfu_note"))
    cols[4].metric("Backward / forward", f"{summary['backward_forward_ratio']:.2f}×")
    if run.meta.get("cpu_load_note"):
        st.warning(f"Busy machine: {run.meta['cpu_load_note']}.")
    if summary.get("first_step_ms") is not None:
        st.caption(
            f"{cold_text(summary, run.meta)} "
            f"Timing: {run.meta.get('timing', '')}. Model FLOPs: 6·N·tokens for the N = "
            f"{run.meta.get('flops', {}).get('matmul_params', 0):,} matmul weights plus attention scores/values."
        )


def trace_download(run: RunResult) -> None:
    path = run.meta.get("trace_path")
    if not path:
        return
    trace = Path(path)
    if not trace.exists():
        st.caption(f"The Chrome trace `{path}` is no longer on this machine (the lab keeps the newest 20).")
    elif trace.stat().st_size > MAX_TRACE_DOWNLOAD_BYTES:
        st.caption(f"Chrome trace: `{path}` ({bytes_text(trace.stat().st_size)}) — open it at ui.perfetto.dev.")
    else:
        st.download_button(
            f"Chrome trace for Perfetto ({bytes_text(trace.stat().st_size)}, gzip JSON)",
            trace.read_bytes,
            trace.name,
            "application/gzip",
            key=f"{KEY}.trace.{run.id}",
            on_click="ignore",
            help="open at https://ui.perfetto.dev or chrome://tracing",
        )


def render_single(run: RunResult) -> None:
    node.show(run)
    metrics(run)
    show_charts(figures(run), f"{KEY}.single")
    table = kernel_table(run)
    if not table.empty:
        st.subheader("Top kernels" if run.device.get("kind") == "cuda" else "Top ops (CPU: self time per op)")
        st.caption(run.meta.get("profile_measure", ""))
        st.dataframe(table, hide_index=True)
    trace_download(run)


def render_sweep(run: RunResult) -> None:
    node.show(run)
    show_charts(figures(run), f"{KEY}.sweep")
    modes = kind_rows(run, "precision")
    unit, scale = throughput_unit(run.device.get("kind") == "cuda")
    if "achieved_tflops" in modes:
        modes = modes.assign(achieved_tflops=modes["achieved_tflops"] * scale).rename(
            columns={"achieved_tflops": f"achieved {unit}"}
        )
    st.dataframe(modes.drop(columns=["kind"]), hide_index=True)


single, sweep, imported = st.tabs(["Step benchmark", "Precision sweep", "Import a trace"])
with single:
    cols = st.columns(4)
    start = PRECISION_FOR_DTYPE.get(lab.selected_dtype(), "fp32")
    precision = cols[0].selectbox(
        "Precision",
        PRECISIONS,
        index=PRECISIONS.index(start),
        key=f"{KEY}.precision",
        help=f"MFU is measured against the datasheet peak of the unit: "
        f"{', '.join(f'{k} → {v}' for k, v in DTYPE_FOR_PRECISION.items())}.",
    )
    cold = cols[1].number_input("Steps without warm-up", 0, 100, DEFAULTS.cold_steps, key=f"{KEY}.cold")
    profile = cols[2].number_input(
        "Profiled steps", 0, 10, DEFAULTS.profile_steps, key=f"{KEY}.profile", help="0 skips the kernel breakdown"
    )
    trace = cols[3].checkbox("Chrome trace", DEFAULTS.trace, key=f"{KEY}.trace")
    run_panel.run_controls(
        f"{KEY}.single",
        "step-bench",
        lambda: config_to_dict(
            StepBenchConfig(
                **common, precision=precision, cold_steps=int(cold), profile_steps=int(profile), trace=trace
            )
        ),
        label="Run step benchmark",
        device=device,
    )
    run_panel.results(f"{KEY}.single", render_single)
with sweep:
    st.caption(
        "Every precision mode on the same model and settings; modes this device cannot run are shown as "
        "unsupported with the reason. No profiling in a sweep."
    )
    run_panel.run_controls(
        f"{KEY}.sweep",
        "step-bench",
        lambda: config_to_dict(StepBenchConfig(**common, sweep=True, cold_steps=0, profile_steps=0, trace=False)),
        label="Run precision sweep",
        device=device,
    )
    run_panel.results(f"{KEY}.sweep", render_sweep)
with imported:
    trace_panel.section(f"{KEY}.trace")

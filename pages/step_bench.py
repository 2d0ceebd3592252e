"""Step benchmark: the course's step beside today's stack, tokens per second, MFU as the field counts it, how busy
the device was, and what the kernels do."""

from dataclasses import replace
from pathlib import Path

import streamlit as st

from core.errors import ConfigError
from core.experiment import config_to_dict
from core.experiments.step_bench import StepBenchConfig, answer_lines
from core.result import RunResult
from core.rows.step_bench import StepBenchMeta
from core.transformer.mfu import HOST_BOUND_WARNING
from core.transformer.presets import (
    LADDER,
    MODEL_NAMES,
    OPTIMIZERS,
    PRECISION_FOR_DTYPE,
    PRECISION_NOTES,
    PRECISIONS,
)
from core.units import MIB, bytes_text
from pages.common import lab, node, run_panel, trace_panel
from pages.common.charts import show_charts
from pages.common.markdown import markdown_text
from pages.common.methods import MODEL_NOTE, how_measured
from pages.common.stack import switches
from pages.common.tables import show_table
from render.plots.step_bench import (
    cold_text,
    config_table,
    figures,
    host_bound_stacks,
    kernel_table,
    stack_table,
    tables,
)

KEY = "step_bench"
MAX_TRACE_DOWNLOAD_BYTES = 200 * MIB
DEFAULTS = StepBenchConfig()
COURSE_VS_MODERN = "course vs modern"

st.title("Step benchmark")
st.write(
    f"One training step of the lab's own Transformer ({MODEL_NOTE}), timed phase by phase with a device synchronisation "
    "(CUDA events on a GPU, `perf_counter` on a CPU): the step as the lab's model writes it (stack *course*) beside today's stack "
    "(fused attention, fused AdamW, `torch.compile`), on the same shape. MFU is the model's FLOPs per second over the "
    "card's bf16 dense peak, whatever the precision, as nanoGPT, llm.c and torchtitan count it."
)
how_measured("step_bench", "model", "all_gpus")

device = lab.device_choice(KEY)
sidebar_model = lab.selected_model()
cols = st.columns(5)
model = cols[0].selectbox(
    "Model",
    MODEL_NAMES,
    index=MODEL_NAMES.index(sidebar_model) if sidebar_model in MODEL_NAMES else 0,
    key=f"{KEY}.model",
    help="The lab's model sizes, GPT-2's (comparable with nanoGPT and llm.c) and published architectures; the sidebar's "
    "size is the default.",
)
batch = cols[1].number_input(
    "Batch", 0, 4096, DEFAULTS.batch, key=f"{KEY}.batch", help="0: the largest the planner says fits (a CPU: 4)"
)
context = cols[2].number_input("Context (tokens)", 2, 16384, DEFAULTS.context, key=f"{KEY}.context")
optimizer = cols[3].selectbox("Optimizer", OPTIMIZERS, index=OPTIMIZERS.index(DEFAULTS.optimizer), key=f"{KEY}.opt")
timed = cols[4].number_input("Timed steps", 2, 10_000, DEFAULTS.timed_steps, key=f"{KEY}.timed")
st.caption(
    f"Device **{device}** comes from the sidebar."
    if device != "all"
    else "The benchmark runs on **every GPU at once**."
)
if device == "cpu" and model not in ("tiny", "mini"):
    st.warning(f"`{model}` on a CPU takes minutes per step; `tiny` and `mini` finish in seconds.")

with st.expander("Stack", expanded=True):
    cols = st.columns(5)
    which = cols[0].radio("Run", (COURSE_VS_MODERN, "one stack"), key=f"{KEY}.which")
    picked = switches(cols[1:4], KEY, "compile time is reported apart")
    checkpointing = cols[4].checkbox("Checkpointing", key=f"{KEY}.checkpointing", help="every layer")
    chosen = replace(picked, checkpointing=checkpointing)
    stacks = ("course", "modern") if which == COURSE_VS_MODERN else (chosen.name,)
    st.caption(
        "Course: written-out attention, the per-parameter AdamW loop, eager. Modern: "
        "`scaled_dot_product_attention(is_causal=True)`, fused AdamW, `torch.compile`."
        if which == COURSE_VS_MODERN
        else f"Stack **{chosen.name}**: {chosen.describe()}."
    )
    cols = st.columns(4)
    warmup = cols[0].number_input("Warm-up steps (at least)", 0, 1000, DEFAULTS.warmup_steps, key=f"{KEY}.warmup")
    most = cols[1].number_input("Warm-up steps (at most)", 0, 1000, DEFAULTS.max_warmup_steps, key=f"{KEY}.most")
    cold = cols[2].number_input("Steps without warm-up", 0, 100, DEFAULTS.cold_steps, key=f"{KEY}.cold")
    profile = cols[3].number_input(
        "Profiled steps", 0, 10, DEFAULTS.profile_steps, key=f"{KEY}.profile", help="busy % and kernels; 0: none"
    )
common = {
    "model": model,
    "batch": int(batch),
    "context": int(context),
    "optimizer": optimizer,
    "stacks": stacks,
    "warmup_steps": int(warmup),
    "max_warmup_steps": max(int(most), int(warmup)),
    "timed_steps": int(timed),
    "profile_steps": int(profile),
}


def grid_config() -> dict:
    if not models or not precisions:
        raise ConfigError("choose at least one model and one precision for the grid")
    return config_to_dict(
        StepBenchConfig(**common, models=tuple(models), precisions=tuple(precisions), cold_steps=0, trace=False)
    )


def answer(run: RunResult) -> None:
    """The answer in words first: each configuration's time, tokens/s, MFU and busy share; host-bound said plainly."""
    for line in answer_lines(run.rows, run.meta):
        if line.startswith("host-bound"):
            st.warning(markdown_text(line))
        else:
            st.markdown(("    - " if line.startswith("  ") else "- ") + markdown_text(line.strip()))
    meta = StepBenchMeta.from_run(run)
    if meta.cpu_load_note:
        st.warning(f"Busy machine: {markdown_text(meta.cpu_load_note)}.")
    if meta.batch_rule:
        st.caption(f"Batch {meta.batch}: {markdown_text(meta.batch_rule)}. {markdown_text(meta.steady_rule)}.")


def trace_download(run: RunResult) -> None:
    for stack, path in StepBenchMeta.from_run(run).trace_files.items():
        if not path:
            continue
        trace, what = Path(path), f"Chrome trace{f' ({stack})' if stack else ''}"
        if not trace.exists():
            st.caption(f"The {what} `{path}` is no longer on this machine (the lab keeps the newest 20).")
        elif trace.stat().st_size > MAX_TRACE_DOWNLOAD_BYTES:
            st.caption(f"{what}: `{path}` ({bytes_text(trace.stat().st_size)}) — open it at ui.perfetto.dev.")
        else:
            st.download_button(
                f"{what} for Perfetto ({bytes_text(trace.stat().st_size)}, gzip JSON)",
                trace.read_bytes,
                trace.name,
                "application/gzip",
                key=f"{KEY}.trace.{run.id}.{stack}",
                on_click="ignore",
                help="open at https://ui.perfetto.dev or chrome://tracing",
            )


def render_single(run: RunResult) -> None:
    node.show(run)
    answer(run)
    table = stack_table(run)
    if not table.empty:
        show_table(table, hide_index=True)
    summary = next(iter(tables(run).summaries), None)
    if summary and summary.first_step_ms is not None:
        meta = StepBenchMeta.from_run(run)
        st.caption(f"{cold_text(summary, meta.cold_includes)} Timing: {meta.timing}.")
    show_charts(figures(run), f"{KEY}.single")
    kernels = kernel_table(run)
    if not kernels.empty:
        st.subheader("Top kernels" if run.device_info.is_cuda else "Top ops (CPU: self time per op)")
        st.caption(StepBenchMeta.from_run(run).profile_measure)
        show_table(kernels, hide_index=True)
    trace_download(run)


def render_configs(name: str):
    """A sweep's or a grid's run: its host-bound configurations said, its charts, its configurations listed."""

    def render(run: RunResult) -> None:
        node.show(run)
        bound = host_bound_stacks(tables(run).configs)
        if bound:
            st.warning(f"{HOST_BOUND_WARNING}: {', '.join(bound)}.")
        show_charts(figures(run), f"{KEY}.{name}")
        table = config_table(run)
        if not table.empty:
            show_table(table, hide_index=True)

    return render


single, sweep, grid, imported = st.tabs(
    ["Stacks side by side", "Precision sweep", "Size × precision", "Import a trace"]
)
with single:
    start = PRECISION_FOR_DTYPE.get(lab.selected_dtype(), "fp32")
    precision = st.selectbox(
        "Precision",
        PRECISIONS,
        index=PRECISIONS.index(start),
        key=f"{KEY}.precision",
        format_func=lambda p: f"{p} — {PRECISION_NOTES[p]}",
    )
    trace = st.checkbox("Chrome trace", DEFAULTS.trace, key=f"{KEY}.trace")
    run_panel.run_controls(
        f"{KEY}.single",
        "step-bench",
        lambda: config_to_dict(
            # one of PRECISIONS, which the box offers (typed str by the widget); the config checks it
            StepBenchConfig(**common, precision=precision, cold_steps=int(cold), trace=trace)  # pyright: ignore[reportArgumentType]
        ),
        label="Run step benchmark",
        device=device,
    )
    run_panel.results(f"{KEY}.single", render_single)
with sweep:
    st.caption(
        "Every precision mode on the same model, shape and stacks; modes this device cannot run are shown as "
        "unsupported with the reason."
    )
    run_panel.run_controls(
        f"{KEY}.sweep",
        "step-bench",
        lambda: config_to_dict(StepBenchConfig(**common, sweep=True, cold_steps=0, trace=False)),
        label="Run precision sweep",
        device=device,
    )
    run_panel.results(f"{KEY}.sweep", render_configs("precision"))
with grid:
    st.caption("Model sizes against precisions at one context: where bf16 starts to pay, on this card.")
    models = st.multiselect("Models", MODEL_NAMES, default=list(LADDER[:4]), key=f"{KEY}.models")
    precisions = st.multiselect(
        "Precisions", PRECISIONS, default=["fp32", "bf16-autocast"], key=f"{KEY}.grid_precisions"
    )
    run_panel.run_controls(
        f"{KEY}.grid",
        "step-bench",
        grid_config,
        label="Run size × precision grid",
        device=device,
    )
    run_panel.results(f"{KEY}.grid", render_configs("grid"))
with imported:
    trace_panel.section(f"{KEY}.trace")

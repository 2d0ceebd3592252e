"""Training memory: where every byte of a training step goes — measured timeline, estimate, planner, compare."""

import streamlit as st

from core.errors import ConfigError
from core.experiment import config_to_dict
from core.result import DeviceInfo, RunResult
from core.rows.estimate import EstimatePlan
from core.rows.train_memory import TrainMemorySummary
from core.transformer.planner import EstimateConfig, fit_text
from core.transformer.presets import (
    ARCHITECTURE_NAMES,
    DEFAULT_BATCH,
    DEFAULT_CONTEXT,
    OPTIMIZERS,
    PRECISION_FOR_DTYPE,
    PRECISIONS,
    custom_spec,
    get_preset,
)
from core.units import GIB, bytes_text
from pages.common import lab, run_panel, snapshot_panel, stack
from pages.common.charts import show_charts
from pages.common.facts import fact
from pages.common.markdown import markdown_text
from pages.common.methods import MODEL_NOTE, how_measured
from pages.common.tables import show_table
from render.plots import overlay_for
from render.plots.estimate import activations_caption, model_caption, published_caption
from render.plots.estimate import figures as estimate_figures
from render.plots.max_batch import figures as max_batch_figures
from render.plots.train_memory import compare_label, figures

KEY = "training_memory"
# The sidebar's dtype picks the matching precision mode; the page's own dropdown can override it.

st.title("Training memory")
st.write(
    f"One training step of the lab's own Transformer ({MODEL_NOTE}), allocation by allocation: parameters, gradients, "
    "optimizer state, activations saved for backward, temporaries. The measured timeline sits next to an "
    "analytical **estimate** counted from the tensors the model saves, so you can see where the peak is "
    "and whether a bigger model fits before you try it."
)
how_measured("train_memory", "model", "snapshot")

device = lab.selected_device()
info = lab.device_info(device) or DeviceInfo()
target = "cuda" if info.is_cuda else "cpu"

MODEL_SOURCES = ("sidebar preset", "published architecture", "your own dimensions")
source = st.radio(
    "Model",
    MODEL_SOURCES,
    horizontal=True,
    key=f"{KEY}.model_source",
    help="The lab's Transformer sizes come from the sidebar; published architectures and your own dimensions "
    "(grouped-query attention, tied embeddings) use the same family: RMSNorm, SwiGLU, RoPE, no biases.",
)
model = lab.selected_model()  # the sidebar's model size: one selector for every page
if source == MODEL_SOURCES[1]:
    model = st.selectbox("Architecture", ARCHITECTURE_NAMES, key=f"{KEY}.architecture")
    st.caption(published_caption(get_preset(model)))
elif source == MODEL_SOURCES[2]:
    dims = st.columns(7)
    d_model = dims[0].number_input("d_model", 2, 131_072, 2048, step=64, key=f"{KEY}.d_model")
    layers = dims[1].number_input("layers", 1, 1024, 16, key=f"{KEY}.layers")
    heads = dims[2].number_input("heads", 1, 4096, 16, key=f"{KEY}.heads")
    kv_heads = dims[3].number_input("KV heads", 1, 4096, 4, key=f"{KEY}.kv_heads", help="fewer than heads: GQA")
    d_ff = dims[4].number_input("d_ff", 1, 1_048_576, 5632, step=64, key=f"{KEY}.d_ff")
    vocab = dims[5].number_input("vocab", 1, 10_000_000, 32_000, key=f"{KEY}.vocab")
    tied = dims[6].checkbox("tied embeddings", key=f"{KEY}.tied")
    model = custom_spec(int(d_model), int(layers), int(heads), int(d_ff), int(vocab), int(kv_heads), tied)
    try:
        get_preset(model)
    except ConfigError as exc:
        st.error(f"Invalid model: {exc}")
        st.stop()
cols = st.columns(4)
cols[0].text_input(
    "Model",
    model if source == MODEL_SOURCES[0] else model.removeprefix("custom:")[:40],
    disabled=True,
    help="The course presets change in the sidebar.",
)
precision_default = PRECISION_FOR_DTYPE.get(lab.selected_dtype(), "fp32")
if target == "cpu" and precision_default == "tf32":
    precision_default = "fp32"
precision = cols[1].selectbox(
    "Precision", PRECISIONS, index=PRECISIONS.index(precision_default), key=f"{KEY}.precision"
)
optimizer = cols[2].selectbox("Optimizer", OPTIMIZERS, index=OPTIMIZERS.index("adamw"), key=f"{KEY}.optimizer")
batch = cols[3].number_input("Batch", 1, 65_536, DEFAULT_BATCH, key=f"{KEY}.batch")
cols = st.columns(4)
context = cols[0].number_input("Context (tokens)", 1, 65_536, DEFAULT_CONTEXT, key=f"{KEY}.context")
checkpointing = cols[1].checkbox("Activation checkpointing", key=f"{KEY}.ckpt")
set_to_none = cols[2].checkbox("zero_grad(set_to_none)", value=True, key=f"{KEY}.none")
forward_only = cols[3].checkbox("Forward only", key=f"{KEY}.fwd")
picked = stack.switches(st.columns(3), KEY, "what inductor's partitioner saves")
settings = {
    "model": model,
    "precision": precision,
    "optimizer": optimizer,
    "batch": int(batch),
    "context": int(context),
    "checkpointing": checkpointing,
    "attention": picked.attention,
    "optimizer_impl": picked.optimizer_impl,
    "compile": picked.compile,
    "set_to_none": set_to_none,
    "forward_only": forward_only,
}
st.caption(model_caption(model, get_preset(model)))

st.header("Planner (estimate — nothing runs)")
memory_default = (info.total_memory_bytes or 16 * GIB) / GIB
memory_gib = st.number_input(
    "Device memory to plan for (GiB)",
    0.5,
    100_000.0,
    round(memory_default, 1),
    key=f"{KEY}.memory",
    help="Defaults to the selected device; type another GPU's size.",
)
plan_target = st.radio(
    "Plan for",
    ("cuda", "cpu"),
    index=0 if target == "cuda" else 1,
    horizontal=True,
    key=f"{KEY}.target",
    help="Autocast policies and the cuBLAS workspace differ.",
)
PLAN_RUNS_READ = 200  # the newest stored plans looked at for these settings
PLAN_WAIT_S = 60.0  # a plan takes milliseconds: this is for a box too busy to say so


def planned(values: dict) -> RunResult | None:
    """The stored plan of exactly these settings, else a plan made now and stored like any run (the planner runs
    in-process: milliseconds); None when the job could not answer."""
    store = lab.store()
    if store is not None:
        for summary in store.summaries(experiment="estimate", status="ok", limit=PLAN_RUNS_READ):
            if summary.config == values and not summary.imported:
                return store.get(summary.id)
    return lab.manager().submit("estimate", values, "auto", name="planned on Training memory").wait(PLAN_WAIT_S)


try:
    est_values = config_to_dict(EstimateConfig(**settings, target=plan_target, memory_gib=float(memory_gib)))
except ConfigError as exc:
    st.error(f"Invalid settings: {markdown_text(exc)}")
    st.stop()
plan_run = planned(est_values)
if plan_run is None or plan_run.status != "ok":
    st.error(f"The planner gave no answer: {markdown_text(plan_run.error if plan_run else 'it did not finish')}")
    st.stop()
answer = EstimatePlan.from_meta(plan_run.meta)
cols = st.columns(4)
fact(cols[0], "Estimated peak (allocator)", bytes_text(answer.peak_estimated_bytes), answer.peak_phase)
cols[1].metric(
    "With context allowance",
    bytes_text(answer.device_total_estimated_bytes),
    help="Allocator peak + 5% fragmentation + 600 MiB CUDA context: allowances, not measurements.",
)
cols[2].metric("Max batch that fits (estimate)", answer.max_batch_estimated)
cols[3].metric("fp32 peak for comparison", bytes_text(answer.fp32_peak_estimated_bytes or 0))
(st.success if answer.max_batch_estimated else st.error)(markdown_text(fit_text(answer)))
st.caption(f"Attention modelled: {markdown_text(answer.attention_note or '')}. Plan stored as run {plan_run.id[:8]}.")
show_charts(estimate_figures(plan_run), f"{KEY}.plan")
st.caption(activations_caption(answer))

st.header("Measure")
st.caption(
    "Runs warm-up + recorded steps in a fresh worker on the selected device, records every allocation "
    "(GPU: allocator history; CPU: the profiler's memory events) and compares the peak with the estimate."
)
run_panel.run_controls(KEY, "train-memory", lambda: dict(settings), label="Run and record")


def render(run) -> None:
    meta = TrainMemorySummary.from_meta(run.meta)
    cols = st.columns(3)
    fact(cols[0], "Measured peak", bytes_text(meta.peak_measured_bytes), meta.peak_phase)
    fact(cols[1], "Estimated peak", bytes_text(meta.peak_estimated_bytes), meta.peak_phase_estimated)
    cols[2].metric("Estimate error", f"{meta.error_pct:+.1f} %")
    st.caption(f"Method: {meta.method}")
    show_charts(figures(run), f"{KEY}.result")


def render_max_batch(run) -> None:
    show_charts(max_batch_figures(run), f"{KEY}.max")
    show_table(run.frame(), hide_index=True)


run_panel.results(KEY, render)

if target == "cuda":
    st.subheader("Max batch, confirmed by real steps")
    st.caption("Binary search from the estimate; every probe is a fresh process, out-of-memory caught.")
    run_panel.run_controls(
        f"{KEY}.max",
        "max-batch",
        lambda: {
            "model": model,
            "precision": precision,
            "optimizer": optimizer,
            "context": int(context),
            "checkpointing": checkpointing,
        },
        label="Find max batch",
    )
    run_panel.results(f"{KEY}.max", render_max_batch, empty="Not searched yet.")
else:
    st.caption("Max batch confirmation needs a GPU (a CPU has no device-memory limit to search).")

st.header("Compare runs")
COMPARED = 50  # the newest runs offered: the list reads their summaries, only the runs picked are read whole
store = lab.store()
stored = store.summaries(experiment="train-memory", status="ok", limit=COMPARED) if store else []
if len(stored) < 2:
    st.info("Record two or more runs (e.g. fp32 and bf16-autocast) to overlay them here.")
else:
    labels = {r.id: compare_label(r) for r in stored}
    chosen = st.multiselect(
        f"Runs (the newest {COMPARED})" if len(stored) == COMPARED else "Runs",
        list(labels),
        placeholder="pick two or more to overlay them (each is read when picked)",
        format_func=labels.__getitem__,
        key=f"{KEY}.compare",
    )
    runs = [run for run_id in chosen if (run := run_panel.opened(run_id))]
    if len(runs) >= 2:
        run_panel.guarded(runs[0], lambda: show_charts(overlay_for(runs), f"{KEY}.overlay"))

st.header("Your own training (imported snapshot)")
st.caption(
    "The same views for a snapshot of your own job: the peak and its stack, who holds memory, categories "
    "inferred from stacks, the segment map at any moment, and two snapshots side by side."
)
snapshot_panel.section(f"{KEY}.snapshot")

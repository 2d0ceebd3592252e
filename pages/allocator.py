"""Allocator: replay the memory experiments of the lab's notes on this device and watch PyTorch's caching
allocator."""

import streamlit as st

from core.errors import ConfigError
from core.experiments.allocator import GPU_ONLY_SCENARIOS, SCENARIOS, AllocatorConfig, check_size, scenario_steps
from core.memory.steps import OPS, parse_step, validate_steps
from core.result import DeviceInfo
from core.rows.allocator import AllocatorMeta
from core.units import MIB
from pages.common import lab, run_panel, snapshot_panel
from pages.common.charts import show, show_charts
from pages.common.methods import how_measured
from pages.common.tables import show_table
from render.plots import allocator as plots

EXPECTATIONS = "Where the expectations come from"  # a section of docs/methods/allocator.md
EXPECTATIONS_ANCHOR = "where-the-expectations-come-from"  # Streamlit's anchor of that heading
KEY = "allocator"
CUSTOM_KEY = "allocator.custom_steps"  # plain session key: the composed steps survive reruns
AB_KEYS = "allocator.ab_keys"
SETTINGS = ("default", "expandable_segments:True", "garbage_collection_threshold:0.6", "max_split_size_mb")
GPU_ONLY_TEXT = (
    "the **backward-peak** and **fragmentation** scenarios, the allocator's numbers "
    "(allocated, reserved, peak, driver-used), the **segment map**, the **counters table** and the "
    "**allocation history** — they read the CUDA caching allocator, which a CPU does not have"
)

st.title("Allocator")
st.write(
    "PyTorch keeps freed GPU memory in its **caching allocator**: *allocated* is what live tensors use, "
    "*reserved* is what the allocator holds from the driver (what nvidia-smi shows, plus the CUDA "
    "context). Each scenario below is a list of named steps; after every step the run reads the "
    "allocator's counters, the driver's used memory and the process RSS. Every run gets a fresh worker "
    "process, so `PYTORCH_CUDA_ALLOC_CONF` (read once per process) can differ between runs."
)
how_measured("allocator", "snapshot")

device = lab.selected_device()
info = lab.device_info(device) or DeviceInfo()
on_gpu = info.is_cuda
free_bytes = None if info.free_memory_bytes is None else int(info.free_memory_bytes)
if not on_gpu:
    st.info(
        f"**CPU selected — no caching allocator here.** The lifecycle and custom scenarios run with the "
        f"process RSS and the bytes of the live tensors: on a CPU, memory goes back to the OS the moment a "
        f"large tensor is deleted (the contrast the expectations draw). Needs a GPU: {GPU_ONLY_TEXT}."
    )


def _default_size_mib() -> int:
    return max(1, min(1024, (free_bytes or 8 * 1024 * MIB) // MIB // 8))


def _custom_steps() -> list[str]:
    return st.session_state.setdefault(CUSTOM_KEY, [])


def _composer() -> None:
    """Build custom steps from dropdowns; each addition is validated with the steps before it."""
    steps = _custom_steps()
    names = sorted({parse_step(s).args[0] for s in steps if parse_step(s).args})
    cols = st.columns([2, 1, 1, 1])
    op = cols[0].selectbox(
        "Operation", list(OPS), key="allocator.op", help="\n".join(f"- `{k}`: {v[1]}" for k, v in OPS.items())
    )
    kinds = OPS[op][0]
    args: list[str] = []
    if kinds:
        first_is_new = op in ("alloc", "alloc_grad", "alloc_cpu", "scale", "matmul")
        name = (
            cols[1].text_input("Tensor", value="a", key="allocator.name")
            if first_is_new or not names
            else cols[1].selectbox("Tensor", names, key="allocator.pick")
        )
        args.append(name or "")  # None only where the widget has no value: the step check refuses it, as it does ""
    if kinds[1:] == ("name",):
        args.append(cols[2].selectbox("From", names or ["(none yet)"], key="allocator.source"))
    if kinds[1:] == ("mib",):
        args.append(str(cols[2].number_input("MiB", min_value=1, value=64, step=64, key="allocator.mib")))
    cols[3].caption(OPS[op][1])
    buttons = st.columns(4)
    if buttons[0].button("Add step", key="allocator.add"):
        text = " ".join([op, *map(str, args)])
        try:
            validate_steps([parse_step(s, i) for i, s in enumerate([*steps, text], 1)])
        except ConfigError as exc:
            st.error(f"Not added: {exc}")
        else:
            steps.append(text)
            st.rerun()
    if buttons[1].button("Remove last", key="allocator.pop", disabled=not steps):
        steps.pop()
        st.rerun()
    if buttons[2].button("Clear", key="allocator.clear", disabled=not steps):
        steps.clear()
        st.rerun()
    if buttons[3].button("Start from lifecycle", key="allocator.load"):
        steps[:] = [s.text for s in scenario_steps(AllocatorConfig(size_mib=64))]
        st.rerun()
    if steps:
        show_table([{"#": i, "step": s, "does": OPS[s.split()[0]][1]} for i, s in enumerate(steps, 1)], hide_index=True)
    else:
        st.caption("No steps yet: pick an operation and press Add step.")


def _allocator_report(run) -> None:
    """What the allocator itself says it ran with: a variable can be silently ignored."""
    meta = AllocatorMeta.from_meta(run.meta)
    if meta.allocator_backend:
        settings = meta.allocator_settings_reported
        shown = ", ".join(f"`{k}={v}`" for k, v in settings.items() if k != "roundup_power2_divisions")
        st.caption(f"The allocator reports: backend `{meta.allocator_backend}`" + (f"; {shown}" if shown else ""))
    for text in meta.alloc_conf_not_applied:
        st.warning(f"Setting not applied — {text}")
    if meta.snapshot_note:
        st.info(meta.snapshot_note)


def _seen(run) -> str:
    seen = AllocatorMeta.from_meta(run.meta).alloc_conf_seen
    return "?" if seen is None else seen


def _ab_report(run) -> None:
    """One side of the A/B comparison: the setting its worker saw, and what the allocator says it ran with."""
    st.caption(f"setting seen by the worker: `{_seen(run)}`")
    _allocator_report(run)


def _render(run) -> None:
    _allocator_report(run)
    charts = plots.figures(run)
    show(charts[0].figure, charts[0].data, charts[0].name, f"{KEY}.timeline")
    claims = plots.seed_claims_frame(run)
    if not claims.empty:
        st.subheader("What each step was expected to do")
        st.caption(
            "Expected: what these steps did when first run by hand with 1 GiB tensors, read from nvidia-smi "
            "(driver used) and the system monitor (host) — see "
            f"[{EXPECTATIONS}](#{EXPECTATIONS_ANCHOR}) under *How measured*. Each Δ is this run's "
            "change since the previous step"
            + ("" if plots.is_cuda_run(run) else "; on a CPU only the host columns apply")
            + "."
        )
        show_table(claims, hide_index=True)
    backward = plots.backward_frame(run)
    if not backward.empty:
        st.subheader("Backward peak as a multiple of size(x)")
        show_table(backward, hide_index=True)
        st.caption(
            "`y = 5*x` keeps y alive during backward: MeanBackward materialises the gradient of y "
            "(grad / numel, one size) and MulBackward makes x.grad (another), so x, y, grad of y and "
            "x.grad coexist — 4 sizes. In `(5*x).mean()` nothing holds 5*x after the forward (mul by a "
            "scalar saves no tensor), so the peak is 3 sizes."
        )
    if not plots.is_cuda_run(run):
        st.caption(f"Not measured on a CPU: {GPU_ONLY_TEXT}.")
        return
    mapped, steps = plots.segment_steps(run), plots.steps(run)
    if mapped:
        st.subheader("Segment map")
        position = st.select_slider(
            "After step",
            options=mapped,
            value=mapped[-1],
            key=f"{KEY}.segstep",
            format_func=lambda i: steps[i].step,
        )
        chart = plots.segment_map(run, position)
        show(chart.figure, chart.data, chart.name, f"{KEY}.segments")
    st.subheader("Allocator counters (memory_stats)")
    show_table(plots.counters_frame(run), hide_index=True)
    for chart in charts[1:]:
        if chart.name == "allocator-history":
            show(chart.figure, chart.data, chart.name, f"{KEY}.history")


scenario_options = list(SCENARIOS) if on_gpu else [s for s in SCENARIOS if s not in GPU_ONLY_SCENARIOS]
scenario = st.selectbox(
    "Scenario",
    scenario_options,
    key=f"{KEY}.scenario",
    help="lifecycle: the expected create / move / re-create / del sequence. backward-peak: "
    "`y = 5*x; y.mean().backward()` vs `(5*x).mean().backward()`. fragmentation: holes "
    "that leave reserved ≫ allocated. custom: compose your own steps.",
)
size_mib = 0
if scenario != "custom":
    size_mib = int(
        st.number_input(
            "Tensor size (MiB)",
            min_value=1,
            value=_default_size_mib(),
            step=64,
            key=f"{KEY}.size",
            help="The expectations were read with 1 GiB. One tensor may not exceed the device's free memory "
            f"({(free_bytes or 0) // MIB} MiB now).",
        )
    )
else:
    _composer()
with st.expander("Recording options"):
    segment_map = st.checkbox("Segment map after every step (GPU)", value=True, key=f"{KEY}.segmap")
    history_entries = int(
        st.number_input(
            "Allocation history: max entries (0 = off; GPU)",
            min_value=0,
            max_value=100_000,
            value=0,
            step=1000,
            key=f"{KEY}.history",
        )
    )


def _values(alloc_conf: str = "") -> dict:
    """The config for a run; raises ConfigError (shown by the run panel) past the free-memory cap."""
    values = {
        "scenario": scenario,
        "segment_map": segment_map,
        "history_entries": history_entries,
        "alloc_conf": alloc_conf,
    }
    if scenario == "custom":
        values["steps"] = list(_custom_steps())
        sizes = [parse_step(s).args[1] for s in values["steps"] if parse_step(s).op.startswith("alloc")]
        for size in sizes:
            check_size(size, free_bytes)
    else:
        check_size(size_mib, free_bytes)
        values["size_mib"] = size_mib
    planned = validate_steps(scenario_steps(AllocatorConfig(**values)))
    if free_bytes and planned * MIB > free_bytes:
        st.warning(
            f"The named tensors need about {planned} MiB at once (estimate); {free_bytes // MIB} MiB are "
            f"free, so expect the run to stop with out-of-memory at the step that crosses it."
        )
    return values


tab_run, tab_ab, tab_import = st.tabs(["Run scenario", "Settings A/B", "Your snapshot"])
with tab_run:
    run_panel.run_controls(KEY, "allocator", _values)
    run_panel.results(KEY, _render)

with tab_ab:
    st.write(
        "The same scenario under several `PYTORCH_CUDA_ALLOC_CONF` settings, each in its own fresh "
        "worker process; reserved (solid) and allocated (dashed) are overlaid."
    )
    if not on_gpu:
        st.caption(
            "On a CPU the setting changes nothing (there is no caching allocator); the runs still show that "
            "each setting got its own process and which setting it saw."
        )
    chosen = st.multiselect("Settings", SETTINGS, default=list(SETTINGS[:2]), key=f"{KEY}.settings")
    split_mb = int(st.number_input("max_split_size_mb", min_value=21, value=128, step=32, key=f"{KEY}.split"))
    if st.button("Run A/B", key=f"{KEY}.ab", type="primary", disabled=not chosen):
        try:
            configs = [
                _values("" if s == "default" else f"max_split_size_mb:{split_mb}" if s == "max_split_size_mb" else s)
                for s in chosen
            ]
        except ConfigError as exc:
            st.error(f"Invalid settings: {exc}")
        else:
            keys = [f"{KEY}.ab{i}" for i in range(len(configs))]
            if all(run_panel.submit(k, "allocator", v) for k, v in zip(keys, configs)):
                st.session_state[AB_KEYS] = keys
    finished = []
    for key in st.session_state.get(AB_KEYS, []):
        with st.container(border=True):
            done = run_panel.results(key, _ab_report)
            if done is not None and done.rows:
                finished.append(done)
    if finished and len(finished) == len(st.session_state.get(AB_KEYS, [])):
        show_charts(plots.overlay(finished), f"{KEY}.overlay")

with tab_import:
    snapshot_panel.section(f"{KEY}.snapshot")

"""Interconnect: host↔GPU copies, the GPU×GPU peer matrix, and collectives (algbw, busbw) over real ranks."""

import streamlit as st

from core.distributed.collectives import COLLECTIVES, CPU_SIZES, GPU_SIZES, resolve_backend
from core.distributed.config import PARTS, InterconnectConfig
from core.result import RunResult
from core.rows.interconnect import InterconnectMeta
from core.units import exact_size_text
from pages.common import hang_panel, lab
from pages.common.charts import show_charts
from pages.common.facts import fact
from pages.common.methods import how_measured
from pages.common.run_panel import results, run_controls
from pages.common.tables import show_table
from render.plots.interconnect import figures, frame_of, tables

KEY = "interconnect"
DEFAULTS = InterconnectConfig()
PART_LABELS = {"copy": "Host↔GPU copies", "peer": "GPU×GPU peer matrix", "collectives": "Collectives"}
COLLECTIVE_COLUMNS = [
    "collective",
    "size",
    "bytes",
    "world_size",
    "median_ms",
    "p20_ms",
    "p80_ms",
    "reps",
    "algbw_gbs",
    "busbw_gbs",
    "busbw_factor",
    "call_max_median_ms",
    "slowest_rank",
    "check",
]
RANK_COLUMNS = ["collective", "size", "rank", "host", "local_rank", "device", "median_ms", "p20_ms", "p80_ms", "check"]


def _gpus() -> int:
    return sum(d.is_cuda for d in lab.box_devices())


def settings(gpus: int) -> dict:
    values: dict = {}
    values["parts"] = st.multiselect(
        "Measure", PARTS, default=list(PARTS), format_func=PART_LABELS.__getitem__, key=f"{KEY}.parts"
    )
    cols = st.columns(2)
    values["backend"] = cols[0].selectbox(
        "Backend",
        ("auto", "nccl", "gloo"),
        key=f"{KEY}.backend",
        help="auto: NCCL between the GPUs where there are GPUs, else Gloo between CPU processes.",
    )
    values["world_size"] = int(
        cols[1].number_input(
            "Ranks (0 = automatic)",
            0,
            64,
            0,
            key=f"{KEY}.world",
            help=f"0: one per GPU for NCCL ({gpus} here), 2 for Gloo. Gloo ranks on this box share its cores.",
        )
    )
    values["collectives"] = st.multiselect(  # a row of its own: five names do not fit a third of the page
        "Collectives", COLLECTIVES, default=list(COLLECTIVES), key=f"{KEY}.collectives"
    )
    defaults = GPU_SIZES if gpus else CPU_SIZES
    chosen = st.multiselect(
        "Message sizes",
        GPU_SIZES,
        default=list(defaults),
        format_func=exact_size_text,
        key=f"{KEY}.sizes",
        help="nccl-tests' sizes: the largest buffer of a rank. On a CPU the "
        "default stops at 16 MiB so a run takes seconds.",
    )
    values["sizes"] = [exact_size_text(s).replace(" ", "") for s in sorted(chosen)]
    with st.expander("Timing and copies"):
        values |= _timing()
    return values


def _timing() -> dict:
    """How long each point is timed, the collectives' timeout, and the copies' sizes."""
    values: dict = {}
    cols = st.columns(5)
    values["warmup_ms"] = cols[0].number_input(
        "warm-up per point (ms)", 0.0, 60000.0, DEFAULTS.warmup_ms, key=f"{KEY}.warm"
    )
    values["rep_ms"] = cols[1].number_input("timed per point (ms)", 1.0, 600000.0, DEFAULTS.rep_ms, key=f"{KEY}.rep")
    values["min_reps"] = cols[2].number_input("min calls", 1, 100000, DEFAULTS.min_reps, key=f"{KEY}.minr")
    values["max_reps"] = cols[3].number_input("max calls", 1, 100000, DEFAULTS.max_reps, key=f"{KEY}.maxr")
    values["timeout_s"] = cols[4].number_input(
        "collective timeout (s)",
        1.0,
        3600.0,
        DEFAULTS.timeout_s,
        key=f"{KEY}.timeout",
        help="A rank that keeps the others waiting this long ends the job, named in the error.",
    )
    cols = st.columns(2)
    values["copy_sizes"] = cols[0].multiselect(
        "Host↔GPU copy sizes",
        ("1MiB", "16MiB", "64MiB", "256MiB", "1GiB"),
        default=list(DEFAULTS.copy_sizes),
        key=f"{KEY}.copy",
    )
    values["peer_size"] = cols[1].selectbox(
        "GPU→GPU copy size", ("16MiB", "64MiB", "256MiB", "1GiB"), index=2, key=f"{KEY}.peer"
    )
    return values


def torchrun_command(values: dict, gpus: int) -> str:
    """What to run on every box for a multi-box job with these settings."""
    options = [f"--backend {resolve_backend(values['backend'], bool(gpus))}"]
    if values["sizes"]:
        options.append(f"--sizes {','.join(values['sizes'])}")
    if list(values["collectives"]) != list(COLLECTIVES):
        options.append(f"--collectives {','.join(values['collectives'])}")
    return (
        f"torchrun --nnodes 2 --nproc-per-node {gpus or 2} --rdzv-backend c10d \\\n"
        f"    --rdzv-endpoint FIRST_BOX:29500 --rdzv-id my-job \\\n"
        f"    -m core.cli.rank {' '.join(options)} --json"
    )


def render(run: RunResult) -> None:
    t = tables(run)
    peaks = t.best_busbw()
    for col, r in zip(st.columns(len(peaks)) if peaks else (), peaks):
        fact(  # the label is the collective alone: "reduce_scatter busbw (GB/s)" was cut in a fifth of the page
            col,
            r.collective,
            f"{r.busbw_gbs:.3g}",
            f"GB/s bus bandwidth at {r.size}",
            help=f"algbw {r.algbw_gbs:.3g} GB/s, {r.median_ms:.4g} ms per call",
        )
    show_charts(figures(run), KEY)
    meta = InterconnectMeta.from_meta(run.meta)
    measured = frame_of(run, t.collectives)
    if not measured.empty:
        show_table(measured.loc[:, [c for c in COLLECTIVE_COLUMNS if c in measured]], hide_index=True)
        ranks = frame_of(run, t.ranks, measured=False)
        with st.expander(f"Per rank ({meta.world_size} ranks)"):
            show_table(ranks.loc[:, [c for c in RANK_COLUMNS if c in ranks]], hide_index=True)
    for table in (frame_of(run, t.peers), frame_of(run, t.host_copies)):
        if not table.empty:
            show_table(table, hide_index=True)
    skipped = t.not_measured()
    if skipped:
        st.warning("Not measured:\n" + "\n".join(f"- {r.what}: {r.reason}" for r in skipped))
    if meta.ranks:
        st.caption(
            f"{meta.backend} · {meta.world_size} ranks on {meta.nodes} node(s): {', '.join(meta.hosts)} · "
            f"{meta.timer} · OMP_NUM_THREADS={meta.omp_num_threads}"
            + (f" · NCCL {meta.nccl_version}" if meta.nccl_version else "")
        )


st.title("Interconnect")
st.write(
    "Do the links of this box run at full speed? Host↔GPU copies (pinned vs pageable), every GPU→GPU pair "
    "with whether peer access is enabled, and the collectives of data-parallel training — all_reduce, "
    "all_gather, reduce_scatter, broadcast, all_to_all — over message sizes, reported as nccl-tests does "
    "(algbw, busbw). The ranks are real processes started through torchrun's launcher."
)
gpus = _gpus()
device = "cuda:0" if gpus else "cpu"
if gpus:
    st.caption(f"Runs on all {gpus} GPU(s) of this box from cuda:0 (jobs on any of them wait for it).")
else:
    st.info(
        "No CUDA GPU here: the **collectives run between CPU processes with Gloo** (results labelled CPU); "
        "the copies and the peer matrix are reported as unsupported, with the reason."
    )
how_measured("interconnect", "hang")
chosen = settings(gpus)
with st.expander("Many boxes: the torchrun command"):
    st.markdown(
        "Run this on **every** box (same command; `FIRST_BOX` is a host name all boxes reach). Rank 0 "
        "stores one run for the whole job in its box's run database and prints it; bring it here with "
        "*Compare & export → Import* (`python -m core runs export` there)."
    )
    st.code(torchrun_command(chosen, gpus), language="bash")
run_controls(KEY, "interconnect", lambda: chosen, device=device)
results(KEY, render)
hang_panel.section(f"{KEY}.hang")

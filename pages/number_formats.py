"""Number formats: what each format stores, how sums drift, what autocast does, matmul and int rounding.

Every tab runs a ``core`` experiment in the worker (the same call as ``python -m core <name>``)
and draws the stored run with ``render.plots.<name>``. The inspector submits by itself whenever
the typed value changes, so the page never blocks on a cast.
"""

import dataclasses
import math

import pandas as pd
import streamlit as st

from core.errors import ConfigError
from core.result import DeviceInfo, RunResult, rows_frame
from core.rows.autocast import ModuleDtypes
from core.rows.formats import FormatsSummary
from core.rows.quantize import QuantizeSummary
from core.units import numbers_text
from pages.common import lab, run_panel
from pages.common.charts import show_charts
from pages.common.methods import how_measured
from pages.common.tables import show_table
from render.plots import accumulate, autocast, formats, quantize, rounding

# What the course note (seeds/003) states, quoted beside the measured table — not measured.
NOTE_SAYS = {
    "fp32": "10^-38 ~ 10^38, 7 digits",
    "bf16": "10^-38 ~ 10^38, 3 digits",
    "fp16": "10^-4 ~ 10^4, 3 digits",
    "tf32": "10^-38 ~ 10^38, 4 digits",
    "int8": "-128 ~ 127",
}
DEFAULT_VALUE = "3.14159265"

st.title("Number formats")
st.caption(
    f"Runs on **{lab.device_options().get(lab.selected_device(), lab.selected_device())}** "
    "(change it in the sidebar). Every number below comes from PyTorch on that device."
)
how_measured("number_formats")

tab_inspect, tab_acc, tab_auto, tab_round, tab_quant = st.tabs(
    ["Value inspector & formats", "Accumulation", "Autocast dtypes", "Matmul rounding", "Integer quantization"]
)


def _stored_formats(value: float, device: str) -> RunResult | None:
    """The newest stored inspector run of this value on this device (the same card, by name), if any: a visit
    shows it instead of storing the same run again."""
    store = lab.store()
    here = lab.device_info(device) or DeviceInfo()
    for run in store.list(experiment="formats", status="ok", limit=50) if store is not None else []:
        same = run.device.get("torch_device") == device and run.device_info.name == here.name
        if same and run.config.get("value") == value:
            return run
    return None


def _table(df: pd.DataFrame, digits: dict[str, int]) -> None:
    """A table with "—" for what it lacks (never None), the columns in ``digits`` written by the one formatter in one
    notation each, to that many significant digits (fp64's max beside fp16's 65504: ``1.79769×10³⁰⁸``,
    ``6.5504×10⁴``, where the page once drew 17-digit reprs the table marked as errors)."""
    shown = df.assign(**{c: numbers_text(df[c].tolist(), n) for c, n in digits.items() if c in df})
    show_table(shown, hide_index=True)


def render_formats(run: RunResult) -> None:
    df = run.frame()
    cols = [
        c for c in ("format", "stored", "abs_error", "rel_error", "bits", "hex", "status", "reason") if c in df.columns
    ]
    _table(df.loc[:, cols], {"stored": 10, "abs_error": 4, "rel_error": 4})
    summary = FormatsSummary.from_meta(run.meta)
    st.caption(
        f"Errors against the typed decimal {summary.exact_value} (exact decimal arithmetic). "
        "tf32: the fp32 value with its mantissa rounded to 10 bits (nearest, ties to even); int8/int4: "
        "rounded and clamped with scale 1. — : nothing to give (no reason where the format holds the value)."
    )
    if summary.table:
        table = rows_frame([i.to_row() for i in summary.table])  # its columns, to show
        table["course note says"] = [NOTE_SAYS.get(i.format, "") for i in summary.table]
        st.subheader("Format table")
        columns = (
            "format bits sign_bits exponent_bits mantissa_bits bytes max smallest_normal smallest_subnormal eps "
            "decimal_digits"
        ).split() + ["course note says", "source", "note"]
        _table(table.loc[:, columns], dict.fromkeys(("max", "smallest_normal", "smallest_subnormal", "eps"), 6))
        st.caption(
            "max / smallest normal / eps from torch.finfo/iinfo; eps and field widths measured from bit "
            "patterns; tf32, int4 and fp4 from their definitions (see *source*). The last column quotes "
            "the course note for comparison: fp16's real range is 6.0e-8 (subnormal) to 65504."
        )
    show_charts(formats.figures(run), "nf.formats")


with tab_inspect:
    text = (
        st.text_input(
            "Value",
            value=st.session_state.get("nf.formats.sent", DEFAULT_VALUE),
            key="nf.value",
            help="Any number: 3.14159265, 65536, 1e-8, -0.1, inf, nan. The table updates by itself.",
        )
        or ""
    )
    try:
        value = float(text)
    except ValueError:
        st.error(f"{text!r} is not a number (examples: 3.14159265, 1e-8, inf).")
    else:
        if st.session_state.get("nf.formats.sent") != text:
            stored = _stored_formats(value, lab.selected_device())
            if stored is not None:
                run_panel.show_stored("nf.formats", stored, scroll=False)
                st.session_state["nf.formats.sent"], st.session_state["nf.formats.reused"] = text, True
            elif run_panel.submit("nf.formats", "formats", {"value": value}, scroll=False):
                st.session_state["nf.formats.sent"], st.session_state["nf.formats.reused"] = text, False
    if st.session_state.get("nf.formats.sent") == text:
        st.caption(
            "Stored run reused: this value was already computed on this device, so nothing ran and nothing new "
            "was stored."
            if st.session_state.get("nf.formats.reused")
            else "Computed for this value on this device and stored (the next visit reuses it)."
        )
    run_panel.results("nf.formats", render_formats, empty="Type a value.")


def render_accumulate(run: RunResult) -> None:
    df = run.frame()
    columns = "method accumulator addend result error addend_stored error_vs_stored_addend stalled_at_step".split()
    _table(df.loc[:, columns], {"result": 7})
    st.caption(
        "error = result − value × steps (exact). addend_stored = what the addend dtype holds for the value; "
        "error_vs_stored_addend isolates the accumulation error. stalled_at_step = first step whose "
        "addition left the sum unchanged (— : it never did). Course note (seeds/004): fp32 10.0001, fp16 9.9531, "
        "fp32 += fp16 10.0021."
    )
    show_charts(accumulate.figures(run), "nf.accumulate")


with tab_acc:
    st.write(
        "`s += x` repeated, for every accumulator × addend dtype, as in the course note; "
        "plus `torch.sum` of the same data, whose kernel accumulates differently from a Python loop."
    )
    c1, c2 = st.columns(2)
    acc_value = c1.number_input("Addend x", value=0.01, format="%.6g", key="nf.acc.value")
    acc_steps = c2.number_input("Steps", min_value=1, max_value=100_000, value=1000, step=100, key="nf.acc.steps")
    run_panel.run_controls("nf.accumulate", "accumulate", lambda: {"value": acc_value, "steps": int(acc_steps)})
    run_panel.results("nf.accumulate", render_accumulate)


def render_autocast(run: RunResult) -> None:
    for r in ModuleDtypes.from_run(run):
        if not r.ok:
            st.warning(f"{r.model} under autocast {r.autocast}: unsupported — {r.reason}")
    show_table(run.frame(), hide_index=True)
    show_charts(autocast.figures(run), "nf.autocast")


with tab_auto:
    st.write(
        "A toy model (Linear → ReLU → LayerNorm → Linear) and one block of the lab's Transformer run forward "
        "and backward under `torch.autocast` (CUDA: fp16 and bf16; CPU: bf16), and once without it. Forward "
        "and backward hooks record the dtypes each module really saw."
    )
    run_panel.run_controls("nf.autocast", "autocast", lambda: {})
    run_panel.results("nf.autocast", render_autocast)


def render_rounding(run: RunResult) -> None:
    df = run.frame()
    show_table(df, hide_index=True)
    show_charts(rounding.figures(run), "nf.rounding")


with tab_round:
    st.write("One n×n matmul of random fp32 inputs in each precision mode, against `A.double() @ B.double()`.")
    size = st.number_input("n", min_value=16, max_value=8192, value=1024, step=256, key="nf.round.size")
    run_panel.run_controls("nf.rounding", "rounding", lambda: {"size": int(size)})
    run_panel.results("nf.rounding", render_rounding)


def render_quantize(run: RunResult) -> None:
    show_table(run.frame(), hide_index=True)
    if trip := QuantizeSummary.from_meta(run.meta).round_trip:
        show_table(pd.DataFrame([dataclasses.asdict(v) for v in trip]), hide_index=True)
        st.caption(
            "The course note maps 0.1, 0.5, 0.9, 1.2 to 13, 64, 115, 153 and back exactly; a per-tensor "
            "scale gives the codes above, and the round trip is approximate."
        )
    show_charts(quantize.figures(run), "nf.quantize")


def _custom_values(text: str) -> list[float]:
    values = [float(v) for v in text.replace(" ", "").split(",") if v]
    if not all(math.isfinite(v) for v in values):
        raise ValueError("values must be finite")
    return values


with tab_quant:
    st.write(
        "Per-tensor int8 and int4 quantize → dequantize, symmetric and asymmetric. One scale per tensor: "
        "a few outliers stretch it and the bulk of the values lands on a handful of levels."
    )
    c1, c2, c3 = st.columns(3)
    dist = c1.selectbox("Tensor", ("normal", "uniform", "outliers", "custom"), index=2, key="nf.q.dist")
    q_size = c2.number_input("Elements", min_value=16, max_value=10_000_000, value=100_000, key="nf.q.size")
    q_scale = c3.number_input("Outlier magnitude (σ)", min_value=1.0, max_value=1e6, value=50.0, key="nf.q.scale")
    custom = st.text_input(
        "Custom values (comma-separated)", value="0.1, 0.5, 0.9, 1.2", key="nf.q.values", disabled=dist != "custom"
    )

    def quant_values() -> dict:
        values = {"distribution": dist, "size": int(q_size), "outlier_scale": float(q_scale)}
        if dist == "custom":
            try:
                values["values"] = _custom_values(custom)
            except ValueError:
                raise ConfigError(f"custom values must be finite numbers separated by commas, got {custom!r}") from None
        return values

    run_panel.run_controls("nf.quantize", "quantize", quant_values)
    run_panel.results("nf.quantize", render_quantize)

"""Home: what this box is, the doctor (does everything work here?), its health (is it as fast as it should
be?), what the lab can measure, the latest runs."""

import json
import threading

import pandas as pd
import streamlit as st

from core import doctor
from core.hardware import published
from core.hardware.specs import datasheet_peaks
from core.jsonable import json_ready
from core.result import DeviceInfo, RunResult
from core.rows.notes import RunNotes
from core.store import RunStore, StoreError
from core.units import bytes_text, duration_text, timestamp_text
from pages.common import catalog, lab, run_panel
from pages.common import health as health_panel
from pages.common.facts import fact
from pages.common.methods import how_measured
from pages.common.tables import show_table

VERDICT_ICONS = {"pass": "✅ pass", "fail": "❌ fail", "unsupported": "➖ unsupported"}


@st.cache_resource(show_spinner=False)
def _doctor_state() -> dict:
    """Server-wide: one doctor at a time (it needs the device), visible from every tab."""
    return {"thread": None, "device": None, "progress": (0, 0, ""), "report": None, "error": None}


def _doctor_thread(state: dict, device: str) -> None:
    """Runs in a thread of the server: the doctor's orchestration imports no torch, every measurement
    happens in a worker through the shared job manager (so its jobs queue with everyone else's)."""
    try:
        report = doctor.run_doctor(device, lab.manager(), on_progress=lambda d, t, m: state.update(progress=(d, t, m)))
        store = lab.store()
        if store is not None:
            store.save(doctor.report_run(report))
        state["report"] = report
    except Exception as exc:  # noqa: BLE001 - shown on the page, never raised into the server
        state["error"] = f"{type(exc).__name__}: {exc}"


def _doctor_running(state: dict) -> bool:
    return state["thread"] is not None and state["thread"].is_alive()


@st.fragment(run_every=1.0)
def _doctor_progress() -> None:
    state = _doctor_state()
    if not _doctor_running(state):
        st.rerun(scope="app")
        return
    done, total, message = state["progress"]
    st.progress(
        done / total if total else 0.0,
        text=f"doctor on {state['device']}: {done}/{total} · {message}"
        if total
        else f"doctor on {state['device']}: starting",
    )


def _report_of(store: RunStore, run: RunResult) -> doctor.Report:
    """A stored doctor run as its report, with the runs it made that are still stored."""
    runs = []
    for run_id in RunNotes.from_run(run).run_ids:
        try:
            runs.append(store.get(run_id))
        except (KeyError, StoreError):
            pass
    return doctor.Report.from_run(run, runs)


def doctor_section() -> None:
    st.header("Doctor: does everything work here?")
    st.write(
        "Runs every experiment at its smallest setting on the selected device (in worker processes, stored "
        "like any run), then checks the numbers against independent references measured in the same run: "
        "the matmul timer against `torch.utils.benchmark` / `triton.testing.do_bench`, the allocator's peak "
        "against its own history, the planner against a measured step, and the facts the lab's notes state "
        "(65,536 overflows fp16, π in bf16 is 3.140625, …). "
        "Also `python -m core doctor`."
    )
    state = _doctor_state()
    device = lab.selected_device()
    running = _doctor_running(state)
    if st.button(f"Run the doctor on {device}", key="home.doctor", icon=":material/stethoscope:", disabled=running):
        state.update(device=device, progress=(0, 0, "starting"), report=None, error=None)
        state["thread"] = threading.Thread(
            target=_doctor_thread, args=(state, device), daemon=True, name="gpulab-doctor"
        )
        state["thread"].start()
        running = True
    if running:
        _doctor_progress()
        return
    if state["error"]:
        st.error(f"The doctor could not run: {state['error']}")
    if state["report"] is not None:
        _show_report(state["report"])
        return
    store = lab.store()
    newest = store.summaries(experiment="doctor", limit=1) if store is not None else []
    run = run_panel.opened(newest[0].id) if store is not None and newest else None  # the list reads summaries
    if store is None or run is None:
        st.info(
            "The doctor has not run on this box yet." if not newest else "The doctor's last report cannot be shown."
        )
        return
    run_panel.guarded(run, lambda: _show_report(_report_of(store, run)))


def _show_report(report: doctor.Report) -> None:
    summary = report.bundle()["summary"]
    text = (
        f"{len(report.checks)} checks on {report.device_label()}: {summary['pass']} pass, {summary['fail']} fail, "
        f"{summary['unsupported']} unsupported — {duration_text(report.wall_s)}, {timestamp_text(report.started_at)} UTC"
    )
    (st.error if report.failed else st.success)(text)
    show_table(
        pd.DataFrame(
            [
                {
                    "check": c.check,
                    "result": c.result,
                    "expected": c.expected,
                    "verdict": VERDICT_ICONS[c.verdict],
                    "reason": c.reason,
                }
                for c in report.checks
            ]
        ),
        hide_index=True,
    )
    st.download_button(
        "Doctor's bundle (JSON, for a bug report)",
        json.dumps(json_ready(report.bundle()), indent=1, allow_nan=False),
        "gpulab-doctor.json",
        "application/json",
        key="home.doctor.bundle",
        on_click="ignore",
    )


st.title("GPU Lab")
st.write(
    "Live experiments on the device next to you: what number formats store, what the matmul units "
    "really deliver, and where PyTorch's memory goes. Every number on these pages is measured here, "
    "in a separate worker process, and stored so you can compare and export it."
)

info = lab.devices()
if st.button("Refresh device info", icon=":material/refresh:"):
    info = lab.devices(refresh=True)

if info.get("error"):
    st.error(f"The worker could not describe this box: {info['error']}")
elif not info.get("cuda_available"):
    st.warning(
        f"**No CUDA GPU here** — {info.get('cuda_unavailable_reason')}. Every page still runs on the "
        "CPU and labels its results *CPU*: number formats and accumulation, CPU matmul GFLOPS, the "
        "CPU side of the allocator story, training memory and step timing for the tiny/mini models, "
        "and the memory planner for any model size. GPU-only parts (tensor cores, TF32, the CUDA "
        "caching allocator) say so on their page."
    )

selected = lab.device_info(lab.selected_device())
for device in info.get("devices", []):
    facts = DeviceInfo.of(device)
    is_selected = selected is not None and facts.torch_device == selected.torch_device
    with st.container(border=True):
        st.subheader(str(facts.label) + ("  (selected)" if is_selected else ""))
        mem, free = facts.total_memory_bytes, facts.free_memory_bytes
        cols = st.columns(4)
        fact(cols[0], "Memory", bytes_text(mem) if mem else "unknown", f"{bytes_text(free)} free" if free else None)
        if facts.is_cuda:
            cols[1].metric("Compute capability", facts.compute_capability)
            cols[2].metric("SMs", facts.multiprocessors)
            cols[3].metric("bf16", "supported" if facts.bf16_supported else "not supported")
            spec = facts.spec
            if spec:
                peaks = pd.DataFrame(
                    [{"unit": k, "dense peak (TFLOPS, TOPS for int8)": v} for k, v in datasheet_peaks(device).items()]
                )
                st.write(f"Datasheet: **{spec['name']}**, {spec['bandwidth_gbs']:.0f} GB/s — {spec['source']}")
                show_table(peaks, hide_index=True)
                if spec.get("notes"):
                    st.caption(spec["notes"])
            else:
                st.info("No datasheet entry for this GPU: pages show measured numbers without a percent-of-peak.")
            best = published.for_device(device)
            if best:
                st.caption(
                    "Published best achievable (the best of a shape search, measured elsewhere, not on this box): "
                    + "; ".join(
                        f"{p.dtype} {p.tflops:g} TFLOPS ({100 * p.efficiency:.1f}% of {p.theory_tflops:g}) at "
                        f"{p.best_shape}, {published.provenance(p, device)}"
                        for p in best
                    )
                    + f" — {published.SOURCE}."
                )
        else:
            cols[1].metric("Cores", facts.cores)
            cols[2].metric("torch threads", facts.torch_threads)
            cols[3].metric("bf16", "CPU kernels")
        flags = facts.tf32 or {}
        st.caption(
            f"TF32: `torch.backends.cuda.matmul.allow_tf32={flags['cuda_matmul_allow_tf32']}`, "
            f"`torch.backends.cudnn.allow_tf32={flags['cudnn_allow_tf32']}`, "
            f"`float32_matmul_precision='{flags['float32_matmul_precision']}'`"
            + (f", `NVIDIA_TF32_OVERRIDE={flags['NVIDIA_TF32_OVERRIDE']}`" if flags["NVIDIA_TF32_OVERRIDE"] else "")
        )

versions = info.get("versions", {})
if versions:
    st.caption(" · ".join(f"{k} {v}" for k, v in versions.items() if v and k != "platform"))

how_measured("home")
doctor_section()
health_panel.section()

st.header("Experiments")
for path, page_title, icon in catalog.available()[1:]:
    st.page_link(path, label=page_title, icon=icon)

st.header("Latest runs")
store = lab.store()
if store is None:
    st.error(f"The run store is unavailable: {lab.store_problem()}")
else:
    latest = store.frame(limit=10)
    if latest.empty:
        st.info(
            "No runs yet. Pick an experiment above; every run is saved here (also runs from "
            "`python -m core …` on this box)."
        )
    else:
        show_table(
            latest.loc[:, ["started_at", "experiment", "device", "status", "name", "duration_s"]], hide_index=True
        )

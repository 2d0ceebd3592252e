"""Home: what this box is, what the lab can measure on it, and the latest runs."""
import pandas as pd
import streamlit as st

from pages.common import catalog, lab

st.title("GPU Lab")
st.write("Live experiments on the device next to you: what number formats store, what the matmul units "
         "really deliver, and where PyTorch's memory goes. Every number on these pages is measured here, "
         "in a separate worker process, and stored so you can compare and export it.")

info = lab.devices()
if st.button("Refresh device info", icon=":material/refresh:"):
    info = lab.devices(refresh=True)

if info.get("error"):
    st.error(f"The worker could not describe this box: {info['error']}")
elif not info.get("cuda_available"):
    st.warning(f"**No CUDA GPU here** — {info.get('cuda_unavailable_reason')}. Every page still runs on the "
               "CPU and labels its results *CPU*: number formats and accumulation, CPU matmul GFLOPS, the "
               "CPU side of the allocator story, training memory and step timing for the tiny/mini models, "
               "and the memory planner for any model size. GPU-only parts (tensor cores, TF32, the CUDA "
               "caching allocator) say so on their page.")

selected = lab.device_info(lab.selected_device())
for device in info.get("devices", []):
    is_selected = selected is not None and device["torch_device"] == selected["torch_device"]
    with st.container(border=True):
        st.subheader(device["label"] + ("  (selected)" if is_selected else ""))
        mem, free = device.get("total_memory_bytes"), device.get("free_memory_bytes")
        cols = st.columns(4)
        cols[0].metric("Memory", f"{mem / 2**30:.1f} GiB" if mem else "unknown",
                       f"{free / 2**30:.1f} GiB free" if free else None, delta_color="off")
        if device["kind"] == "cuda":
            cols[1].metric("Compute capability", device["compute_capability"])
            cols[2].metric("SMs", device["multiprocessors"])
            cols[3].metric("bf16", "supported" if device["bf16_supported"] else "not supported")
            spec = device.get("spec")
            if spec:
                peaks = pd.DataFrame([{"unit": k, "dense peak (TFLOPS, TOPS for int8)": v}
                                      for k, v in spec["tflops"].items()])
                st.write(f"Datasheet: **{spec['name']}**, {spec['bandwidth_gbs']:.0f} GB/s — {spec['source']}")
                st.dataframe(peaks, hide_index=True)
                if spec.get("notes"):
                    st.caption(spec["notes"])
            else:
                st.info("No datasheet entry for this GPU: pages show measured numbers without a percent-of-peak.")
        else:
            cols[1].metric("Cores", device.get("cores"))
            cols[2].metric("torch threads", device.get("torch_threads"))
            cols[3].metric("bf16", "CPU kernels")
        flags = device["tf32"]
        st.caption(f"TF32: `torch.backends.cuda.matmul.allow_tf32={flags['cuda_matmul_allow_tf32']}`, "
                   f"`torch.backends.cudnn.allow_tf32={flags['cudnn_allow_tf32']}`, "
                   f"`float32_matmul_precision='{flags['float32_matmul_precision']}'`"
                   + (f", `NVIDIA_TF32_OVERRIDE={flags['NVIDIA_TF32_OVERRIDE']}`" if flags["NVIDIA_TF32_OVERRIDE"]
                      else ""))

versions = info.get("versions", {})
if versions:
    st.caption(" · ".join(f"{k} {v}" for k, v in versions.items() if v and k != "platform"))

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
        st.info("No runs yet. Pick an experiment above; every run is saved here (also runs from "
                "`python -m core …` on this box).")
    else:
        st.dataframe(latest[["started_at", "experiment", "device", "status", "name", "duration_s"]], hide_index=True)

"""The dashboard's handles on the engine, shared by every page and every browser tab.

One :class:`~core.jobs.JobManager` per server (``st.cache_resource``: thread-safe, shared by all
sessions), so jobs from two tabs queue on the same device. The server never touches CUDA: the
device list comes from a worker (:func:`core.workerprocess.query_devices`).
"""

from __future__ import annotations

import streamlit as st

from core import import_dirs
from core.experiment import ALL, SLOW_FRACTION
from core.hardware import dtypes
from core.jobs import JobManager
from core.paths import examples_dir
from core.result import DeviceInfo
from core.store import RunStore, StoreError
from core.transformer.presets import DEFAULT_BATCH, PRESET_NAMES
from core.workerprocess import query_devices

# Non-widget session keys that hold the sidebar's shared selections (they survive page switches).
DEVICE_KEY, MODEL_KEY, DTYPE_KEY = "lab.device", "lab.model", "lab.dtype"


@st.cache_resource(show_spinner=False)
def store() -> RunStore | None:
    """The run store, or None (with the reason in :func:`store_problem`) when it cannot be opened. One that cannot
    be written (a full disk, a read-only folder) is opened read-only, as the CLI's reading commands do: every stored
    run is still listed and shown, and the sidebar says runs are not being saved."""
    try:
        return RunStore()
    except StoreError as exc:
        _problems["store"] = str(exc)
    try:
        return RunStore(read_only=True)
    except StoreError:
        return None


_problems: dict[str, str] = {}


def store_problem() -> str | None:
    store()
    return _problems.get("store")


@st.cache_resource(show_spinner=False)
def manager() -> JobManager:
    """The server's job manager; its import workers open files only under the import directories, the uploads
    folder and the examples, as resolved now, once (core/import_dirs.py)."""
    from pages.common.uploads import folder

    runs = store()
    writable = runs if runs is not None and not runs.read_only else None
    return JobManager(store=writable, import_env=import_dirs.confinement(folder(), examples_dir()))


@st.cache_resource(show_spinner="Asking a worker which devices this box has…")
def _devices() -> dict:
    try:
        return query_devices()
    except Exception as exc:  # noqa: BLE001 - a broken torch install must not take the page down
        return {
            "devices": [],
            "default": "cpu",
            "cuda_available": False,
            "error": str(exc),
            "cuda_unavailable_reason": str(exc),
            "versions": {},
        }


def devices(refresh: bool = False) -> dict:
    if refresh:
        _devices.clear()
    return _devices()


def device_options() -> dict[str, str]:
    """torch device string → label, for the sidebar."""
    listed = box_devices()
    options = {str(d.torch_device): d.shown for d in listed if d.is_cuda}
    options["cpu"] = next((d.shown for d in listed if d.is_cpu), "CPU")
    return options


def box_devices() -> list[DeviceInfo]:
    """The box's devices as the worker describes them, as fields."""
    return [DeviceInfo.of(d) for d in devices()["devices"]]


def device_info(torch_device: str) -> DeviceInfo | None:
    """The box's device of that torch name, as fields; None where the box has no such device."""
    return next((d for d in box_devices() if d.torch_device == torch_device), None)


def selected_device() -> str:
    return st.session_state.get(DEVICE_KEY) or devices().get("default", "cpu")


def device_choice(key: str) -> str:
    """The sidebar's device, or "all" when the page's "every GPU at once" toggle is on.

    The toggle is drawn only on a box with two or more GPUs (a CPU box has one device: no choice to fake).
    """
    gpus = [d for d in box_devices() if d.is_cuda]
    if len(gpus) < 2:
        return selected_device()
    on = st.toggle(
        f"All {len(gpus)} GPUs at once",
        key=f"{key}.all_gpus",
        help="One worker per GPU, all started together: per-GPU results side by side, the node median, "
        f"and any GPU more than {SLOW_FRACTION:.0%} below it flagged with its clocks, temperature "
        "and throttle reasons. Stored as one run.",
    )
    return ALL if on else selected_device()


def selected_model() -> str:
    return st.session_state.get(MODEL_KEY) or "tiny"


def selected_dtype() -> str:
    return st.session_state.get(DTYPE_KEY) or "fp32"


def sidebar() -> None:
    """The selections every page shares: device, model size, dtype.

    Drawn by app.py on every page, so these keyed widgets never leave the screen and keep their
    values across page switches (a keyed widget on a page would lose its value).
    """
    options = device_options()
    if st.session_state.get(DEVICE_KEY) not in options:
        st.session_state[DEVICE_KEY] = (
            devices().get("default", "cpu") if devices().get("default") in options else next(iter(options))
        )
    st.session_state.setdefault(MODEL_KEY, "tiny")
    st.session_state.setdefault(DTYPE_KEY, "fp32")
    with st.sidebar:
        st.selectbox(
            "Device",
            list(options),
            key=DEVICE_KEY,
            format_func=options.__getitem__,
            help="Experiments run in a worker process on this device.",
        )
        st.selectbox(
            "Model size",
            PRESET_NAMES,
            key=MODEL_KEY,
            help=f"Sizes of the lab's own Transformer, a small decoder-only language model (tiny and mini run in "
            "seconds on CPU; *How measured* on Step benchmark describes it); "
            f"batch {DEFAULT_BATCH} by default.",
        )
        st.selectbox(
            "Dtype",
            dtypes.NAMES,
            key=DTYPE_KEY,
            help="The number format the pages start from: "
            + "; ".join(f"{d.name} ({d.label}: {d.what})" for d in dtypes.MATMUL)
            + ".",
        )
        active = manager().active()
        if active:
            st.caption(f"{len(active)} job(s) running or queued")

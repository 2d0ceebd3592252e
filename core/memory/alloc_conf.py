"""``PYTORCH_CUDA_ALLOC_CONF``: the settings the lab offers, checked before a worker starts, and what the
allocator really runs with (its own report against the request: a setting can be silently ignored)."""

from __future__ import annotations

import os

from core.errors import ConfigError
from core.units import MIB

ENV_KEYS = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")  # torch ≥ 2.9 reads the second first

ALLOC_CONF_KEYS = (
    "backend",
    "expandable_segments",
    "garbage_collection_threshold",
    "max_split_size_mb",
    "roundup_power2_divisions",
    "release_lock_on_cudamalloc",
    "pinned_use_cuda_host_register",
    "pinned_num_register_threads",
    "pinned_use_background_threads",
)
ASYNC_BACKEND = "cudaMallocAsync"


def parse_alloc_conf(text: str) -> dict[str, str]:
    """Check a ``PYTORCH_CUDA_ALLOC_CONF`` value (``key:value,…``) so a typo fails here, not in the child."""
    settings: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition(":")
        key, value = key.strip(), value.strip()
        if not sep or not value:
            raise ConfigError(f"alloc_conf: {part!r} is not key:value")
        if key not in ALLOC_CONF_KEYS:
            raise ConfigError(f"alloc_conf: unknown key {key!r}; known: {', '.join(ALLOC_CONF_KEYS)}")
        if key == "backend" and value not in ("native", ASYNC_BACKEND):
            raise ConfigError(f"alloc_conf: backend must be native or {ASYNC_BACKEND}, got {value!r}")
        if key == "expandable_segments" and value not in ("True", "False"):
            raise ConfigError(f"alloc_conf: expandable_segments must be True or False, got {value!r}")
        if key == "garbage_collection_threshold":
            try:
                ok = 0.0 < float(value) < 1.0
            except ValueError:
                ok = False
            if not ok:
                raise ConfigError(
                    f"alloc_conf: garbage_collection_threshold must be between 0 and 1 (exclusive), got {value!r}"
                )
        if key == "max_split_size_mb" and (not value.isdigit() or int(value) <= 20):
            raise ConfigError(
                f"alloc_conf: max_split_size_mb must be a whole number above 20 (PyTorch's minimum), got {value!r}"
            )
        settings[key] = value
    return settings


# How a PYTORCH_CUDA_ALLOC_CONF key appears in the snapshot's "allocator_settings" (torch's
# memory_snapshot: PYTORCH_CUDA_ALLOC_CONF, max_split_size in bytes, garbage_collection_threshold,
# expandable_segments, pinned_num_register_threads, release_lock_on_cudamalloc,
# pinned_use_cuda_host_register, roundup_power2_divisions).
_REPORTED_AS = {
    "expandable_segments": ("expandable_segments", "bool"),
    "max_split_size_mb": ("max_split_size", "mib"),
    "garbage_collection_threshold": ("garbage_collection_threshold", "float"),
    "release_lock_on_cudamalloc": ("release_lock_on_cudamalloc", "bool"),
    "pinned_use_cuda_host_register": ("pinned_use_cuda_host_register", "bool"),
    "pinned_num_register_threads": ("pinned_num_register_threads", "int"),
}


def settings_not_applied(requested: dict[str, str], backend: str | None, reported: dict | None) -> list[str]:
    """Each requested allocator setting the allocator itself does not report, in words.

    ``PYTORCH_ALLOC_CONF``/``PYTORCH_CUDA_ALLOC_CONF`` can be silently ignored (read too late, a typo, a
    wrapper that overrides it): the allocator's own report (``get_allocator_backend()`` and the
    snapshot's ``allocator_settings``) is what the run really used.
    """
    out = []
    if backend is not None and requested.get("backend", "native") != backend:
        out.append(f"backend: asked {requested.get('backend', 'native')}, the allocator runs {backend}")
    for key, value in requested.items():
        if key not in _REPORTED_AS or reported is None:
            continue
        name, kind = _REPORTED_AS[key]
        got = reported.get(name)
        want = {"bool": lambda v: v == "True", "int": int, "float": float, "mib": lambda v: int(v) * MIB}[kind](value)
        if got is None or (abs(float(got) - want) > 1e-9 if kind == "float" else got != want):
            out.append(f"{key}: asked {value}, the allocator reports {name}={got}")
    return out


def seen_setting() -> dict[str, str | None]:
    """The allocator setting this process really has in its environment."""
    return {key: os.environ.get(key) for key in ENV_KEYS}

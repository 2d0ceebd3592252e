"""Which box a run ran on: its host name and the GPUs' UUIDs (else the device's description).

The history of a figure (:mod:`core.health.history`) compares a run only with earlier runs of the same box,
so a slower node is never mistaken for a regression of this one. A run stored before runs carried a host has
no identity and is compared with nothing.
"""

from __future__ import annotations


def _device_id(device: dict) -> str:
    """One device: its UUID where the driver reports it, else what describes it (name and index)."""
    if device.get("uuid"):
        return str(device["uuid"])
    index = device.get("index")
    return f"{device.get('name', '?')}" + (f" (cuda:{index})" if index is not None else "")


def box_identity(device: dict) -> dict | None:
    """``{"host": …, "devices": [...]}`` for a run's device description (an all-GPU run: every GPU), or None."""
    host = device.get("host")
    if not host:
        return None
    parts = device.get("devices") or [device]
    return {"host": str(host), "devices": [_device_id(d) for d in parts]}


def box_key(device: dict) -> str | None:
    """A string equal for two runs on the same box and devices (None: unknown box)."""
    identity = box_identity(device)
    return None if identity is None else identity["host"] + "|" + ",".join(identity["devices"])


def box_label(device: dict) -> str:
    identity = box_identity(device)
    if identity is None:
        return "unknown box (run stored without a host name)"
    return f"{identity['host']}: {', '.join(identity['devices'])}"


def made_here(device: dict) -> bool:
    """Whether a run's device description is this box's (its host name): a run imported from another box, or one
    stored before runs carried a host, is not this box's."""
    from core.hardware.device import host_name

    return device.get("host") == host_name()

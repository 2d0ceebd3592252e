"""Reading a stored dict into a typed class: the keys the class names, each as stored, and the fields read another
way in their place. Runs stored by an earlier version lack keys: those take the class's defaults."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any, TypeVar

T = TypeVar("T")


def known(cls: type, stored: Mapping[str, Any], **read: Any) -> dict[str, Any]:
    """The stored keys ``cls`` names, with the fields read otherwise (``read``) in their place."""
    out: dict[str, Any] = {f.name: stored[f.name] for f in fields(cls) if f.name in stored}
    return out | read


def split(cls: type, stored: Mapping[str, Any], skip: frozenset[str] = frozenset()) -> tuple[dict, dict]:
    """A stored dict as the keys ``cls`` names (but ``extra`` and ``skip``) and the rest, kept in ``extra`` so that
    writing the row back loses nothing a later version added."""
    named = {f.name for f in fields(cls)} - {"extra"} - skip
    return {k: v for k, v in stored.items() if k in named}, {k: v for k, v in stored.items() if k not in named}


def read(cls: type[T], stored: Mapping[str, Any]) -> T:
    """``cls`` from a stored dict: the keys it names, each as stored; those an earlier version lacked, defaults."""
    return cls(**known(cls, stored))

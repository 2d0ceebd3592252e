"""The rows of a run that lists several kinds in one stored list, told apart by their ``kind``, read here: the
CLI's tables per kind (``Experiment.text_kinds``) and the history's headline (``Headline.kinds``) ask by the
kinds' names, for any experiment, and never read the key themselves. An experiment's own views read its named
tables (one class per kind) beside it in this package."""

from __future__ import annotations

from collections.abc import Collection

KIND = "kind"  # the key each such row stores its kind under


def of_kinds(rows: list[dict], kinds: Collection[str]) -> list[dict]:
    """The rows of any of ``kinds``, in their stored order."""
    return [r for r in rows if r.get(KIND) in kinds]


def other_kinds(rows: list[dict], kinds: Collection[str]) -> list[dict]:
    """The rows of none of ``kinds`` (a row without a kind among them), in their stored order."""
    return [r for r in rows if r.get(KIND) not in kinds]

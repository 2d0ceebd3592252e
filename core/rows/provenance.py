"""Where an imported file's run came from, as every view of an import names it: the file, that it was recorded
elsewhere (on which GPU, where the file says), and the shipped example it is, with its source. The import stores
these keys in the run's meta; :meth:`Provenance.from_meta` reads them for the views. Torch-free."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from core.result import RunResult


@dataclass(frozen=True)
class ExampleSource:
    """A file shipped in examples/: what it is and where it comes from (``label`` says both in a few words)."""

    name: str = ""
    title: str = ""
    label: str = ""
    source_path: str = ""
    commit: str = ""
    licence: str = ""
    repository: str = ""
    gpu: str = ""  # as the file names it, or what is known where it names none
    notes: str = ""
    ranks: tuple[str, ...] = ()  # a set of rank traces: its files, in rank order


@dataclass(frozen=True)
class Provenance:
    imported: bool = False  # the run is an imported file's, recorded on another machine (not a measurement here)
    file: str | None = None
    device_name: str | None = None  # the GPU as the file names it
    example: ExampleSource | None = None

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any]) -> Provenance:
        example = meta.get("example")
        shipped = None
        if isinstance(example, Mapping):
            said = {k: example[k] for k in ExampleSource.__dataclass_fields__ if isinstance(example.get(k), str)}
            ranks = example.get("ranks")
            shipped = ExampleSource(**said, ranks=tuple(map(str, ranks)) if isinstance(ranks, list) else ())
        file = meta.get("file")
        return cls(
            bool(meta.get("recorded_on")), file if isinstance(file, str) else None, meta.get("device_name"), shipped
        )

    @classmethod
    def from_run(cls, run: RunResult) -> Provenance:
        return cls.from_meta(run.meta)

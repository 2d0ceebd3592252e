"""Flight-recorder dumps shipped in ``examples/flight_recorder/``: small hung jobs anyone can open.

No public repository ships real dumps of a hang, so these were recorded by this lab: real gloo jobs on CPU
(torch 2.13), each rank dumping its recorder with ``torch._C._distributed_c10d._dump_fr_trace()`` while the
job was stuck (``tests/data/flight_recorder/generate.py``; ``examples/README.md``). A run imported from one
keeps that provenance in ``meta["example"]`` and every view labels it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from core.errors import ConfigError
from core.paths import examples_dir

SOURCE = "tests/data/flight_recorder/generate.py"


@dataclass(frozen=True)
class DumpSet:
    name: str  # what `hang --example` takes
    folder: str  # under examples/
    title: str


SETS = (
    DumpSet("hang-skipped-rank", "flight_recorder/skipped_rank", "4 ranks, rank 3 never enters the 4th all_reduce"),
    DumpSet(
        "hang-desync-op", "flight_recorder/desync_op", "3 ranks, rank 1 calls broadcast where the others all_reduce"
    ),
)


def find(name: str) -> DumpSet:
    for s in SETS:
        if s.name == name:
            return s
    raise ConfigError(f"example: no dump set is called {name!r}; the dump sets are {', '.join(s.name for s in SETS)}")


def folder(s: DumpSet) -> Path:
    return examples_dir() / s.folder


def paths(name: str, given: tuple[str, ...]) -> tuple[str, ...]:
    """The example's dump files (a ConfigError when it is missing, or files are named too)."""
    s = find(name)
    if any(given):
        raise ConfigError(f"example: name files or an example, not both ({name})")
    where = folder(s)
    if not where.is_dir():
        raise ConfigError(f"example {name}: {where} is not on this machine (examples/ ships with the repository)")
    return tuple(str(p) for p in sorted(where.iterdir()) if p.is_file() and not p.name.startswith("."))


def provenance(name: str) -> dict:
    """What a run imported from the set keeps in ``meta["example"]``."""
    s = find(name)
    return {
        "name": s.name,
        "title": s.title,
        "label": f"recorded by this lab: a gloo job on CPU ({SOURCE})",
        "source_path": s.folder,
    }

"""Flight-recorder dumps torch's own analyser (``python -m torch.distributed.flight_recorder.fr_trace``) can read.

Gloo's dumps list no group members (their ``pg_config`` holds one unnamed entry), on which fr_trace stops with a
KeyError; NCCL's list each group a rank belongs to. The copy gives each rank the groups it is in, with their
members as the job built them, and keeps the rest as recorded (read by the lab's plain-data reader, written
with the protocol torch's recorder writes)."""

from __future__ import annotations

import pickle
import re
from pathlib import Path

from core.intake import loads_pickle


def with_members(folder: Path, out: Path, groups: dict[str, tuple[str, list[int]]]) -> Path:
    """Copies of ``folder``'s dumps in ``out``, ``groups`` (name → (desc, member ranks)) as their pg_config."""
    out.mkdir(parents=True, exist_ok=True)
    for f in folder.iterdir():
        rank = int(re.sub(r"\D", " ", f.name).split()[-1])
        dump = loads_pickle(f.read_bytes())
        dump["pg_config"] = {g: {"name": g, "desc": d, "ranks": str(r)} for g, (d, r) in groups.items() if rank in r}
        (out / f.name).write_bytes(pickle.dumps(dump, protocol=2))
    return out

"""Which collective stopped the job, and which rank: every rank's flight-recorder buffer matched by sequence id.

Per process group (named as the dumps name it, the same on every rank), a rank's collectives carry
``collective_seq_id`` 1, 2, 3, … in the order the rank entered them; point-to-point ops carry ``p2p_seq_id``
and are matched per pair of ranks, the n-th send from A to B against the n-th recv on B from A. For each
collective number recorded by any rank, each member rank is in one state:

- **completed**: at or below the group's ``last_completed_collective`` (gloo and NCCL both keep it in
  ``pg_status``), or its entry says ``completed`` (NCCL's watchdog saw it end);
- **waiting**: entered (its entry is in the buffer) and not completed at the dump;
- **entered**: its entry is in the buffer but nothing records completion (no ``pg_status``, no entry
  marked completed): whether it was still inside is not known;
- **missing**: never entered it: the number is past the rank's last entered collective
  (``last_enqueued_collective``, or its newest entry);
- **mismatched**: entered a collective of that number that differs from the one most ranks entered: another
  op, other input sizes (for ops whose sizes must agree), or other dtypes (a desync); on a tie the lowest
  rank's is the reference and the diagnosis says there is no majority;
- **unknown**: older than the rank's buffer holds (the ring buffer wrapped) with no status to say, or the rank's
  dump says nothing of the group at all.

The first number of a group where a rank is missing or mismatched is where the group's ranks disagree. The
collective that stopped the job is the disagreement whose entries were created first (a later one waits on
it); with none, every rank of a group waiting in the same collective is a hang inside the collective itself.
Sizes are the elements of the first input times its dtype's width (the tensor's bytes).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

from core.workload.flight_recorder import Dump, Entry

# Ops whose input sizes must agree across ranks (gather, scatter, all_to_all and the *_v ops may differ).
SIZES_AGREE = {
    "all_reduce", "allreduce", "allreduce_coalesced", "broadcast", "_broadcast_oop", "reduce", "_reduce_oop",
    "all_gather", "allgather", "_all_gather_base", "all_gather_into_tensor", "all_gather_into_tensor_coalesced",
    "reduce_scatter", "_reduce_scatter_base", "reduce_scatter_tensor", "reduce_scatter_tensor_coalesced",
    "barrier", "all_reduce_barrier",
}  # fmt: skip
# c10::toString of a scalar type → bytes per element
DTYPE_BYTES = {
    "Float": 4, "Double": 8, "Half": 2, "BFloat16": 2, "Int": 4, "Long": 8, "Short": 2, "Char": 1, "Byte": 1,
    "Bool": 1, "ComplexFloat": 8, "ComplexDouble": 16, "Float8_e4m3fn": 1, "Float8_e5m2": 1,
    "Float8_e4m3fnuz": 1, "Float8_e5m2fnuz": 1, "UInt16": 2, "UInt32": 4, "UInt64": 8,
}  # fmt: skip
GRID_SEQS = 24  # collectives a group's grid shows, ending just past the stuck one


@dataclass
class RankInGroup:
    """One rank's view of one group: its collectives by number and what its status says."""

    rank: int
    collectives: dict[int, Entry]  # the first entry of each number (a coalesced group shares one)
    p2p: list[Entry]  # its sends and recvs in record order
    known: bool  # its buffer or its status says anything of the group
    last_entered: int  # 0: none
    last_completed: int | None  # None: nothing says
    first_seq: int | None  # the oldest number still in the buffer

    @property
    def wrapped(self) -> bool:
        """Numbers start at 1: a buffer whose oldest is later lost the ones before it."""
        return self.first_seq is not None and self.first_seq > 1

    def state(self, seq: int) -> str:
        if not self.known:
            return "unknown"
        entry = self.collectives.get(seq)
        if entry is not None:
            done = entry.state == "completed" or (self.last_completed is not None and seq <= self.last_completed)
            if done:
                return "completed"
            return "entered" if self.last_completed is None else "waiting"
        if seq > self.last_entered:
            return "missing"
        if self.last_completed is not None and seq <= self.last_completed:
            return "completed"
        return "unknown"


def _rank_in(dump: Dump, group: str) -> RankInGroup:
    mine = [e for e in dump.entries if e.group == group]
    collectives: dict[int, Entry] = {}
    for e in mine:
        if not e.p2p:
            collectives.setdefault(e.seq, e)
    status = dump.status.get(group, {})
    recorded = max(collectives, default=0)
    completed = status.get("last_completed_collective")
    newest_done = max((s for s, e in collectives.items() if e.state == "completed"), default=None)
    if completed is None or completed < 0:
        completed = newest_done
    return RankInGroup(
        rank=dump.rank,
        collectives=collectives,
        p2p=[e for e in mine if e.p2p],
        known=bool(mine) or bool(status),
        last_entered=max(recorded, status.get("last_enqueued_collective", 0)),
        last_completed=completed,
        first_seq=min(collectives, default=None),
    )


def nbytes(entry: Entry) -> int | None:
    """The first input's bytes: its elements times its dtype's width (None when the dump names no dtype)."""
    if not entry.input_sizes or not entry.input_dtypes or entry.input_dtypes[0] not in DTYPE_BYTES:
        return None
    return math.prod(entry.input_sizes[0]) * DTYPE_BYTES[entry.input_dtypes[0]]


def _signature(e: Entry) -> tuple:
    return (e.op, e.input_sizes if e.op in SIZES_AGREE else None, e.input_dtypes)


def _differs(e: Entry, ref: Entry) -> str:
    """What ``e`` has other than ``ref``: the op first, then sizes, then dtypes."""
    if e.op != ref.op:
        return "op"
    if e.op in SIZES_AGREE and e.input_sizes != ref.input_sizes:
        return "sizes"
    return "dtypes"


def members(dumps: list[Dump], group: str) -> list[int]:
    """A group's ranks: as pg_config lists them, else the ranks whose dumps know the group (gloo lists none)."""
    for d in dumps:
        if group in d.group_ranks:
            return sorted(d.group_ranks[group])
    return sorted({d.rank for d in dumps if group in d.status or any(e.group == group for e in d.entries)})


def _collective_disagreement(views: dict[int, RankInGroup], absent: list[int]) -> dict | None:
    """The first number at which the ranks of a group disagree (a rank missing or mismatched), or, with none,
    a number every rank with a dump is waiting in."""
    seqs = sorted({s for v in views.values() for s in v.collectives})
    for seq in seqs:
        states = {r: v.state(seq) for r, v in views.items()}
        entered = {r: v.collectives[seq] for r, v in views.items() if seq in v.collectives}
        votes = Counter(_signature(e) for e in entered.values())
        top = max(votes.values())
        ref_rank = min(r for r, e in entered.items() if votes[_signature(e)] == top)
        ref = entered[ref_rank]
        mismatched = {r: _differs(e, ref) for r, e in entered.items() if _signature(e) != _signature(ref)}
        missing = [r for r, s in states.items() if s == "missing"]
        waiting = [r for r, s in states.items() if s == "waiting" and r not in mismatched]
        if missing or mismatched or (waiting and len(waiting) == len(views) and seq == seqs[-1]):
            stuck = _stuck(seq, ref, entered, states, missing, waiting, mismatched, absent)
            stuck["no_majority"] = bool(mismatched) and list(votes.values()).count(top) > 1
            stuck["reference_rank"] = ref_rank
            return stuck
    return None


def _stuck(seq, ref, entered, states, missing, waiting, mismatched, absent) -> dict:
    created = [e.created_ns for r, e in entered.items() if r in waiting and e.created_ns]
    return {
        "kind": "collective",
        "group": ref.group,
        "group_desc": ref.group_desc,
        "seq_id": seq,
        "op": ref.op,
        "backend": ref.backend,
        "sizes": [list(s) for s in ref.input_sizes],
        "dtypes": list(ref.input_dtypes or []),
        "bytes": nbytes(ref),
        "ranks_missing": sorted(missing),
        "ranks_waiting": sorted(waiting),
        "ranks_mismatched": [
            {
                "rank": r,
                "differs_in": why,
                "op": entered[r].op,
                "sizes": [list(s) for s in entered[r].input_sizes],
                "dtypes": list(entered[r].input_dtypes or []),
                "frames": list(entered[r].frames),
            }
            for r, why in sorted(mismatched.items())
        ],
        "ranks_entered": sorted(r for r, s in states.items() if s == "entered" and r not in mismatched),
        "ranks_completed": sorted(r for r, s in states.items() if s == "completed" and r not in mismatched),
        "ranks_unknown": sorted(r for r, s in states.items() if s == "unknown" and r not in mismatched),
        "ranks_without_dump": absent,
        "waiting_since_ns": min(created) if created else None,
        "waiting_until_ns": max(created) if created else None,
        "first_created_ns": min((e.created_ns for e in entered.values() if e.created_ns), default=None),
        "frames": list(ref.frames),
    }


def _p2p_disagreement(views: dict[int, RankInGroup], group: str, desc: str) -> dict | None:
    """The first send or recv that the peer rank (whose dump is here) has no counterpart for, or whose
    counterpart moves other sizes: the n-th send from A to B against the n-th recv on B from A."""
    found = []
    pairs = {e.peer for v in views.values() for e in v.p2p if e.peer}
    for src, dst in sorted(p for p in pairs if p is not None):
        if src not in views or dst not in views or views[src].wrapped or views[dst].wrapped:
            continue
        sends = [e for e in views[src].p2p if e.op == "send" and e.peer == (src, dst)]
        recvs = [e for e in views[dst].p2p if e.op == "recv" and e.peer == (src, dst)]
        for i in range(max(len(sends), len(recvs))):
            if i >= len(sends) or i >= len(recvs) or sends[i].input_sizes != recvs[i].input_sizes:
                have, side, other = (sends, src, dst) if i < len(sends) else (recvs, dst, src)
                e = have[i]
                other_has = i < len(sends) and i < len(recvs)
                found.append(
                    {
                        "kind": "p2p",
                        "group": group,
                        "group_desc": desc,
                        "seq_id": e.seq,
                        "op": e.op,
                        "backend": e.backend,
                        "sizes": [list(s) for s in e.input_sizes],
                        "dtypes": list(e.input_dtypes or []),
                        "bytes": nbytes(e),
                        "ranks_missing": [] if other_has else [other],
                        "ranks_waiting": [side],
                        "ranks_mismatched": [_p2p_counterpart(other, recvs[i] if side == src else sends[i])]
                        if other_has
                        else [],
                        "ranks_entered": [],
                        "ranks_completed": [],
                        "ranks_unknown": [],
                        "ranks_without_dump": [],
                        "peer": [src, dst],
                        "waiting_since_ns": e.created_ns,
                        "waiting_until_ns": e.created_ns,
                        "first_created_ns": e.created_ns,
                        "frames": list(e.frames),
                    }
                )
                break
    return min(found, key=lambda f: f["first_created_ns"] or 0, default=None)


def _p2p_counterpart(rank: int, e: Entry) -> dict:
    return {"rank": rank, "differs_in": "sizes", "op": e.op, "sizes": [list(x) for x in e.input_sizes],
            "dtypes": list(e.input_dtypes or []), "frames": list(e.frames)}  # fmt: skip


def analyse(dumps: list[Dump]) -> tuple[list[dict], dict]:
    """The job's rank rows and the summary: the stuck collective (None when the ranks agree), every group's
    first disagreement, each rank's last collectives, and the grid of the stuck group's numbers by rank."""
    have = {d.rank: d for d in dumps}
    groups = sorted({e.group for d in dumps for e in d.entries} | {g for d in dumps for g in d.status})
    found = []
    views_of: dict[str, dict[int, RankInGroup]] = {}
    for group in groups:
        ranks = members(dumps, group)
        views = {r: _rank_in(have[r], group) for r in ranks if r in have}
        views_of[group] = views
        absent = [r for r in ranks if r not in have]
        desc = next((e.group_desc for d in dumps for e in d.entries if e.group == group), "")
        for candidate in (_collective_disagreement(views, absent), _p2p_disagreement(views, group, desc)):
            if candidate is not None:
                found.append(candidate)
    found.sort(key=lambda f: (f["first_created_ns"] is None, f["first_created_ns"] or 0, f["group"]))
    stuck = found[0] if found else None
    main = stuck["group"] if stuck else _default_group(dumps, groups)
    rows = [_rank_row(have[r], views_of.get(main, {}).get(r), stuck) for r in sorted(have)]
    world = _world_size(dumps)
    meta = {
        "stuck": stuck,
        "disagreements": found,
        "group": main,
        "groups": [
            {
                "group": g,
                "desc": next((e.group_desc for d in dumps for e in d.entries if e.group == g), ""),
                "ranks": sorted(views_of[g]),
                "collectives": max((v.last_entered for v in views_of[g].values()), default=0),
            }
            for g in groups
        ],  # fmt: skip
        "ranks": sorted(have),
        "world_size": world,
        "ranks_without_dump": [r for r in range(world) if r not in have] if world else [],
        "version": dumps[0].version,
        "backend": next((e.backend for d in dumps for e in d.entries if e.backend), ""),
        "wrapped_ranks": sorted(r for r, v in views_of.get(main, {}).items() if v.wrapped),
        "grid": grid(views_of.get(main, {}), stuck),
        "quirks": {f"rank {d.rank}: {why}": n for d in dumps for why, n in d.quirks.items()},
    }
    return rows, meta


def _default_group(dumps: list[Dump], groups: list[str]) -> str:
    """The group a report without a disagreement shows: the one with the most ranks (the default group)."""
    return max(groups, key=lambda g: (len(members(dumps, g)), g == "0"), default="")


def _world_size(dumps: list[Dump]) -> int | None:
    """The largest group's size where pg_config lists members (gloo's does not: unknown)."""
    sizes = [len(r) for d in dumps for r in d.group_ranks.values()]
    return max(sizes) if sizes else None


def _rank_row(dump: Dump, view: RankInGroup | None, stuck: dict | None) -> dict:
    last = None
    if view is not None and view.collectives:
        last = view.collectives[max(view.collectives)]
    if stuck is None:
        state = "waiting" if view is not None and view.state(view.last_entered) == "waiting" else "idle"
    elif dump.rank in stuck["ranks_missing"]:
        state = "missing"
    elif dump.rank in {m["rank"] for m in stuck["ranks_mismatched"]}:
        state = "mismatched"
    elif dump.rank in stuck["ranks_waiting"]:
        state = "waiting"
    elif view is None:
        state = "not in the group"
    else:
        state = view.state(stuck["seq_id"]) if stuck["kind"] == "collective" else "idle"
    return {
        "kind": "rank",
        "rank": dump.rank,
        "file": dump.file,
        "state": state,
        "last_completed_seq": view.last_completed if view else None,
        "last_entered_seq": view.last_entered if view else None,
        "first_seq_in_buffer": view.first_seq if view else None,
        "wrapped": bool(view and view.wrapped),
        "last_op": last.op if last else None,
        "last_frames": list(last.frames) if last else [],
        "last_created_ns": last.created_ns if last else None,
        "entries": len(dump.entries),
    }


def grid(views: dict[int, RankInGroup], stuck: dict | None) -> dict:
    """The group's collective numbers by rank, each cell one of the states above: the last
    :data:`GRID_SEQS` numbers up to two past the stuck one (or the newest)."""
    newest = max((v.last_entered for v in views.values()), default=0)
    end = min(newest, stuck["seq_id"] + 2) if stuck and stuck["kind"] == "collective" else newest
    seqs = list(range(max(1, end - GRID_SEQS + 1), end + 1))
    mismatched = {m["rank"] for m in stuck["ranks_mismatched"]} if stuck else set()
    cells = [
        ["mismatched" if stuck and s == stuck["seq_id"] and r in mismatched else v.state(s) for s in seqs]
        for r, v in sorted(views.items())
    ]
    ops = [next((v.collectives[s].op for v in views.values() if s in v.collectives), "") for s in seqs]
    return {"ranks": sorted(views), "seqs": seqs, "ops": ops, "cells": cells}

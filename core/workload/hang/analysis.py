"""Which collective stopped the job, and which rank: every rank's flight-recorder buffer matched by sequence id.

Per process group (named as the dumps name it, the same on every rank), a rank's collectives carry
``collective_seq_id`` 1, 2, 3, … in the order the rank entered them; point-to-point ops carry ``p2p_seq_id``
and are matched per pair of ranks, the n-th send from A to B against the n-th recv on B from A. A group's
members are the ranks ``pg_config`` lists; gloo lists none, so the default group is every rank of the job (up to
the highest rank with a dump, or the largest group listed) and another group the ranks whose dumps know it. For
each collective number recorded by any rank, each member rank is in one state:

- **completed**: at or below the group's ``last_completed_collective`` (gloo and NCCL both keep it in
  ``pg_status``; -1 there means none completed), or its entry says ``completed`` (NCCL's watchdog saw it end);
- **waiting**: entered (its entry is in the buffer) and not completed at the dump;
- **entered**: its entry is in the buffer but nothing records completion (no ``pg_status``, no entry
  marked completed): whether it was still inside is not known;
- **missing**: never entered it: the number is past the rank's last entered collective
  (``last_enqueued_collective``, or its newest entry), or the rank's dump holds no entry of the group and its
  buffer never wrapped (its oldest ``record_id`` is 0, or it has none): it entered none of them;
- **mismatched**: entered a collective of that number that differs from the one most ranks entered: another
  op, other input sizes (for ops whose sizes must agree), or other dtypes (a desync); on a tie the lowest
  rank's is the reference and the diagnosis says there is no majority;
- **unknown**: older than the rank's buffer holds (the ring buffer wrapped) with no status to say, or the rank's
  wrapped buffer says nothing of the group at all.

The first number of a group where a rank is missing or mismatched is where the group's ranks disagree; with
none, a number every rank with a dump is waiting in is a hang inside the collective — or, where members have no
dump, a wait for those. Where several groups disagree, the collective that stopped the job is the one whose
missing ranks are not themselves waiting in another group's collective (the ranks missing from the default
group's may all sit in a sub-group's, waiting for the one rank that stopped them all); of several such, or of
none, the one whose entries were created first. The last rank to enter a collective is named where it came
later than the others spread (a slow rank; the others waited for it). Sizes are the elements of the first input
times its dtype's width (the tensor's bytes).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, replace

from core.rows.flight_recorder import (
    Behind,
    Disagreement,
    HangGrid,
    HangGroup,
    HangRank,
    HangSummary,
    LastArrival,
    LateArrival,
    Mismatch,
)
from core.workload.hang.dump import Dump, Entry

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
    known: bool  # its buffer or its status says anything of the group (an unwrapped empty one: none entered)
    last_entered: int  # 0: none
    last_completed: int | None  # None: nothing says
    first_seq: int | None  # the oldest number still in the buffer

    @property
    def wrapped(self) -> bool:
        """Numbers start at 1: a buffer whose oldest is later lost the ones before it."""
        return self.first_seq is not None and self.first_seq > 1

    @property
    def inside(self) -> bool:
        """Inside a collective of the group at the dump (or nothing records that it left)."""
        return self.last_entered > 0 and self.state(self.last_entered) in ("waiting", "entered")

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


def _rank_in(dump: Dump, group: str, mine: list[Entry]) -> RankInGroup:
    """``mine``: the dump's entries of ``group``, in record order."""
    collectives: dict[int, Entry] = {}
    for e in mine:
        if not e.p2p:
            collectives.setdefault(e.seq, e)
    status = dump.status.get(group, {})
    recorded = max(collectives, default=0)
    completed = status.get("last_completed_collective")
    newest_done = max((s for s, e in collectives.items() if e.state == "completed"), default=None)
    if completed is None:  # no status: what the entries' own states say
        completed = newest_done
    else:  # the count starts at -1: none completed
        completed = max(completed, newest_done or 0, 0)
    whole = not dump.entries or dump.entries[0].record_id == 0  # the buffer never wrapped: it holds every entry
    return RankInGroup(
        rank=dump.rank,
        collectives=collectives,
        p2p=[e for e in mine if e.p2p],
        known=bool(mine) or bool(status) or whole,
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


def members(dumps: list[Dump], world: int, default: str | None, knows: dict[int, set[str]]) -> dict[str, list[int]]:
    """Each group's ranks: as pg_config lists them (the first dump that lists the group); else (gloo lists none)
    every rank of the job for the default group, the ranks whose dumps know the group for another (``knows``:
    rank → the groups its dump names). One pass over the dumps, whatever the number of groups."""
    out: dict[str, list[int]] = {}
    for d in dumps:
        for group, ranks in d.group_ranks.items():
            out.setdefault(group, sorted(ranks))
    known_by: dict[str, list[int]] = {}
    for rank in sorted(knows):
        for group in knows[rank]:
            known_by.setdefault(group, []).append(rank)
    for group, ranks in known_by.items():
        out.setdefault(group, list(range(world)) if group == default else ranks)
    return out


def _collective_disagreement(views: dict[int, RankInGroup], absent: list[int]) -> Disagreement | None:
    """The first number at which the ranks of a group disagree (a rank missing or mismatched), or, with none,
    a number every rank with a dump is waiting in."""
    seqs = sorted({s for v in views.values() for s in v.collectives})
    # below this, every rank the matching knows entered each number: none can be missing
    all_entered = min((v.last_entered for v in views.values() if v.known), default=0)
    for seq in seqs:
        entered = {r: v.collectives[seq] for r, v in views.items() if seq in v.collectives}
        alike = len({(e.op, e.input_sizes, e.input_dtypes) for e in entered.values()}) == 1
        if alike and seq <= all_entered and seq != seqs[-1]:
            continue
        states = {r: v.state(seq) for r, v in views.items()}
        votes = Counter(_signature(e) for e in entered.values())
        top = max(votes.values())
        ref_rank = min(r for r, e in entered.items() if votes[_signature(e)] == top)
        ref = entered[ref_rank]
        mismatched = {r: _differs(e, ref) for r, e in entered.items() if _signature(e) != _signature(ref)}
        missing = [r for r, s in states.items() if s == "missing"]
        waiting = [r for r, s in states.items() if s == "waiting" and r not in mismatched]
        if missing or mismatched or (waiting and len(waiting) == len(views) and seq == seqs[-1]):
            return replace(
                _stuck(seq, ref, entered, states, missing, waiting, mismatched, absent),
                no_majority=bool(mismatched) and list(votes.values()).count(top) > 1,
                reference_rank=ref_rank,
                last_arrival=None if missing or mismatched else _last_arrival(entered),
            )
    return None


def _last_arrival(entered: dict[int, Entry]) -> LastArrival | None:
    """The rank that entered a collective last, where it came later after the one before it than the others (at
    least two, or their spread says nothing) spread among themselves: the others waited for it. Its rank, how much
    later, and when the others entered."""
    times = sorted((e.created_ns, r) for r, e in entered.items() if e.created_ns)
    if len(times) < 3:
        return None
    (first, _), (before, _), (last, rank) = times[0], times[-2], times[-1]
    if last - before <= before - first:
        return None
    others = tuple(sorted(r for _, r in times[:-1]))
    return LastArrival(rank, after_ns=last - before, others=others, others_from_ns=first, others_until_ns=before)


def _stuck(seq, ref, entered, states, missing, waiting, mismatched, absent) -> Disagreement:
    created = [entered[r].created_ns for r in waiting if entered[r].created_ns]

    def ranks_in(state: str) -> tuple[int, ...]:
        return tuple(sorted(r for r, s in states.items() if s == state and r not in mismatched))

    return Disagreement(
        "collective",
        ref.group,
        ref.group_desc,
        seq,
        ref.op,
        ref.backend,
        **_moves(ref),
        ranks_missing=tuple(sorted(missing)),
        ranks_waiting=tuple(sorted(waiting)),
        ranks_mismatched=tuple(_mismatch(r, why, entered[r]) for r, why in sorted(mismatched.items())),
        ranks_entered=ranks_in("entered"),
        ranks_completed=ranks_in("completed"),
        ranks_unknown=ranks_in("unknown"),
        ranks_without_dump=tuple(absent),
        waiting_since_ns=min(created) if created else None,
        waiting_until_ns=max(created) if created else None,
        first_created_ns=min((e.created_ns for e in entered.values() if e.created_ns), default=None),
        frames=tuple(ref.frames),
    )


def _moves(e: Entry) -> dict:
    """What an entry moves, as a disagreement names it."""
    return {"sizes": tuple(tuple(s) for s in e.input_sizes), "dtypes": tuple(e.input_dtypes or ()), "bytes": nbytes(e)}


def _mismatch(rank: int, why: str, e: Entry) -> Mismatch:
    moves = _moves(e)
    return Mismatch(rank, why, e.op, moves["sizes"], moves["dtypes"], tuple(e.frames))


def _p2p_disagreement(views: dict[int, RankInGroup], group: str, desc: str) -> Disagreement | None:
    """The first send or recv that the peer rank (whose dump is here) has no counterpart for, or whose
    counterpart moves other sizes: the n-th send from A to B against the n-th recv on B from A."""
    found = []
    ops: dict[tuple[int, str, tuple[int, int]], list[Entry]] = {}  # (rank, op, pair) → its ops, in record order
    for rank, v in views.items():
        for e in v.p2p:
            if e.peer:
                ops.setdefault((rank, e.op, e.peer), []).append(e)
    for src, dst in sorted({pair for _, _, pair in ops}):
        if src not in views or dst not in views or views[src].wrapped or views[dst].wrapped:
            continue
        sends = ops.get((src, "send", (src, dst)), [])
        recvs = ops.get((dst, "recv", (src, dst)), [])
        for i in range(max(len(sends), len(recvs))):
            if i >= len(sends) or i >= len(recvs) or sends[i].input_sizes != recvs[i].input_sizes:
                have, side, other = (sends, src, dst) if i < len(sends) else (recvs, dst, src)
                e = have[i]
                other_has = i < len(sends) and i < len(recvs)
                found.append(
                    Disagreement(
                        "p2p",
                        group,
                        desc,
                        e.seq,
                        e.op,
                        e.backend,
                        **_moves(e),
                        ranks_missing=() if other_has else (other,),
                        ranks_waiting=(side,),
                        ranks_mismatched=(_mismatch(other, "sizes", (recvs if side == src else sends)[i]),)
                        if other_has
                        else (),
                        peer=(src, dst),
                        waiting_since_ns=e.created_ns,
                        waiting_until_ns=e.created_ns,
                        first_created_ns=e.created_ns,
                        frames=tuple(e.frames),
                    )
                )
                break
    return min(found, key=lambda f: f.first_created_ns or 0, default=None)


def analyse(dumps: list[Dump]) -> tuple[list[HangRank], HangSummary]:
    """The job's rank rows and the summary: the stuck collective (None when the ranks agree), every group's
    first disagreement (the stuck one first), each rank's last collectives, the grid of the stuck group's numbers
    by rank, and without a hang the rank that entered a collective late where others were left waiting in it."""
    have = {d.rank: d for d in dumps}
    world = _world_size(dumps)
    by_group: dict[int, dict[str, list[Entry]]] = {}
    for d in dumps:
        mine = by_group[d.rank] = {}
        for e in d.entries:
            mine.setdefault(e.group, []).append(e)
    knows = {d.rank: set(by_group[d.rank]) | set(d.status) for d in dumps}
    groups = sorted(set().union(*knows.values()))
    default = _default_name(dumps)
    descs = {e.group: e.group_desc for d in dumps for entries in by_group[d.rank].values() for e in entries[:1]}
    found: list[Disagreement] = []
    views_of: dict[str, dict[int, RankInGroup]] = {}
    member_ranks = members(dumps, world, default, knows)
    for group in groups:
        ranks = member_ranks[group]
        views = views_of[group] = {r: _rank_in(have[r], group, by_group[r].get(group, [])) for r in ranks if r in have}
        absent = [r for r in ranks if r not in have]
        for candidate in (
            _collective_disagreement(views, absent),
            _p2p_disagreement(views, group, descs.get(group, "")),
        ):
            if candidate is not None:
                found.append(candidate)
    found.sort(key=_created)
    stuck = _cause(found, views_of)
    if stuck is not None:
        found = [f for f in found if f is not stuck]
        stuck = replace(
            stuck, behind=tuple(Behind(f.group, f.group_desc, f.op, f.seq_id, f.ranks_waiting) for f in found)
        )
        found.insert(0, stuck)
    main = stuck.group if stuck else _default_group(groups, default, views_of)
    views = views_of.get(main, {})
    named = _named(stuck)
    rows = [_rank_row(have[r], views.get(r), stuck, named.get(r)) for r in sorted(have)]
    return rows, _summary(dumps, stuck, found, main, views_of, descs, world)


def _summary(
    dumps: list[Dump],
    stuck: Disagreement | None,
    found: list[Disagreement],
    main: str,
    views_of: dict[str, dict[int, RankInGroup]],
    descs: dict[str, str],
    world: int,
) -> HangSummary:
    """The job's summary: what :func:`analyse` found, each group, the ranks and the grid of the main group."""
    have, groups, views = {d.rank for d in dumps}, sorted(views_of), views_of.get(main, {})
    return HangSummary(
        stuck=stuck,
        disagreements=tuple(found),
        group=main,
        groups=tuple(
            HangGroup(
                g,
                descs.get(g, ""),
                tuple(sorted(views_of[g])),
                max((v.last_entered for v in views_of[g].values()), default=0),
            )
            for g in groups
        ),  # fmt: skip
        ranks=tuple(sorted(have)),
        world_size=world,
        ranks_without_dump=tuple(r for r in range(world) if r not in have),
        version=dumps[0].version,
        backend=next((e.backend for d in dumps for e in d.entries if e.backend), ""),
        wrapped_ranks=tuple(sorted(r for r, v in views.items() if v.wrapped)),
        grid=grid(views, stuck),
        late=None if stuck else _late_without_hang(views, main, descs.get(main, "")),
        quirks={f"rank {d.rank}: {why}": n for d in dumps for why, n in d.quirks.items()},
    )


def _created(f: Disagreement) -> tuple:
    return (f.first_created_ns is None, f.first_created_ns or 0, f.group)


def _cause(found: list[Disagreement], views_of: dict[str, dict[int, RankInGroup]]) -> Disagreement | None:
    """The disagreement that stopped the job: one whose missing ranks wait in no other group's collective (a
    rank waiting elsewhere is held up there, not the cause), or that has a desync; of several, or of none, the
    one entered first."""
    inside: dict[int, set[str]] = {}  # rank → the groups it is inside a collective of (read once per view)
    for group, views in views_of.items():
        for rank, view in views.items():
            if view.inside:
                inside.setdefault(rank, set()).add(group)

    def elsewhere(rank: int, group: str) -> bool:
        return bool(inside.get(rank, set()) - {group})

    causes = [f for f in found if f.ranks_mismatched or not any(elsewhere(r, f.group) for r in f.ranks_missing)]
    return min(causes or found, key=_created, default=None)


def _late_without_hang(views: dict[int, RankInGroup], group: str, desc: str) -> LateArrival | None:
    """Where some ranks were still waiting in a collective at their dumps and the ranks agree (a slow job dumped
    during the wait): the rank that entered it late, if one did."""
    waiting = [r for r, v in views.items() if v.last_entered and v.state(v.last_entered) == "waiting"]
    if not waiting:
        return None
    seq = max(views[r].last_entered for r in waiting)
    entered = {r: v.collectives[seq] for r, v in views.items() if seq in v.collectives}
    late = _last_arrival(entered)
    if late is None:
        return None
    states = {r: v.state(seq) for r, v in views.items()}
    return LateArrival(
        **vars(late),
        group=group,
        group_desc=desc,
        seq_id=seq,
        op=entered[late.rank].op,
        ranks_waiting=tuple(sorted(r for r, s in states.items() if s == "waiting")),
        ranks_completed=tuple(sorted(r for r, s in states.items() if s == "completed")),
    )


def _default_name(dumps: list[Dump]) -> str | None:
    """The default group's name: the one its entries describe as default_pg."""
    return next((e.group for d in dumps for e in d.entries if e.group_desc == "default_pg"), None)


def _default_group(groups: list[str], default: str | None, views_of: dict[str, dict[int, RankInGroup]]) -> str:
    """The group a report without a disagreement shows: the default group, else the one with the most ranks."""
    if default in views_of:
        return default
    return max(groups, key=lambda g: (len(views_of[g]), g == "0"), default="")


def _world_size(dumps: list[Dump]) -> int:
    """The job's ranks: the largest group pg_config lists, or up to the highest rank with a dump (gloo lists none)."""
    return max([len(r) for d in dumps for r in d.group_ranks.values()] + [max(d.rank for d in dumps) + 1])


def _named(stuck: Disagreement | None) -> dict[int, str]:
    """The ranks the stuck collective names, each with its state there: missing before mismatched before waiting."""
    if stuck is None:
        return {}
    named = dict.fromkeys(stuck.ranks_waiting, "waiting")
    named |= {m.rank: "mismatched" for m in stuck.ranks_mismatched}
    return named | dict.fromkeys(stuck.ranks_missing, "missing")


def _rank_row(dump: Dump, view: RankInGroup | None, stuck: Disagreement | None, named: str | None) -> HangRank:
    """``named``: the rank's state as the stuck collective names it, if it does."""
    last = None
    if view is not None and view.collectives:
        last = view.collectives[max(view.collectives)]
    if stuck is None:
        state = "waiting" if view is not None and view.state(view.last_entered) == "waiting" else "idle"
    elif named is not None:
        state = named
    elif view is None:
        state = "not in the group"
    else:
        state = view.state(stuck.seq_id) if stuck.is_collective else "idle"
    return HangRank(
        rank=dump.rank,
        file=dump.file,
        state=state,
        last_completed_seq=view.last_completed if view else None,
        last_entered_seq=view.last_entered if view else None,
        first_seq_in_buffer=view.first_seq if view else None,
        wrapped=bool(view and view.wrapped),
        last_op=last.op if last else None,
        last_frames=tuple(last.frames) if last else (),
        last_created_ns=last.created_ns if last else None,
        entries=len(dump.entries),
    )


def grid(views: dict[int, RankInGroup], stuck: Disagreement | None) -> HangGrid:
    """The group's collective numbers by rank, each cell one of the states above: the last
    :data:`GRID_SEQS` numbers up to two past the stuck one (or the newest)."""
    newest = max((v.last_entered for v in views.values()), default=0)
    end = min(newest, stuck.seq_id + 2) if stuck and stuck.is_collective else newest
    seqs = tuple(range(max(1, end - GRID_SEQS + 1), end + 1))
    mismatched = {m.rank for m in stuck.ranks_mismatched} if stuck else set()
    cells = tuple(
        tuple("mismatched" if stuck and s == stuck.seq_id and r in mismatched else v.state(s) for s in seqs)
        for r, v in sorted(views.items())
    )
    ops = tuple(next((v.collectives[s].op for v in views.values() if s in v.collectives), "") for s in seqs)
    return HangGrid(tuple(sorted(views)), seqs, ops, cells)

"""The diagnosis of a hang in plain words, first: which collective, which rank did not arrive, what it did
instead, where in the code — from the summary :func:`core.workload.hang.analysis.analyse` derived, with its numbers.

Each is a :class:`~core.workload.findings.Finding`, ranked there with every import's; the value of a hang is the
number of ranks that stopped it (missing or mismatched), of the others what they count.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from core.rows.flight_recorder import Behind, Disagreement, HangRank, HangSummary, LastArrival, LateArrival
from core.units import bytes_text, duration_text, shapes_text
from core.workload.findings import MAX_FINDINGS as MAX_FINDINGS  # one cap for every import
from core.workload.findings import Finding

MAX_BEHIND = 3  # the collectives a hang's text names as waiting behind it; the rest are counted
_TORCH_DIRS = ("/torch/distributed/", "/torch/nn/parallel/", "/torch/_dynamo/", "/torch/utils/")


def clock(ns: int) -> str:
    """A recorder time (wall clock, ns since the epoch) as UTC time of day: "12:04:11.250"."""
    return datetime.fromtimestamp(ns / 1e9, tz=UTC).strftime("%H:%M:%S.%f")[:-3]


def user_frame(frames: Sequence[str]) -> str | None:
    """The innermost frame outside torch's own distributed code: where the user's code made the call."""
    return next((f for f in frames if not any(d in f for d in _TORCH_DIRS)), None)


def _ranks(ranks: Sequence[int]) -> str:
    if len(ranks) == 1:
        return f"rank {ranks[0]}"
    if list(ranks) == list(range(ranks[0], ranks[-1] + 1)) and len(ranks) > 2:
        return f"ranks {ranks[0]}–{ranks[-1]}"
    return "ranks " + ", ".join(map(str, ranks))


def _group(s: Disagreement | Behind | LateArrival) -> str:
    desc = s.group_desc
    if desc in ("default_pg", "") and s.group == "0":
        return "the default group"
    return f"group {s.group}" + (f" ({desc})" if desc and desc != "undefined" else "")


def _what(s: Disagreement) -> str:
    """all_reduce #4 of the default group (128 B Float, shape 4×8)."""
    size = f"{bytes_text(s.bytes)} " if s.bytes is not None else ""
    dtypes = "/".join(dict.fromkeys(s.dtypes)) or "dtype not recorded"
    return f"{s.op} #{s.seq_id} of {_group(s)} ({size}{dtypes}, shape {shapes_text(s.sizes)})"


def _waiting(s: Disagreement) -> str:
    waiting = s.ranks_waiting
    if not waiting:
        return ""
    when = ""
    if s.waiting_since_ns:
        a, b = clock(s.waiting_since_ns), clock(s.waiting_until_ns or s.waiting_since_ns)
        when = f" at {a} UTC" if a == b else f" between {a} and {b} UTC"
    return (
        f"; {_ranks(waiting)} entered it{when} and {'was' if len(waiting) == 1 else 'were'} still waiting at the dump"
    )


def _instead(rank: HangRank | None) -> str:
    if not rank or rank.last_op is None:
        return ""
    where = user_frame(rank.last_frames)
    return f"; rank {rank.rank}'s last collective was {rank.last_op} #{rank.last_entered_seq}" + (
        f", entered from {where}" if where else ""
    )


def _p2p(s: Disagreement, rows: dict[int, HangRank], at: str) -> Finding:
    src, dst = s.peer or (0, 0)
    side = s.ranks_waiting[0]
    other = dst if side == src else src
    if s.ranks_missing:
        text = (
            f"rank {other} never posted the {'recv' if s.op == 'send' else 'send'} for rank {side}'s "
            f"{s.op} #{s.seq_id} ({src}→{dst}) of {_group(s)}"
        )
    else:
        text = f"rank {src}'s send #{s.seq_id} and rank {dst}'s recv ({src}→{dst}) move other sizes"
    return Finding("hang", text + _instead(rows.get(other)) + at, len(s.culprits) or 1, "ranks")


def _desyncs(s: Disagreement) -> list[str]:
    """Each mismatched rank: what it entered where the others (or the reference rank) entered the stuck one."""
    out = []
    for m in s.ranks_mismatched:
        dtypes = "/".join(dict.fromkeys(m.dtypes)) or "dtype not recorded"
        m_where = user_frame(m.frames)
        out.append(
            f"rank {m.rank} entered {m.op} ({dtypes}, shape {shapes_text(m.sizes)}) where "
            f"{'rank ' + str(s.reference_rank) if s.no_majority else 'the others'} entered {_what(s)}: a "
            f"desync, other {m.differs_in}"
            + (" (no majority: either may be the odd one)" if s.no_majority else "")
            + (f", from {m_where}" if m_where else "")
        )
    return out


def _behind(s: Disagreement) -> str:
    behind = [b for b in s.behind or () if b.ranks_waiting]
    text = ""
    for b in behind[:MAX_BEHIND]:
        verb = "waits" if len(b.ranks_waiting) == 1 else "wait"
        text += f"; {_ranks(b.ranks_waiting)} {verb} behind it in {b.op} #{b.seq_id} of {_group(b)}"
    if len(behind) > MAX_BEHIND:
        more = len(behind) - MAX_BEHIND
        text += f"; {more:,} more collective{'s' * (more != 1)} of other groups wait behind it"
    return text


def _hang(s: Disagreement, rows: dict[int, HangRank]) -> Finding:
    culprits = s.culprits
    where = user_frame(s.frames)
    at = f"; the others called it from {where}" if where else ""
    if not s.is_collective:
        return _p2p(s, rows, at)
    parts = [f"{_ranks(s.ranks_missing)} never entered {_what(s)}"] if s.ranks_missing else []
    parts += _desyncs(s)
    absent = s.ranks_without_dump
    if not parts and absent:
        culprits = absent
        it = "it" if len(absent) == 1 else "they"
        parts.append(
            f"every rank with a dump entered {_what(s)} and none completed it: they wait for {_ranks(absent)}, the "
            f"member{'s' if len(absent) > 1 else ''} with no dump (whether {it} entered it, only {it} could say)"
        )
    elif not parts:
        parts.append(f"every rank with a dump entered {_what(s)} and none completed it: a hang inside the collective")
    text = "; ".join(parts) + _waiting(s)
    if s.last_arrival:
        text += f"; {_late(s.last_arrival)}"
    if s.ranks_entered:
        text += f"; {_ranks(s.ranks_entered)} entered it too (the dumps record no completion)"
    if len(culprits) == 1 and s.ranks_missing:
        text += _instead(rows.get(culprits[0]))
    return Finding("hang", text + _behind(s) + at, len(culprits), "ranks")


def _late(late: LastArrival) -> str:
    """rank 2 entered it last, 4.2 s after the others (ranks 0, 1: 12:04:11.250–12:04:11.258 UTC)."""
    a, b = clock(late.others_from_ns), clock(late.others_until_ns)
    when = a if a == b else f"{a}–{b}"
    return (
        f"rank {late.rank} entered it last, {duration_text(late.after_ns / 1e9)} after the others "
        f"({_ranks(late.others)}: {when} UTC)"
    )


def hang_findings(summary: HangSummary, ranks: Sequence[HangRank]) -> list[Finding]:
    """The stuck collective first, then what limits the reading: ranks without a dump, wrapped buffers."""
    rows = {r.rank: r for r in ranks}
    out = []
    s = summary.stuck
    if s is not None:
        out.append(_hang(s, rows))
    absent = summary.ranks_without_dump or (s.ranks_without_dump if s else ())
    if absent:
        out.append(
            Finding(
                "ranks_without_dump",
                f"no dump from {_ranks(absent)}: what {'it' if len(absent) == 1 else 'they'} did is not known; "
                "the matching reads the other ranks only",
                len(absent),
                "ranks",
            )
        )
    if wrapped := summary.wrapped_ranks:
        oldest = max(rows[r].first_seq_in_buffer or 0 for r in wrapped)
        out.append(
            Finding(
                "wrapped",
                f"the buffer of {_ranks(wrapped)} wrapped: collectives before #{oldest} of {summary.group!r} are "
                "gone; their states are unknown, the newer ones are read as recorded",
                len(wrapped),
                "ranks",
                advice=" (a larger TORCH_FR_BUFFER_SIZE keeps more)",
            )
        )
    if s is None:
        out[:0] = _no_hang(summary.late, list(rows.values()))
    return out


def _no_hang(late: LateArrival | None, rank_rows: list[HangRank]) -> list[Finding]:
    """No disagreement: say so, and where ranks were still waiting at their dumps, who they waited for."""
    agree = f"the dumps show no hang: the {len(rank_rows)} ranks agree on every collective they recorded"
    waiting = [r.rank for r in rank_rows if r.state == "waiting"]
    if not waiting:
        return [Finding("no_hang", f"{agree} and none is left waiting", 0, "ranks")]
    where = f" in {late.op} #{late.seq_id} of {_group(late)}" if late else ""
    text = f"{agree}; {_ranks(waiting)} {'was' if len(waiting) == 1 else 'were'} still waiting{where} at the dump"
    if late and late.ranks_completed:
        text += f", which {_ranks(late.ranks_completed)} completed: they were dumped before it ended"
    out = [Finding("no_hang", text, 0, "ranks")]
    if late:
        out.append(
            Finding(
                "late_rank",
                f"{_late(late)}: {_ranks(late.others)} waited for it in {late.op} #{late.seq_id} of "
                f"{_group(late)} — a slow rank, not a hang",
                late.after_ns / 1e3,
                "us",
            )
        )
    return out

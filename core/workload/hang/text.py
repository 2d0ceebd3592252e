"""What an imported hang says, as text: the one writer of it (``python -m core hang DIR``; the page says its findings
through the same :func:`~core.workload.findings.stored_findings`). Plotly-free, from the stored run only."""

from __future__ import annotations

from core.rows.flight_recorder import HangRank, HangSummary
from core.rows.notes import RunNotes
from core.workload.findings import finding_lines
from core.workload.hang.findings import user_frame

MAX_ALSO = 10  # the other groups' disagreements listed; --json holds them all


def dumps_text(summary: HangSummary) -> str:
    """The dumps read: "dumps: 3 rank dump(s), recorder version 2.3, nccl"."""
    return (
        f"{summary.file}: {len(summary.ranks)} rank dump(s), recorder version {summary.version}, "
        f"{summary.backend or 'backend ?'}"
    )


def hang_lines(meta: dict, rows: list[HangRank], stored: str) -> list[str]:
    """The whole report: the dumps (and the example they are), the findings, each rank's last collectives in the main group, the other groups' disagreements, what was odd."""
    s = HangSummary.from_meta(meta)
    out = [f"{dumps_text(s)} — {stored}"]
    if s.example:
        out.append(f"example {s.example.name}: {s.example.title} — {s.example.label}")
    out += finding_lines(meta)
    desc = s.group_desc
    out.append(f"group {s.group!r}{f' ({desc})' if desc else ''}, by rank:")
    out.append(f"{'rank':>5} {'state':<12} {'completed':>10} {'entered':>8}  last op  (where)")
    for r in rows:
        where = user_frame(r.last_frames) or ""
        done = "?" if r.last_completed_seq is None else f"#{r.last_completed_seq}"
        entered = "?" if r.last_entered_seq is None else f"#{r.last_entered_seq}"
        out.append(f"{r.rank:>5} {r.state:<12} {done:>10} {entered:>8}  {r.last_op or '-'}  {where}")
    others = s.disagreements[1:]
    out += [f"also: group {o.group!r} disagrees at {o.op} #{o.seq_id}" for o in others[:MAX_ALSO]]
    if len(others) > MAX_ALSO:
        out.append(f"also: {len(others) - MAX_ALSO:,} more groups disagree (--json lists every one)")
    return out + RunNotes.from_meta(meta).quirk_lines()

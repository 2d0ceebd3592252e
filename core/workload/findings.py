"""A diagnosis first: up to three findings about an imported workload, in plain words, each with its number.

Every producer (here, :mod:`core.workload.trace` and :mod:`core.workload.hang.findings`) returns :class:`Finding`
candidates; :func:`ranked` picks the ones an import opens with, and the run stores them in ``meta["findings"]``
(:func:`to_store`: ``{"kind", "text", "value", "unit"}`` and, where there is one, ``time_us``, ``cause``); the page
and the CLI read them back typed (:func:`stored_findings`) and show them before any table. ``value`` is the number
the sentence rests on (``unit`` ``%``, ``us``, ``bytes`` or ``ranks``), so a reader, a test or a script can check
it. A finding's text is plain text, one rule for every reader: no Markdown (a kernel or an operator is named as it
is, never in backticks), no Python repr (a shape is ``4×8``: :func:`core.units.shapes_text`), and its shares are written to the
same 0.1 % as the page's figures beside it (a host wait of 99.6 % never reads "100 %").

What failed or holds the job back comes first (an out-of-memory, a hang, the rank the others wait for); the others
are ranked by how much of the whole each explains, one measure per kind of file:

- **a trace**: the share of the GPU's span (first activity to last) — idle time, exposed communication (no
  compute hides it), and the kernel group with the most kernel time (its share of the kernel time, kernels only;
  copies and memsets, when they lead, as a share of the GPU time: kernels + copies + memsets); shares under
  :data:`MIN_SPAN_SHARE` are left out;
- **a job's ranks**: the straggler first (the rank with the most compute against the other ranks, and the kernel
  group and the operator holding most of its extra time), the rank the others waited for at the collectives
  (where the waits are ≥ 5 % of the ranks' communication time), then the
  rank whose idle or exposed communication takes the largest share of its span;
- **a memory snapshot**: an out-of-memory first (what failed, and what to try), then bytes — the largest
  allocation site live at the peak, what was allocated before recording began (no stack can name it; a snapshot
  with no trace says instead that only its own moment is known), and reserved − allocated at the peak (memory
  the allocator holds but no tensor uses).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from core.rows.trace import KernelGroup, TraceTables
from core.units import bytes_text, us_text

if TYPE_CHECKING:  # a job's ranks are read where their findings are made, not by a single trace's import
    from core.rows.trace_ranks import Rank, RankTables

MAX_FINDINGS = 3
MIN_SPAN_SHARE = 0.05  # a trace finding explains at least this share of the span
BEFORE_RECORDING = -2  # the snapshot analysis' site of blocks allocated before recording (no stack)
OTHERS = "others"  # what a straggler's figures are held against: the other ranks (a run stored before: every rank)

CRITICAL, WARNING, INFO = "critical", "warning", "info"
# what failed or holds the job back opens the list: an out-of-memory, a hang, the rank the others wait for; what only
# limits the reading is a note; every other kind is time or memory spent (stored findings carry no severity)
SEVERITY = {"oom": CRITICAL, "hang": CRITICAL, "straggler": CRITICAL, "arrival": CRITICAL} | dict.fromkeys(
    ("no_hang", "ranks_without_dump", "wrapped", "no_trace", "short_trace"), INFO
)
_STORED = ("kind", "text", "value", "unit", "time_us", "cause")


@dataclass(frozen=True)
class Finding:
    """One thing an import says first, in plain words, with the number it rests on (a reader, a test or a script can
    check it). ``text`` is ``what`` + ``why`` + ``advice``: each part carries the words joining it to the one before
    (": fragmentation — …", " — try: …"); a finding read back from a stored run has its whole sentence in ``what``."""

    kind: str
    what: str  # what was found, with its figures
    value: float  # how much: the number the sentence rests on, in ``unit``
    unit: str  # "%", "us", "bytes" or "ranks"
    why: str = ""  # the cause, where the analysis names one
    advice: str = ""  # what to try, where the file supports it
    time_us: float | None = None  # the time it explains (stored): a trace's findings are ranked by it
    cause: str | None = None  # stored: one finding a cause is said
    weight: float | None = None  # not stored: what ranks it when it has no time (a snapshot's bytes, a rank's share)
    extra: Mapping[str, Any] = field(default_factory=dict)  # stored keys of one kind ("rank", "reasons", "count")

    @property
    def text(self) -> str:
        return self.what + self.why + self.advice

    @property
    def severity(self) -> str:
        return SEVERITY.get(self.kind, WARNING)

    def to_dict(self) -> dict:
        """The stored form, with the keys and order runs have always had."""
        out = {"kind": self.kind, "text": self.text, "value": self.value, "unit": self.unit}
        out |= {"time_us": self.time_us} if self.time_us is not None else {}
        return out | dict(self.extra) | ({"cause": self.cause} if self.cause is not None else {})

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Finding:
        extra = {k: v for k, v in d.items() if k not in _STORED}
        return cls(d["kind"], d["text"], d["value"], d["unit"], time_us=d.get("time_us"), cause=d.get("cause"),
                   extra=extra)  # fmt: skip


def stored_findings(meta: Mapping[str, Any]) -> list[Finding]:
    """A stored run's findings, typed (none for a run without)."""
    return [Finding.from_dict(f) for f in meta.get("findings") or []]


def _measure(f: Finding) -> float | None:
    return f.weight if f.weight is not None else f.time_us


def ranked(findings: Iterable[Finding], cap: int = MAX_FINDINGS) -> list[Finding]:
    """The findings an import opens with, for every kind of file: a critical one first, then the most time (or bytes,
    or share: ``weight``) first, one per ``cause`` (the one ranked first), at most ``cap``; a finding without a
    measure keeps its place after those with one."""
    found = list(findings)
    order = sorted(range(len(found)), key=lambda i: (found[i].severity != CRITICAL, _measure(found[i]) is None,
                                                    -(_measure(found[i]) or 0.0), i))  # fmt: skip
    said: set[str] = set()
    out = []
    for f in (found[i] for i in order):
        if f.cause in said:  # one finding a cause: the host's data loading before and between the kernels
            continue
        said |= {f.cause} if f.cause else set()
        out.append(f)
    return out[:cap]


def to_store(findings: Iterable[Finding]) -> list[dict]:
    """What a run stores: the findings ranked and capped, each in its stored form."""
    return [f.to_dict() for f in ranked(findings)]


def _idle(m: dict, who: str) -> tuple[float, Finding] | None:
    span = m.get("span_us") or 0.0
    if not span:
        return None
    share = m["idle_us"] / span
    # idle by cause on the device timeline (the union of its streams), so the causes add up to the idle; HTA's
    # per-stream sums (which can add up to several times the idle) are not what this says
    causes = m.get("idle_causes") or {k: m[k] for k in ("host_wait_us", "kernel_wait_us", "other_wait_us") if k in m}
    gaps = sum(causes.values())
    host = (
        f", {causes['host_wait_us'] / gaps:.1%} of it waiting on the host (the next activity's launch call came "
        "after the GPU ran dry)"
        if gaps
        else ""
    )
    text = f"{who}GPU idle {share:.1%} of the span ({us_text(m['idle_us'])} of {us_text(span)}){host}"
    return share, Finding("idle", text, 100 * share, "%", time_us=m["idle_us"])


def _exposed(m: dict, who: str) -> tuple[float, Finding] | None:
    span, exposed = m.get("span_us") or 0.0, m.get("exposed_communication_us") or 0.0
    if not span or not exposed:
        return None
    share = exposed / span
    text = (
        f"{who}exposed communication {share:.1%} of the span ({us_text(exposed)}): collectives no compute kernel hides"
    )
    return share, Finding("exposed_communication", text, 100 * share, "%", time_us=exposed)


def _top_group(m: dict, groups: Sequence[KernelGroup]) -> tuple[float, Finding] | None:
    launched = [g for g in groups if g.count]
    span = m.get("span_us") or 0.0
    if not launched or not span:
        return None
    top = max(launched, key=lambda g: g.total_us)
    if top.group == "memory":  # copies and memsets are GPU time, not kernel time
        share = top.share
        what = f"copies and memsets take {share:.1%} of GPU time (kernels + copies + memsets, summed)"
    else:  # a kernel group: of the kernel time, the sum of kernel durations (no copies or memsets)
        share = top.kernel_share
        if share is None:  # a row stored before kernel shares: the kernel time is the meta's
            share = top.total_us / m["kernel_time_us"] if m.get("kernel_time_us") else 0.0
        what = f"{top.group} kernels take {share:.1%} of kernel time (kernel durations summed)"
    text = f"{what} ({us_text(top.total_us)} over {top.count:,} launches)"
    found = Finding("kernel_group", text, 100 * share, "%", time_us=top.total_us, cause=f"{top.group} kernels")
    return min(top.total_us / span, 1.0), found


def trace_findings(meta: dict, tables: TraceTables) -> list[Finding]:
    """Findings of one imported trace (its busiest GPU), largest share of the span first."""
    if not meta.get("gpu_activities"):
        return []
    ranked = [c for c in (_idle(meta, ""), _exposed(meta, ""), _top_group(meta, tables.groups)) if c is not None]
    ranked = [c for c in ranked if c[0] >= MIN_SPAN_SHARE]
    return [f for _, f in sorted(ranked, key=lambda c: -c[0])][:MAX_FINDINGS]


def _where_extra(s: dict, n_ranks: int) -> str:
    """The kernel group and the operator holding most of the straggler's extra time, against the margin it
    explains (stored runs from before each breakdown have none)."""
    out = ""
    group = next(iter(s.get("groups") or []), None)
    if group is not None and group["extra_us"] > 0:
        out += f"; by kernel group, {group['group']} {group['extra_us'] / 1e3:+,.1f} of {s['margin_us'] / 1e3:+,.1f} ms"
    op = next(iter(s.get("ops") or []), None)
    if op is not None and op["extra_us"] > 0:
        out += f"; by operator, {op['op']} {op['extra_us'] / 1e3:+,.1f} ms"
    return out + f" (summed durations against {against_text(s.get('against'), n_ranks)})" if out else ""


def against_text(against: str | None, n_ranks: int) -> str:
    """Whom a straggler's figures are held against, as a sentence says it: "the other rank's" (two ranks), "the
    other ranks' median", or, for a run stored when the median took every rank (``against`` None), "the median
    rank's"."""
    if against != OTHERS:
        return "the median rank's"
    return "the other rank's" if n_ranks == 2 else "the other ranks' median"


def by_kernel_text(count: int) -> str:
    """How many collectives were matched across the ranks by kernel name, as every text counting them says it."""
    return f"{count:,} by kernel name and stream order"


def _arrivals(meta: dict, rank_rows: Sequence[Rank]) -> list[Finding]:
    """The rank the others waited for at the collectives matched across the ranks, when the waits are at least
    :data:`MIN_SPAN_SHARE` of the ranks' communication time (stored runs from before have none)."""
    a = meta.get("arrivals") or {}
    communication = sum(r.communication_us for r in rank_rows)
    if not a.get("matched") or not communication or a["waited_us"] < MIN_SPAN_SHARE * communication:
        return []
    share = a["waited_us"] / communication
    by_kernel = a.get("matched_by_kernel", 0)
    how = f" ({by_kernel_text(by_kernel)})" if by_kernel else ""
    text = (
        f"rank {a['last_rank']} arrives last at {a['last_arrivals']:,} of {a['matched']:,} collectives matched across "
        f"the ranks{how}; the ranks waited {us_text(a['waited_us'])} in all for the last to arrive ({share:.1%} of "
        "their communication time): waiting for a peer, not moving data"
    )
    return [Finding("arrival", text, 100 * share, "%")]


def _verdict(meta: dict, rank_rows: Sequence[Rank]) -> Finding | None:
    """The judgement of which rank holds the job back (``meta["verdict"]``), its evidence in one sentence: when it
    arrives last at the collectives, whether its host or its compute explains it, and the compute margin said as
    noise where it is one. None where no rank stands out (or the run predates the judgement)."""
    v, s = meta.get("verdict"), meta["straggler"]
    if not v or v.get("rank") is None or len(rank_rows) < 2:
        return None
    rank, reasons, said = v["rank"], v["reasons"], []
    others = against_text(s.get("against"), len(rank_rows))
    communication = sum(r.communication_us for r in rank_rows)
    share = v["waited_us"] / communication if communication else 0.0
    if "arrives_last" in reasons:
        by_kernel = (meta.get("arrivals") or {}).get("matched_by_kernel", 0)
        how = f" ({by_kernel_text(by_kernel)})" if by_kernel else ""
        said.append(
            f"it arrives last at {v['last_arrivals']:,} of {v['matched']:,} collectives matched across the ranks{how} "
            f"(the ranks waited {us_text(v['waited_us'])} in all for the last to arrive, {share:.1%} of their "
            "communication)"
        )
    if "host_bound" in reasons:
        cause = v.get("host_cause")
        held = f"; most: {cause['cause']}" + (f", {cause['op']}" if cause.get("op") else "") if cause else ""
        said.append(
            f"its GPU waits on its host {v['host_wait_share']:.1%} of its span against {others} "
            f"{v['median_host_wait_share']:.1%} (host-bound{held})"
        )
    pct = v.get("compute_pct")
    if "compute" in reasons:
        said.append(
            f"its compute is {s['margin_pct']:+.1f}% over {others} ({us_text(s['compute_us'])} against "
            f"{us_text(s['median_compute_us'])})" + _where_extra(s, len(rank_rows))
        )
    elif pct is not None:
        said.append(f"its compute is within {abs(pct):.1f}% of {others}: not the cause")
    text = f"rank {rank} holds the job back: " + "; ".join(said)
    time = v["waited_us"] if "arrives_last" in reasons else s["margin_us"] if "compute" in reasons else 0.0
    if "host_bound" in reasons and not time:
        time = next((r.host_wait_us for r in rank_rows if r.rank == rank), 0.0)
    # the number the sentence rests on first: the others' wait, else the compute margin, else the host's share
    value = (
        100 * share
        if "arrives_last" in reasons
        else s["margin_pct"]
        if "compute" in reasons
        else 100 * (v["host_wait_share"] or 0.0)
    )
    return Finding("straggler", text, value, "%", time_us=time, extra={"rank": rank, "reasons": reasons})


def ranks_findings(meta: dict, tables: RankTables) -> list[Finding]:
    """Findings of a job's ranks (``tables``: the run's): the one judgement of the rank holding the job back, with
    its evidence in one sentence (runs stored before it: the straggler by compute and the rank the others waited
    for, apart), then the worst rank's idle or exposed communication — with how long its collectives waited for
    the last rank, where they were matched; a rank the judgement named is not said twice."""
    rank_rows = tables.ranks
    waited = {a.rank: a.waited_us for a in tables.arrivals}
    out = []
    s = meta["straggler"]
    verdict = _verdict(meta, rank_rows)
    reasons = verdict.extra["reasons"] if verdict is not None else []
    if verdict is not None:
        out.append(verdict)
    elif "verdict" not in meta and len(rank_rows) > 1 and s["margin_us"] > 0:  # a run stored before the judgement
        out.append(
            Finding(
                "straggler",
                f"rank {s['rank']} is the straggler: {s['margin_pct']:+.1f}% compute over the median rank "
                f"({us_text(s['compute_us'])} against {us_text(s['median_compute_us'])}, {us_text(s['margin_us'])} more)"
                + _where_extra(s, len(rank_rows)),
                s["margin_pct"],
                "%",
            )
        )
    if "arrives_last" not in reasons:
        out += _arrivals(meta, rank_rows)
    named = verdict.extra["rank"] if verdict is not None and "host_bound" in reasons else None
    for kind in (_idle, _exposed):
        found = [
            (c, r.rank)
            for r in rank_rows
            if (c := kind(r.to_row(), f"rank {r.rank}: ")) is not None and not (kind is _idle and r.rank == named)
        ]
        if found and (top := max(found, key=lambda c: c[0][0]))[0][0] >= MIN_SPAN_SHARE:
            (share, finding), rank = top
            why = (
                f"; its collectives waited {us_text(waited[rank])} in all for the last rank to arrive (rank "
                f"{meta['arrivals']['last_rank']} arrives last most often)"
                if kind is _exposed and waited.get(rank)
                else ""
            )
            out.append(replace(finding, why=why, weight=share))  # the worst rank's share of its span ranks it
    return out


def _oom(o: dict) -> Finding:
    """What failed, from the figures the analysis keeps (``meta["oom"]``), why, and what to try."""
    pool = o["pool"]
    text = (
        f"out of memory: a request of {bytes_text(o['requested_bytes'])} ({pool} pool) failed with "
        f"{bytes_text(o['device_free_bytes'])} free on the device and {bytes_text(o['reserved_unallocated_bytes'])} "
        f"reserved but unallocated, whose largest free block is {bytes_text(o['largest_free_block_bytes'][pool])}"
    )
    from core.rows.snapshot import oom_cause  # here: a trace's import has no snapshot rows to read

    smaller = "; make less live at once (a smaller batch)"
    cause = oom_cause(o)
    if cause == "fragmentation" and not o["expandable_segments"]:
        why = ": fragmentation — enough is reserved but no block is large enough"
        advice = "; try PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"
    elif cause == "fragmentation":
        why, advice = ": fragmentation, with expandable segments already on", smaller
    elif cause == "process limit":
        why = (
            f": not the device's memory — it had room for the {bytes_text(o['segment_request_bytes'])} the "
            "allocator would ask it for, so a limit of this process refused it "
            "(torch.cuda.set_per_process_memory_fraction, or another cap) below the "
            f"{bytes_text(o['reserved_bytes'])} reserved + {bytes_text(o['segment_request_bytes'])}"
        )
        advice = "; raise the limit, or make less live at once"
    else:
        why, advice = ": not fragmentation — too little is free", smaller
    where = f", at {o['site']}" if o.get("site") else ""  # the site closes the sentence
    return Finding("oom", text, o["requested_bytes"], "bytes", why=why, advice=advice + where)


def _largest_line(sites: list[dict]) -> dict | None:
    """The line of code holding the most bytes among a stored top list's sites with a stack. A site is one
    line: rows with the same label (a run stored when stacks differing in their C++ frames were separate
    rows) add up, so the finding says what the page's table and the CLI say of that line."""
    lines: dict[str, dict] = {}
    for s in sites:
        if s["site"] >= 0:
            row = lines.setdefault(s["label"], {"label": s["label"], "bytes": 0, "blocks": 0})
            row["bytes"] += s["bytes"]
            row["blocks"] += s["blocks"]
    return max(lines.values(), key=lambda r: r["bytes"], default=None)


SHORT_TRACE = 1  # torch 2.0's _record_memory_history kept this many trace entries by default (trace_alloc_max_entries)


def _short_trace(meta: dict) -> Finding | None:
    """A torch 2.0 snapshot whose trace kept one entry while its blocks' stacks say recording was on: the state at
    the dump, with a longer trace buffer to try, not blocks "from before recording" that no stack names."""
    n, named = meta.get("trace_events") or 0, meta.get("baseline_with_stack_bytes") or 0
    if not meta.get("legacy_blocks") or n > SHORT_TRACE or not named:
        return None
    text = (
        f"the trace kept {n:,} event{'s' * (n != 1)} while recording was on (the blocks' own stacks name the sites of "
        f"{bytes_text(named)}): torch 2.0's _record_memory_history keeps 1 trace entry by default — raise "
        "trace_alloc_max_entries (max_entries in newer torch) to see when they were allocated; what is shown is the "
        "state at the time of the snapshot, not a peak"
    )
    return _held("short_trace", text, named)


def snapshot_findings(meta: dict) -> list[Finding]:
    """Findings of an imported memory snapshot: an out-of-memory first, then the most bytes first."""
    oom = [_oom(meta["oom"])] if meta.get("oom") else []
    peak = meta.get("peak_allocated_bytes") or 0
    if not peak:
        return oom
    short = _short_trace(meta)
    traced = bool(meta.get("trace_events")) and short is None
    when = "at the peak" if traced else "at the time of the snapshot"
    candidates = []
    site = _largest_line(meta.get("top_sites_at_peak") or [])
    if site:
        candidates.append(
            _held(
                "site",
                f"the largest allocation site {when} is {site['label']}: {bytes_text(site['bytes'])} "
                f"({site['bytes'] / peak:.1%} of the {bytes_text(peak)} {'peak' if traced else 'allocated'}) in "
                f"{site['blocks']:,} block(s)",
                site["bytes"],
            )
        )
    if short is not None:
        candidates.append(short)
    elif not traced:
        candidates.append(
            _held(
                "no_trace",
                f"no trace was recorded: only the state at the time of the snapshot is known ({bytes_text(peak)} "
                f"allocated in {meta.get('baseline_allocated_blocks', 0):,} block(s)), not when or in what order it "
                "was allocated",
                peak,
                "; record with torch.cuda.memory._record_memory_history() to see that",
            )
        )
    elif before := meta.get("baseline_allocated_bytes"):
        candidates.append(
            _held(
                "before_recording",
                f"{bytes_text(before)} was allocated before recording began ({before / peak:.1%} of the peak): "
                "no stack names it",
                before,
                "; record earlier to see whose it is",
            )
        )
    if gap := meta.get("fragmentation_at_peak_bytes"):
        reserved = meta.get("reserved_at_peak_bytes") or meta.get("peak_reserved_bytes") or 0
        share = f" ({gap / reserved:.1%} of {bytes_text(reserved)} reserved)" if reserved else ""
        candidates.append(
            _held(
                "reserved_gap",
                f"reserved − allocated {when} is {bytes_text(gap)}{share}: memory the allocator holds that no "
                "tensor uses",
                gap,
            )
        )
    return oom + candidates


def _held(kind: str, what: str, nbytes: float, advice: str = "") -> Finding:
    """A snapshot's finding about bytes held: the bytes rank it."""
    return Finding(kind, what, nbytes, "bytes", advice=advice, weight=nbytes)


def finding_lines(meta: dict) -> list[str]:
    """The findings as the first lines of a text report."""
    return [f"finding: {f.text}" for f in stored_findings(meta)]

"""What a memory snapshot says: the allocated and reserved timeline, the peak and its stack, who holds
memory at any moment, categories inferred from stacks, segment maps, and what was there before recording.

The replay is the allocator's own bookkeeping, in the sizes the trace records (requested sizes, as
memory_viz draws them; the allocator rounds each block up to a multiple of 512 bytes, so its own
``memory_allocated`` can be slightly higher): ``alloc`` adds a block's size to *allocated* and
``free_completed`` takes it away (``free_requested`` only marks it pending, as ``memory_allocated`` does);
``segment_alloc``/``segment_map`` add to *reserved*, ``segment_free``/``segment_unmap`` take away.

**Baseline.** Recording starts late (or its ring buffer drops the oldest events), so the trace does not
explain everything: a block the snapshot's ``segments`` show as active at the end that no live traced
allocation accounts for, and a block the trace frees without having allocated it, were there before the
first event. Their sum is the allocated baseline; the timeline starts there instead of at zero. A block from the segments is
counted at its ``requested_size``, like every traced block (its rounded-up block size is reported apart). The
reserved baseline is the segments' total at the end minus the trace's net segment change.

**Categories** come from each allocation's Python stack and lifetime, by the rules in :data:`RULES`
(first match wins). An allocation no rule matches is ``unknown`` — never guessed — and every rule
reports how many allocations and bytes it classified, so a reader can judge it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from core.arrays import distinct
from core.memory.segments import segment_view
from core.units import MIB, bytes_text
from core.workload.snapshot.frames import SEP, Frame, frame_text, is_python_frame, parse_frame, shown_stack, site_label
from core.workload.snapshot.reader import CODE, OLD_BLOCKS, DeviceTrace, Snapshot

SMALL_REQUEST = MIB  # a request up to this size is served from the allocator's small pool, a larger one from its large
# What the allocator asks CUDA for to serve a request it has no free block for (torch's get_allocation_size):
# 2 MiB for the small pool, 20 MiB for a large request under 10 MiB, else the request rounded up to 2 MiB.
SMALL_SEGMENT, LARGE_SEGMENT, MIN_LARGE_ALLOC, ROUND_LARGE = 2 * MIB, 20 * MIB, 10 * MIB, 2 * MIB
CATEGORIES = ("parameters", "gradients", "optimizer_state", "activations", "temporaries", "workspace", "unknown")
CAT = {name: i for i, name in enumerate(CATEGORIES)}
NO_CATEGORY = 255

# (rule, category, what it means) — the order is the order they are tried.
RULES = (
    ("no-stack", "unknown", "no Python stack was recorded for the allocation"),
    (
        "library-workspace",
        "workspace",
        "a cuBLAS/cuBLASLt workspace made for a handle (at::cuda::getNewWorkspace, getCUDABlasLtWorkspace…): "
        "kept for the process's life, whichever phase first needed it",
    ),
    (
        "model-setup",
        "parameters",
        "a stack through module construction or moving a module "
        "(Module.__init__/_apply/to/cuda, reset_parameters, load_state_dict, nn.Parameter)",
    ),
    ("optimizer-kept", "optimizer_state", "a torch/optim stack, still alive when the optimizer step is over"),
    ("optimizer-scratch", "temporaries", "a torch/optim stack, freed within the optimizer step"),
    ("backward-kept", "gradients", "an autograd backward stack, still alive when backward is over"),
    ("backward-scratch", "temporaries", "an autograd backward stack, freed during backward"),
    (
        "forward-saved",
        "activations",
        "a forward (Module.__call__/forward) stack, still alive when the next backward begins",
    ),
    ("forward-scratch", "temporaries", "a forward stack, freed before the next backward"),
    ("forward-no-backward", "unknown", "a forward stack with no backward recorded after it, still alive"),
    ("no-match", "unknown", "a stack none of the rules recognise"),
)
RULE = {name: i for i, (name, _, _) in enumerate(RULES)}

# The kind of code a stack passes through; checked in this order (an optimizer step runs forward code too).
KIND_NONE, KIND_SETUP, KIND_FORWARD, KIND_BACKWARD, KIND_OPTIMIZER, KIND_WORKSPACE = range(6)
_SETUP_NAMES = {
    "_apply",
    "to",
    "cuda",
    "load_state_dict",
    "_load_from_state_dict",
    "reset_parameters",
    "to_empty",
    "half",
    "bfloat16",
    "float",
    "type",
}
_BACKWARD_NAMES = {"_engine_run_backward", "run_backward"}
# The C++ frame of a library workspace's allocation (only stacks recorded with C++ frames have it): a cuBLAS
# handle's workspace lives as long as the handle, so the phase that first called a GEMM says nothing of it.
_WORKSPACE = re.compile(r"at::cuda::(getNewWorkspace|getCUDABlasLtWorkspace|getCurrentCUDABlasHandle)\b")


def stack_kind(stack: tuple[Frame, ...]) -> int:
    """Which phase of training a stack belongs to, from its frames (Windows paths included). Stacks with C++
    frames (stacks="all") read the same: their Python frames are there too, and a stack on the autograd
    engine's thread, which has no Python frame, is backward by its ``torch::autograd::Engine`` frames."""
    kinds = set()
    for filename, _, name in stack:
        path = SEP.sub("/", filename)
        if _WORKSPACE.match(name):
            kinds.add(KIND_WORKSPACE)
        elif "/torch/optim/" in path:
            kinds.add(KIND_OPTIMIZER)
        elif (
            name in _BACKWARD_NAMES
            or "torch::autograd::Engine::" in name
            or (
                name == "backward"
                and (path.endswith("torch/autograd/__init__.py") or path.endswith("torch/_tensor.py"))
            )
        ):
            kinds.add(KIND_BACKWARD)
        elif (
            (path.endswith("torch/nn/modules/module.py") and name in _SETUP_NAMES)
            or name == "reset_parameters"
            or path.endswith("torch/nn/parameter.py")
            or (name == "__init__" and "/torch/nn/modules/" in path)
        ):
            kinds.add(KIND_SETUP)
        elif name == "_call_impl" or name == "forward":
            kinds.add(KIND_FORWARD)
    for kind in (KIND_WORKSPACE, KIND_OPTIMIZER, KIND_BACKWARD, KIND_SETUP, KIND_FORWARD):
        if kind in kinds:
            return kind
    return KIND_NONE


def time_binned(t: np.ndarray, values: np.ndarray, max_points: int) -> np.ndarray:
    """Sorted indices of at most ``max_points`` of a step series over time ``t`` (sorted): equal spans of time, each
    keeping its first, last, highest and lowest point (M4, as a chart's pixel columns need), so a drop is drawn
    where it happens however few events surround it; every point where there are no more than ``max_points``."""
    n = len(values)
    if n <= max_points:
        return np.arange(n)
    bins = max(1, max_points // 4)
    span = float(t[-1] - t[0]) or 1.0
    which = np.minimum(((t - t[0]) / span * bins).astype(np.int64), bins - 1)
    starts = np.flatnonzero(np.r_[True, which[1:] != which[:-1]])  # each non-empty bin's first point
    ends = np.r_[starts[1:], n]
    # by bin, then value, then the later point first: a bin's highest is the first point to reach it (the peak's)
    order = np.lexsort((-np.arange(n), values, np.repeat(np.arange(len(starts)), ends - starts)))
    lowest, highest = order[starts], order[ends - 1]
    return distinct(np.concatenate([starts, ends - 1, lowest, highest]))


def _next_index(positions: np.ndarray, after: np.ndarray, default: int) -> np.ndarray:
    """For each value of ``after``, the first of the sorted ``positions`` greater than it (else ``default``)."""
    k = np.searchsorted(positions, after, side="right")
    out = np.full(len(after), default, dtype=np.int64)
    found = k < len(positions)
    out[found] = positions[k[found]]
    return out


def _pair(first_idx: np.ndarray, second_idx: np.ndarray, addr: np.ndarray, n: int):
    """Match each event of the first kind (an alloc) with the next event at the same address if that is of the
    second kind (its free). Returns (end per first event — ``n`` if not closed —, mask of the second events
    that close nothing the trace opened: blocks from before recording)."""
    idx = np.concatenate([first_idx, second_idx]).astype(np.int64)
    is_first = np.concatenate([np.ones(len(first_idx), bool), np.zeros(len(second_idx), bool)])
    order = np.lexsort((idx, addr[idx]))
    s_idx, s_first, s_addr = idx[order], is_first[order], addr[idx][order]
    match = (s_addr[1:] == s_addr[:-1]) & s_first[:-1] & ~s_first[1:]  # k opens, k + 1 closes it
    end_sorted = np.full(len(idx), n, dtype=np.int64)
    end_sorted[:-1][match] = s_idx[1:][match]
    orphan_sorted = ~s_first
    orphan_sorted[1:][match] = False
    ends, orphans = np.empty(len(idx), np.int64), np.empty(len(idx), bool)
    ends[order] = end_sorted
    orphans[order] = orphan_sorted
    return ends[: len(first_idx)], orphans[len(first_idx) :]


@dataclass
class SnapshotAnalysis:
    """The replay of one device. Points: 0 is before the first event, point k is after event k-1. Blocks count
    in requested sizes; the segment map draws a block from before recording at its block size."""

    snapshot: Snapshot
    device: int
    trace: DeviceTrace
    time_us: np.ndarray  # per point
    has_times: bool
    allocated: np.ndarray  # per point
    reserved: np.ndarray
    delta: np.ndarray  # allocated change of each event
    event_category: np.ndarray  # category of the block each event allocates or frees (NO_CATEGORY: none)
    alloc_idx: np.ndarray
    alloc_end: np.ndarray  # event index of its free_completed, n if alive at the end
    alloc_requested_end: np.ndarray  # event index of its free_requested, n if none
    alloc_rule: np.ndarray
    baseline: dict  # addr, size, site, end (event index), rule arrays of blocks from before recording
    baseline_allocated_bytes: int
    baseline_reserved_bytes: int
    end_state: dict
    notes: list[str] = field(default_factory=list)

    @property
    def n_events(self) -> int:
        return len(self.trace)

    @property
    def peak_point(self) -> int:
        return int(np.argmax(self.allocated))

    def points_between(self, t0_ms: float | None, t1_ms: float | None, max_points: int) -> np.ndarray:
        """At most ``max_points`` points inside a time window (ms since the first event): what a zoomed chart draws,
        re-read from the whole trace. The window is cut into equal spans of time, and each keeps its first, last,
        highest and lowest allocated (:func:`time_binned`): drawn as steps, every chart over time then drops when
        memory drops, where bins of equal event counts let one bin span a quiet stretch (a snapshot's last 13 ms
        without an event) and a chart drew its peak held, or a slope, across it."""
        t = self.point_time_ms(np.arange(len(self.allocated)))
        lo = 0 if t0_ms is None else int(np.searchsorted(t, t0_ms, side="left"))
        hi = len(t) if t1_ms is None else int(np.searchsorted(t, t1_ms, side="right"))
        lo, hi = min(lo, len(t) - 1), max(hi, lo + 1)
        return lo + time_binned(t[lo:hi], self.allocated[lo:hi], max_points)

    def point_at_ms(self, t_ms: float) -> int:
        """The last point at or before a time (ms since the first event)."""
        t = self.point_time_ms(np.arange(len(self.allocated)))
        return max(0, int(np.searchsorted(t, t_ms, side="right")) - 1)

    def point_time_ms(self, points) -> np.ndarray:
        """Milliseconds since the first event (or the event number where the snapshot has no times)."""
        points = np.asarray(points)
        if not self.has_times:
            return points.astype(float)
        return (self.time_us[points] - self.time_us[0]) / 1000.0

    def site_stack(self, site: int) -> tuple[Frame, ...]:
        return self.snapshot.sites[site] if site >= 0 else ()

    # -- who holds memory at a point ----------------------------------------------------------------

    def live_at(self, point: int) -> dict:
        """Blocks alive at a point: (size, site, category, baseline?) arrays."""
        live = (self.alloc_idx < point) & (point <= self.alloc_end)
        b = self.baseline
        b_live = point <= b["end"]
        sizes = np.concatenate([self.trace.size[self.alloc_idx[live]], b["size"][b_live]])
        block_sizes = np.concatenate([self.trace.size[self.alloc_idx[live]], b.get("block_size", b["size"])[b_live]])
        sites = np.concatenate([self.trace.site[self.alloc_idx[live]], b["site"][b_live]])
        rules = np.concatenate([self.alloc_rule[live], b["rule"][b_live]])
        addrs = np.concatenate([self.trace.addr[self.alloc_idx[live]], b["addr"][b_live]])
        pending = np.concatenate([self.alloc_requested_end[live] < point, np.zeros(int(b_live.sum()), bool)])
        before = np.concatenate([np.zeros(int(live.sum()), bool), np.ones(int(b_live.sum()), bool)])
        return {
            "size": sizes,
            "block_size": block_sizes,
            "site": sites,
            "rule": rules,
            "addr": addrs,
            "pending": pending,
            "baseline": before,
        }

    def site_name(self, site: int) -> str:
        """The one line that names a site (:func:`site_label`); blocks allocated before recording without a
        stack (``-2``) and blocks with none recorded (``-1``) by what they are."""
        if site >= 0:
            return site_label(self.site_stack(site))
        return "(allocated before recording, no stack)" if site == -2 else "(no stack recorded)"

    def top_sites(self, point: int, k: int = 20) -> list[dict]:
        """The sites holding the most bytes at a point, largest first. A site is one line of the user's code
        (:func:`site_label`): stacks that differ only below it (C++ frames, torch's own) are the same site, so
        the bytes and blocks here are every block that line holds; ``stack`` is its largest stack's, and
        ``stacks`` how many recorded stacks it joins."""
        live = self.live_at(point)
        if not len(live["size"]):
            return []
        keys = np.where(live["baseline"] & (live["site"] < 0), -2, live["site"]).astype(np.int64)
        stacks, by_stack = np.unique(keys, return_inverse=True)
        stack_bytes = np.bincount(by_stack, weights=live["size"].astype(float))
        names: dict[str, int] = {}
        group_of = np.array([names.setdefault(self.site_name(int(s)), len(names)) for s in stacks], dtype=np.int64)
        inverse = group_of[by_stack]
        totals = np.bincount(inverse, weights=live["size"].astype(float))
        counts = np.bincount(inverse)
        before = np.bincount(inverse, weights=live["baseline"].astype(float))
        labels = list(names)
        out = []
        for j in np.argsort(-totals, kind="stable")[:k]:
            members = np.flatnonzero(group_of == j)
            site = int(stacks[members[np.argmax(stack_bytes[members])]])
            stack = self.site_stack(site) if site >= 0 else ()
            rules = live["rule"][inverse == j]
            rule = RULES[int(np.bincount(rules).argmax())][0] if len(rules) else "no-stack"
            out.append(
                {
                    "site": site,
                    "label": labels[j],
                    "bytes": int(totals[j]),
                    "blocks": int(counts[j]),
                    "before_recording_blocks": int(before[j]),
                    "category": dict((r[0], r[1]) for r in RULES)[rule],
                    "rule": rule,
                    "stack": [frame_text(f) for f in shown_stack(stack)],
                    "stacks": len(members),
                }
            )
        return out

    def categories_at(self, point: int) -> dict[str, int]:
        live = self.live_at(point)
        cats = np.array([CAT[RULES[r][1]] for r in range(len(RULES))])[live["rule"]] if len(live["rule"]) else []
        totals = np.bincount(
            np.asarray(cats, dtype=np.int64), weights=live["size"].astype(float), minlength=len(CATEGORIES)
        )
        return {name: int(totals[i]) for i, name in enumerate(CATEGORIES)}

    def rule_counts(self) -> list[dict]:
        """How many allocations (traced and from before recording) each rule classified, and their bytes."""
        sizes = np.concatenate([self.trace.size[self.alloc_idx], self.baseline["size"]]).astype(float)
        rules = np.concatenate([self.alloc_rule, self.baseline["rule"]]).astype(np.int64)
        counts = np.bincount(rules, minlength=len(RULES))
        total = np.bincount(rules, weights=sizes, minlength=len(RULES))
        return [
            {
                "rule": name,
                "category": cat,
                "means": means,
                "allocations": int(counts[i]),
                "bytes_allocated": int(total[i]),
            }
            for i, (name, cat, means) in enumerate(RULES)
        ]

    def category_series(self, points: np.ndarray) -> dict[str, np.ndarray]:
        """Bytes per category at the given points (sorted), from the baseline and every event's change."""
        start = np.bincount(
            self.baseline_category_at_start(), weights=self.baseline["size"].astype(float), minlength=len(CATEGORIES)
        )[: len(CATEGORIES)]
        cats = self.event_category
        changes = cats != NO_CATEGORY
        idx = np.flatnonzero(changes)
        out = {}
        for c, name in enumerate(CATEGORIES):
            sel = idx[cats[idx] == c]
            cum = np.concatenate([[0], np.cumsum(self.delta[sel])])
            k = np.searchsorted(sel, np.asarray(points) - 1, side="right")  # events before the point
            out[name] = start[c] + cum[k]
        return out

    def baseline_category_at_start(self) -> np.ndarray:
        return np.array([CAT[RULES[r][1]] for r in self.baseline["rule"]], dtype=np.int64)

    # -- segments at a point ------------------------------------------------------------------------

    def segments_at(self, point: int) -> list[dict]:
        """The device's segments at a point with their blocks (allocated, pending free, inactive), in the
        form :func:`core.memory.segments.segment_view` reads."""
        tr = self.trace
        n = self.n_events
        seg_open = np.flatnonzero(np.isin(tr.action, (CODE["segment_alloc"], CODE["segment_map"])))
        seg_close = np.flatnonzero(np.isin(tr.action, (CODE["segment_free"], CODE["segment_unmap"])))
        ends, orphans = _pair(seg_open, seg_close, tr.addr, n)
        pieces = []  # (address, size, type, expandable)
        traced_alive = set()
        for i, end in zip(seg_open, ends):
            if i < point <= end:
                pieces.append((int(tr.addr[i]), int(tr.size[i]), "", tr.action[i] == CODE["segment_map"]))
            if end == n:
                traced_alive.add(int(tr.addr[i]))
        for j in seg_close[orphans]:
            if point <= j:
                pieces.append((int(tr.addr[j]), int(tr.size[j]), "", tr.action[j] == CODE["segment_unmap"]))
        for s in self.snapshot.segments:
            if s.device == self.device and s.address not in traced_alive:
                pieces.append((s.address, s.total_size, s.segment_type, s.expandable))
        by_addr = {}
        for address, size, kind, expandable in pieces:
            by_addr.setdefault(address, (address, size, kind, expandable))
        segs = sorted(by_addr.values())
        starts = np.array([s[0] for s in segs], dtype=np.uint64)
        live = self.live_at(point)
        order = np.argsort(live["addr"])
        where = np.searchsorted(starts, live["addr"][order], side="right") - 1
        blocks: dict[int, list] = {}
        for j, pos in zip(order, where):
            if pos < 0:
                continue
            address, size, _, _ = segs[pos]
            a = int(live["addr"][j])
            if a < address + size:
                state = "active_pending_free" if live["pending"][j] else "active_allocated"
                block = {"address": a, "size": int(live["block_size"][j]), "state": state}
                blocks.setdefault(pos, []).append(block)
        out = []
        for pos, (address, size, kind, expandable) in enumerate(segs):
            filled, cursor = [], address
            for b in blocks.get(pos, []):
                if b["address"] > cursor:
                    filled.append({"address": cursor, "size": b["address"] - cursor, "state": "inactive"})
                filled.append(b)
                cursor = max(cursor, b["address"] + b["size"])
            if cursor < address + size:
                filled.append({"address": cursor, "size": address + size - cursor, "state": "inactive"})
            out.append(
                {
                    "address": address,
                    "total_size": size,
                    "segment_type": kind or ("small" if size <= 2 * MIB else "large"),
                    "is_expandable": bool(expandable),
                    "blocks": filled,
                }
            )
        return out

    def segment_map_at(self, point: int, max_segments: int = 128, max_blocks: int = 20_000) -> tuple[list[dict], dict]:
        """The largest ``max_segments`` segments with at most ``max_blocks`` blocks drawn in all (each segment
        keeps its share; the rest are counted in ``blocks_dropped``); the numbers cover every segment."""
        return segment_view(
            self.segments_at(point), max_segments=max_segments, max_blocks=max(1, max_blocks // max_segments)
        )

    # -- an out-of-memory ---------------------------------------------------------------------------

    def oom(self) -> dict | None:
        """What failed at the last out-of-memory event (the one the snapshot was most likely dumped for): the
        request, what CUDA still had free, what the allocator held unused, and why: the unused memory cut too
        small for the request's pool (fragmentation); the device with room for the segment the allocator would
        have asked for, so a limit of the process refused it (``set_per_process_memory_fraction``); or simply
        too little free on the device."""
        ooms = np.flatnonzero(self.trace.action == CODE["oom"])
        if not len(ooms):
            return None
        i = int(ooms[-1])
        point = i + 1  # after the segments the allocator released before giving up
        requested = int(self.trace.size[i])
        pool = "small" if requested <= SMALL_REQUEST else "large"
        largest = largest_free_blocks(self.segments_at(point))
        unallocated = max(0, int(self.reserved[point] - self.allocated[point]))
        fragmentation = unallocated >= requested and largest[pool] < requested
        free, segment = int(self.trace.addr[i]), segment_request(requested)
        cause = "fragmentation" if fragmentation else "process limit" if free >= segment else "device full"
        stack = self.site_stack(int(self.trace.site[i]))
        return {
            "events": len(ooms),
            "index": i,
            "time_ms": float(self.point_time_ms([point])[0]),
            "requested_bytes": requested,
            "pool": pool,
            "device_free_bytes": free,
            "segment_request_bytes": segment,
            "allocated_bytes": int(self.allocated[point]),
            "reserved_bytes": int(self.reserved[point]),
            "reserved_unallocated_bytes": unallocated,
            "largest_free_block_bytes": largest,
            "fragmentation": fragmentation,
            "cause": cause,
            "expandable_segments": self.settings_say_expandable(),
            "site": site_label(stack) if stack else None,
            "stack": [frame_text(f) for f in shown_stack(stack)],
        }

    def settings_say_expandable(self) -> bool:
        """Whether the allocator already grows segments in place (``expandable_segments:True``)."""
        on = self.snapshot.settings.get("expandable_segments") is True
        return on or any(s.expandable for s in self.snapshot.segments if s.device == self.device)

    # -- the summary every output starts from --------------------------------------------------------

    def summary(self, top: int = 20) -> dict:
        p = self.peak_point
        r = int(np.argmax(self.reserved))
        frag = self.reserved - self.allocated
        f = int(np.argmax(frag))
        peak_event = p - 1
        stack = self.site_stack(int(self.trace.site[peak_event])) if peak_event >= 0 else ()
        actions = np.bincount(self.trace.action.astype(np.int64), minlength=256)
        names = {i: a for a, i in CODE.items()}
        return {
            "device": self.device,
            "devices": self.snapshot.devices(),
            "source": self.snapshot.source,
            "trace_events": self.n_events,
            "actions": {names.get(i, "unknown"): int(c) for i, c in enumerate(actions) if c},
            "has_times": self.has_times,
            "first_event_time_us": int(self.time_us[0]) if self.has_times else None,
            "duration_ms": float(self.point_time_ms([len(self.time_us) - 1])[0]),
            "peak_allocated_bytes": int(self.allocated[p]),
            "peak_point": p,
            "peak_time_us": int(self.time_us[p]) if self.has_times else None,
            "peak_time_ms": float(self.point_time_ms([p])[0]),
            "peak_event": (
                None
                if peak_event < 0
                else {
                    "index": peak_event,
                    "action": names.get(int(self.trace.action[peak_event]), "unknown"),
                    "size_bytes": int(self.trace.size[peak_event]),
                    "address": int(self.trace.addr[peak_event]),
                }
            ),
            "peak_stack": [frame_text(fr) for fr in shown_stack(stack)],
            "peak_site": site_label(stack) if peak_event >= 0 else None,
            "peak_reserved_bytes": int(self.reserved[r]),
            "peak_reserved_time_ms": float(self.point_time_ms([r])[0]),
            "reserved_at_peak_bytes": int(self.reserved[p]),
            "fragmentation_at_peak_bytes": int(frag[p]),
            "peak_fragmentation_bytes": int(frag[f]),
            "peak_fragmentation_time_ms": float(self.point_time_ms([f])[0]),
            "baseline_allocated_bytes": self.baseline_allocated_bytes,
            "baseline_allocated_blocks": int(len(self.baseline["size"])),
            # of it, what the blocks' own stacks name (a torch 2.0 block keeps its allocation's stack in 'history')
            "baseline_with_stack_bytes": int(self.baseline["size"][self.baseline["site"] >= 0].sum()),
            "legacy_blocks": int(self.snapshot.quirks.get(OLD_BLOCKS, 0)),
            "baseline_reserved_bytes": self.baseline_reserved_bytes,
            "end_allocated_bytes": int(self.allocated[-1]),
            "end_reserved_bytes": int(self.reserved[-1]),
            "end_state": self.end_state,
            "categories_at_peak_bytes": self.categories_at(p),
            "category_rules": self.rule_counts(),
            "top_sites_at_peak": self.top_sites(p, top),
            "segments_at_end": sum(1 for s in self.snapshot.segments if s.device == self.device),
            "distinct_stacks": len(self.snapshot.sites),
            "malformed_events": self.trace.malformed,
            "unknown_actions": self.trace.unknown_actions,
            "allocator_settings": self.snapshot.settings,
            "notes": self.notes,
            "oom": self.oom(),
        }


def segment_request(requested: int) -> int:
    """The bytes the caching allocator asks CUDA for when no free block serves ``requested``."""
    if requested <= SMALL_REQUEST:
        return SMALL_SEGMENT
    if requested < MIN_LARGE_ALLOC:
        return LARGE_SEGMENT
    return -(-requested // ROUND_LARGE) * ROUND_LARGE


def largest_free_blocks(segments: list[dict]) -> dict[str, int]:
    """The largest inactive block of each pool (by its segments' type, as :meth:`SnapshotAnalysis.segments_at`
    gives them): the largest request each pool could still serve without a new segment."""
    out = {"small": 0, "large": 0}
    for seg in segments:
        pool = "small" if seg["segment_type"] == "small" else "large"
        free = [b["size"] for b in seg["blocks"] if b["state"] == "inactive"]
        out[pool] = max(out[pool], *free, 0)
    return out


def analyse(snapshot: Snapshot, device: int | None = None) -> SnapshotAnalysis:
    """Replay one device's trace (default: the device with the most events)."""
    if device is None:
        device = snapshot.busiest_device()
    trace = snapshot.traces.get(device) or _empty_trace()
    n = len(trace)
    notes: list[str] = []
    delta, seg_delta = _deltas(trace)
    alloc_idx, alloc_end, alloc_requested_end, orphan_idx = _lifetimes(trace)
    # what the segments show at the end, and which of it the trace does not explain
    segs = [s for s in snapshot.segments if s.device == device]
    alive_end = {int(a) for a in trace.addr[alloc_idx[alloc_end == n]]}
    active_blocks = [b for s in segs for b in s.blocks if b.state.startswith("active")]
    unexplained = [b for b in active_blocks if b.address not in alive_end]
    kinds = np.array([stack_kind(st) for st in snapshot.sites] + [KIND_NONE], dtype=np.int8)  # [-1] → no stack
    baseline = _baseline(trace, unexplained, orphan_idx, kinds)
    baseline_alloc = int(baseline["size"].sum())
    end_reserved = sum(s.total_size for s in segs)
    baseline_reserved = _reserved_baseline(end_reserved, int(seg_delta.sum()), notes)
    end_state = _end_state(active_blocks, end_reserved, baseline_alloc + int(delta.sum()), n, notes)
    allocated = np.concatenate([[baseline_alloc], baseline_alloc + np.cumsum(delta)])
    reserved = np.concatenate([[baseline_reserved], baseline_reserved + np.cumsum(seg_delta)])
    end_state["replay_reserved_bytes"] = int(reserved[-1])
    has_times = bool(n) and bool(trace.time_us.any())
    if n and not has_times:
        notes.append("the events carry no times (an old torch): the x axis is the event number")
    time_us = np.concatenate([trace.time_us[:1], trace.time_us]) if n else np.zeros(1, np.int64)
    notes += _what_the_file_cannot_tell(snapshot, device, n)
    rule = _allocation_rules(trace, alloc_idx, alloc_end, kinds)
    orphan_rules = baseline["rule"][len(unexplained) :]
    event_category = _event_categories(n, alloc_idx, alloc_end, rule, orphan_idx, orphan_rules)
    return SnapshotAnalysis(
        snapshot,
        device,
        trace,
        time_us,
        has_times,
        allocated,
        reserved,
        delta,
        event_category,
        alloc_idx,
        alloc_end,
        alloc_requested_end,
        rule,
        baseline,
        baseline_alloc,
        baseline_reserved,
        end_state,
        notes,
    )


def _what_the_file_cannot_tell(snapshot: Snapshot, device: int, n: int) -> list[str]:
    """Notes on what this kind of file leaves unknown: no trace, an older torch's blocks, other devices."""
    notes = []
    if not n:
        notes.append(
            "no trace was recorded for this device (no events): only the state at the time of the snapshot is "
            "known — what was allocated and reserved then, and the stack of each block that kept one — not when "
            "it was allocated, nor any peak before it (record with torch.cuda.memory._record_memory_history() "
            "before the work to see them)"
        )
    if snapshot.quirks.get(OLD_BLOCKS):
        notes.append(
            "the segments were written by an older torch (blocks with 'history' and no 'address', as torch 2.0 "
            "wrote them): each block's requested size and stack are its first history entry's, its address its "
            "place in the segment"
        )
    notes += [_other_device(snapshot, d, device) for d in snapshot.devices() if d != device]
    return [note for note in notes if note]


def _other_device(snapshot: Snapshot, other: int, device: int) -> str:
    """What another device of the file holds, and how to replay it (only one device is replayed at a time)."""
    trace = snapshot.traces.get(other)
    events = len(trace) if trace is not None else 0
    segs = [s for s in snapshot.segments if s.device == other]
    if not events and not segs:
        return ""
    ooms = int(np.count_nonzero(trace.action == CODE["oom"])) if trace is not None else 0
    failed = f", {ooms:,} of them out-of-memory" if ooms else ""
    return (
        f"device {device} is replayed; the file also holds device {other}: {events:,} trace events{failed}, "
        f"{len(segs):,} segments ({bytes_text(sum(s.total_size for s in segs))} reserved) — import it again "
        f"with trace_device {other} (--trace-device {other}) to read it"
    )


def _empty_trace() -> DeviceTrace:
    """The trace of a device the snapshot recorded no event on: its replay is its segments alone."""
    return DeviceTrace(
        np.zeros(0, np.uint8),
        np.zeros(0, np.uint64),
        np.zeros(0, np.int64),
        np.zeros(0, np.int64),
        np.zeros(0, np.int32),
    )


def _deltas(trace: DeviceTrace) -> tuple[np.ndarray, np.ndarray]:
    """The allocated and the reserved change of each event."""
    act, size = trace.action, trace.size
    delta = np.zeros(len(trace), np.int64)
    is_alloc = act == CODE["alloc"]
    is_free = act == CODE["free_completed"]
    delta[is_alloc] = size[is_alloc]
    delta[is_free] = -size[is_free]
    seg_delta = np.zeros(len(trace), np.int64)
    grow = np.isin(act, (CODE["segment_alloc"], CODE["segment_map"]))
    shrink = np.isin(act, (CODE["segment_free"], CODE["segment_unmap"]))
    seg_delta[grow] = size[grow]
    seg_delta[shrink] = -size[shrink]
    return delta, seg_delta


def _lifetimes(trace: DeviceTrace) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The allocations (event indices), the event that completes each one's free and the one that requests it
    (``len(trace)`` for none), and the frees of blocks the trace never allocated (from before recording)."""
    n = len(trace)
    alloc_idx = np.flatnonzero(trace.action == CODE["alloc"])
    free_idx = np.flatnonzero(trace.action == CODE["free_completed"])
    alloc_end, orphan_frees = _pair(alloc_idx, free_idx, trace.addr, n)
    requested_idx = np.flatnonzero(trace.action == CODE["free_requested"])
    alloc_requested_end, _ = _pair(alloc_idx, requested_idx, trace.addr, n)
    return alloc_idx, alloc_end, np.minimum(alloc_requested_end, alloc_end), free_idx[orphan_frees]


_BASELINE_RULE = {
    KIND_SETUP: "model-setup",
    KIND_OPTIMIZER: "optimizer-kept",
    KIND_BACKWARD: "backward-kept",
    KIND_WORKSPACE: "library-workspace",
}


def _baseline(trace: DeviceTrace, unexplained: list, orphan_idx: np.ndarray, kinds: np.ndarray) -> dict:
    """The blocks from before recording: the active blocks at the end the trace does not explain (alive to the
    end, ``len(trace)``), then the blocks it frees without having allocated (no stack). A block's rule is by its
    stack's kind alone: its allocation, and so its lifetime, was not recorded."""
    n, size = len(trace), trace.size
    b_sites = np.array([b.site for b in unexplained] + [-1] * len(orphan_idx), dtype=np.int64)
    rules = [RULE["no-stack"] if s < 0 else RULE[_BASELINE_RULE.get(int(kinds[s]), "no-match")] for s in b_sites]
    return {
        "addr": np.array([b.address for b in unexplained] + [int(trace.addr[j]) for j in orphan_idx], dtype=np.uint64),
        "size": np.array([b.requested_size for b in unexplained] + [int(size[j]) for j in orphan_idx], dtype=np.int64),
        "block_size": np.array([b.size for b in unexplained] + [int(size[j]) for j in orphan_idx], dtype=np.int64),
        "site": b_sites,
        "end": np.array([n] * len(unexplained) + list(orphan_idx), dtype=np.int64),
        "rule": np.array(rules, dtype=np.int64),
    }


def _reserved_baseline(end_reserved: int, traced_growth: int, notes: list[str]) -> int:
    """Reserved before the first event: the segments' total at the end minus what the trace added (0, with a
    note, where the trace added more than the segments hold)."""
    if end_reserved - traced_growth >= 0:
        return end_reserved - traced_growth
    notes.append(
        f"the trace grows reserved memory by {traced_growth:,} bytes but the segments at the "
        f"end hold only {end_reserved:,}: reserved is drawn from 0"
    )
    return 0


def _end_state(active_blocks: list, end_reserved: int, replay_end: int, n: int, notes: list[str]) -> dict:
    """The segments at the end against the replay's end, with a note for what the two do not share."""
    # one size for every block, traced or from before recording: the size asked for (what the trace records,
    # and what memory_viz draws); the allocator's rounding of the blocks alive at the end is reported apart
    end_active = sum(b.size for b in active_blocks)
    end_requested = sum(b.requested_size for b in active_blocks)
    block_rounding = end_active - end_requested
    if n and replay_end != end_requested:
        notes.append(
            f"the replay ends at {replay_end:,} bytes allocated (requested sizes), the segments at the end show "
            f"{end_requested:,} requested in their active blocks: {end_requested - replay_end:,} is not explained "
            f"by the trace (events after the last recorded one, or dropped by the ring buffer)"
        )
    if block_rounding:
        notes.append(
            f"allocated is counted in requested sizes; the allocator's blocks alive at the end are "
            f"{block_rounding:,} bytes larger ({end_active:,} in blocks, {end_requested:,} requested): each is "
            f"rounded up to a multiple of 512 bytes, and a block it did not split is larger still"
        )
    return {
        "segments_active_bytes": end_active,
        "segments_active_requested_bytes": end_requested,
        "segments_reserved_bytes": end_reserved,
        "replay_allocated_bytes": replay_end,
    }


def _allocation_rules(
    trace: DeviceTrace, alloc_idx: np.ndarray, alloc_end: np.ndarray, kinds: np.ndarray
) -> np.ndarray:
    """Each traced allocation's rule (index into :data:`RULES`): by the kind of its stack and how long it lives."""
    n = len(trace)
    a_sites = trace.site[alloc_idx].astype(np.int64)
    a_kind = kinds[a_sites]
    positions = {k: alloc_idx[a_kind == k] for k in (KIND_FORWARD, KIND_BACKWARD, KIND_OPTIMIZER)}
    not_backward = np.sort(np.concatenate([positions[KIND_FORWARD], positions[KIND_OPTIMIZER]]))
    not_optimizer = np.sort(np.concatenate([positions[KIND_FORWARD], positions[KIND_BACKWARD]]))
    rule = np.full(len(alloc_idx), RULE["no-match"], np.int64)
    rule[a_sites < 0] = RULE["no-stack"]
    rule[a_kind == KIND_SETUP] = RULE["model-setup"]
    rule[a_kind == KIND_WORKSPACE] = RULE["library-workspace"]
    for kind, others, kept, scratch in (
        (KIND_OPTIMIZER, not_optimizer, "optimizer-kept", "optimizer-scratch"),
        (KIND_BACKWARD, not_backward, "backward-kept", "backward-scratch"),
    ):
        sel = np.flatnonzero((a_kind == kind) & (a_sites >= 0))
        phase_end = _next_index(others, alloc_idx[sel], n)
        survives = (alloc_end[sel] > phase_end) | (alloc_end[sel] == n)
        rule[sel] = np.where(survives, RULE[kept], RULE[scratch])
    sel = np.flatnonzero((a_kind == KIND_FORWARD) & (a_sites >= 0))
    next_backward = _next_index(positions[KIND_BACKWARD], alloc_idx[sel], -1)
    saved = (next_backward >= 0) & (alloc_end[sel] > next_backward)
    freed_before = alloc_end[sel] < np.where(next_backward >= 0, next_backward, n)
    rule[sel] = np.where(
        saved, RULE["forward-saved"], np.where(freed_before, RULE["forward-scratch"], RULE["forward-no-backward"])
    )
    return rule


def _event_categories(
    n: int,
    alloc_idx: np.ndarray,
    alloc_end: np.ndarray,
    rule: np.ndarray,
    orphan_idx: np.ndarray,
    orphan_rules: np.ndarray,
) -> np.ndarray:
    """The category of the block each event allocates or frees (NO_CATEGORY for the others): an allocation's
    free is in its allocation's category, a free from before recording in its baseline rule's."""
    rule_cat = np.array([CAT[r[1]] for r in RULES], dtype=np.uint8)
    event_category = np.full(n, NO_CATEGORY, np.uint8)
    event_category[alloc_idx] = rule_cat[rule]
    closed = alloc_end < n
    event_category[alloc_end[closed]] = rule_cat[rule[closed]]
    if len(orphan_idx):
        event_category[orphan_idx] = rule_cat[orphan_rules]
    return event_category


# -- two snapshots: who grew ---------------------------------------------------------------------------

OTHER_SITES = "(other sites: below each snapshot's top list)"


def _site_key(site: dict) -> tuple[str, tuple[str, ...]]:
    """A stored site's name and the frames shown for it. Sites match on their one line
    (:func:`site_label` of the stored stack, with the recorder's frames hidden): the same code matches whether
    it was recorded with C++ frames or not, in runs stored before those were hidden, and in runs whose list
    gave one line several rows (stored before sites were grouped by their line)."""
    stack = shown_stack(tuple(parse_frame(t) for t in site.get("stack", [])))
    if not stack:
        return str(site.get("label", "")), ()
    python = tuple(f for f in stack if is_python_frame(f))
    return site_label(stack), tuple(frame_text(f) for f in (python or stack))


def peak_differences(a: dict, b: dict) -> dict:
    """Who grew between two stored snapshot runs (their summaries, ``run.meta``): bytes each allocation site and
    each category holds at each snapshot's own peak, and B − A, largest growth first.

    Sites come from each run's top list at its peak (``top_sites_at_peak``); a site missing from one list holds
    nothing there or less than that list's last entry, and what the lists leave out is one row
    (:data:`OTHER_SITES`), so each side's rows add up to its peak. Torch-free: it reads only stored numbers."""

    def sites(meta: dict) -> dict:
        out: dict = {}
        for s in meta.get("top_sites_at_peak", []):
            label, stack = _site_key(s)
            row = out.setdefault(label, {"category": s.get("category", "unknown"), "bytes": 0, "stack": stack})
            row["bytes"] += int(s.get("bytes", 0))
        return out

    sa, sb = sites(a), sites(b)
    rows = []
    for key in dict.fromkeys([*sa, *sb]):
        x, y = sa.get(key), sb.get(key)
        site = x or y
        assert site is not None
        rows.append(
            {
                "site": key,
                "category": site["category"],
                "A_bytes": x["bytes"] if x else 0,
                "B_bytes": y["bytes"] if y else 0,
                "stack": list(site["stack"]),
            }
        )
    rest_a = int(a.get("peak_allocated_bytes", 0)) - sum(r["A_bytes"] for r in rows)
    rest_b = int(b.get("peak_allocated_bytes", 0)) - sum(r["B_bytes"] for r in rows)
    if rest_a or rest_b:
        rows.append({"site": OTHER_SITES, "category": "", "A_bytes": rest_a, "B_bytes": rest_b, "stack": []})
    cats_a, cats_b = a.get("categories_at_peak_bytes", {}), b.get("categories_at_peak_bytes", {})
    categories = [
        {"category": c, "A_bytes": int(cats_a.get(c, 0)), "B_bytes": int(cats_b.get(c, 0))}
        for c in dict.fromkeys([*CATEGORIES, *cats_a, *cats_b])
        if cats_a.get(c, 0) or cats_b.get(c, 0)
    ]
    for row in (*rows, *categories):
        row["delta_bytes"] = row["B_bytes"] - row["A_bytes"]
    by_growth = lambda r: (-r["delta_bytes"], -max(r["A_bytes"], r["B_bytes"]))  # noqa: E731
    return {
        "sites": sorted(rows, key=by_growth),
        "categories": sorted(categories, key=by_growth),
        "peak_bytes": (int(a.get("peak_allocated_bytes", 0)), int(b.get("peak_allocated_bytes", 0))),
    }

"""One experiment on every GPU of the box at once (``device="all"``), stored as ONE run.

The job manager submits a child job per GPU to that GPU's own queue — so each child waits for its
GPU like any job, its worker holds that GPU's lock, and all start together when the GPUs are free —
and a coordinator thread follows them: summed progress, the merged rows saved while they run, then
one :class:`~core.result.RunResult` whose rows carry ``device``/``gpu_index`` and whose meta keeps
each GPU's own meta. Store, CLI, export and charts need nothing new.

The node comparison (:func:`compare`) is what an engineer checks on a new box: per point, each
GPU's value against the node median; per GPU, the median of those ratios; a GPU more than
:data:`SLOW_FRACTION` below the median is flagged with the clocks, temperature and throttle reasons
its rows recorded.
"""

from __future__ import annotations

import functools
import statistics
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from core import workerprocess
from core.errors import ConfigError
from core.experiment import ALL, SLOW_FRACTION, DeviceMetric, Experiment, config_to_dict
from core.jsonable import json_ready
from core.lifecycle import Job, Listener, Recorder, Submitter
from core.result import RunResult, now_iso
from core.rows.node import NodeComparison, NodeDevice

POLL_S = 0.2
STATUS_ORDER = ("cancelled", "error", "interrupted", "unsupported", "ok")  # the merged run takes the worst
# Device facts that describe the whole box when every GPU shares them.
SHARED_FACTS = (
    "kind",
    "host",
    "name",
    "compute_capability",
    "multiprocessors",
    "l2_cache_bytes",
    "total_memory_bytes",
    "bf16_supported",
    "spec",
    "tf32",
)


@functools.lru_cache(maxsize=1)
def box_gpus() -> tuple[dict, ...]:
    """Every CUDA device of this box, asked of a worker (this process never touches CUDA)."""
    info = workerprocess.query_devices()
    gpus = tuple(d for d in info["devices"] if d.get("kind") == "cuda")
    if not gpus:
        raise ConfigError(
            f"device all means every CUDA GPU of this box, and it has none: "
            f"{info.get('cuda_unavailable_reason') or 'no CUDA device'}"
        )
    return gpus


def submit_all(
    manager: Submitter,
    exp: Experiment,
    cfg: Any,
    *,
    timeout_s: float | None = None,
    name: str = "",
    on_event: Listener | None = None,
    gpus: tuple[dict, ...] | None = None,
    submit_child: Callable[..., Job] | None = None,
) -> Job:
    """Queue ``exp`` on every GPU; the returned job finishes when all have, with the merged run.

    ``cfg`` is the config dataclass the manager validated: the children are queued with it as it is."""
    if exp.device_metric is None:
        from core import registry

        able = sorted(e.name for e in registry.experiments().values() if e.device_metric)
        raise ConfigError(f"device all: {exp.name} is not run once per GPU; every GPU at once is for {', '.join(able)}")
    gpus = box_gpus() if gpus is None else gpus
    parent = Job(
        exp=exp,
        config=config_to_dict(cfg),
        device=ALL,
        timeout_s=float(timeout_s or manager.default_timeout_s),
        name=name,
        on_event=on_event,
    )
    manager.track(parent)
    fan = FanOut(manager, exp, parent, gpus)
    submit = submit_child or manager.submit
    fan.children = [
        submit(
            exp.name,
            cfg,
            gpu["torch_device"],
            timeout_s=timeout_s,
            save=False,
            on_event=fan.forward(gpu["torch_device"]),
        )
        for gpu in gpus
    ]
    threading.Thread(target=fan.follow, daemon=True, name=f"gpulab-fanout-{parent.id[:8]}").start()
    return parent


class FanOut:
    """Follows the child jobs of one ``all`` job; merges and stores their results."""

    def __init__(self, manager: Submitter, exp: Experiment, parent: Job, gpus: tuple[dict, ...]) -> None:
        self.manager, self.exp, self.parent, self.gpus = manager, exp, parent, gpus
        self.recorder = Recorder(parent, manager.store)
        self.children: list[Job] = []

    def forward(self, device: str) -> Callable[[Job, dict], None]:
        """A child's events reach the parent's listener (the CLI's progress lines) named by their GPU."""

        def on_event(child: Job, event: dict) -> None:
            if self.parent.on_event is None or event.get("type") not in ("waiting", "started", "progress"):
                return
            said = event.get("message") or (event.get("device") or {}).get("label", "")
            forwarded = dict(event, job_id=self.parent.id, message=f"{device}: {said}")
            if event.get("type") == "progress":
                forwarded |= {"done": self.parent.done_steps, "total": self.parent.total_steps}
            try:
                self.parent.on_event(self.parent, forwarded)
            except Exception:  # noqa: BLE001 - a listener must not break the fan-out
                pass

        return on_event

    def _aggregate(self) -> None:
        parent, children = self.parent, self.children
        parent.done_steps = sum(c.done_steps for c in children)
        parent.total_steps = sum(c.total_steps for c in children)
        if any(c.state != "queued" for c in children) and parent.state == "queued":
            parent.state = "running"
        parent.message = " · ".join(f"{g['torch_device']}: {c.message}" for g, c in zip(self.gpus, children))
        parent.rows = merged_rows([(g, list(c.rows)) for g, c in zip(self.gpus, children)])

    def follow(self) -> None:
        while not all(c.state == "done" for c in self.children):
            if self.parent.cancelled:
                for child in self.children:
                    child.cancel()
            self._aggregate()
            if self.parent.rows:
                self.recorder.running(lambda: self._merge(running=True))
            time.sleep(POLL_S)
        self._aggregate()
        self.recorder.finish(self._merge(running=False))

    def _merge(self, running: bool) -> RunResult:
        parts = [Part(gpu, child.result or Part.so_far(gpu, child)) for gpu, child in zip(self.gpus, self.children)]
        return merge(self.exp, self.parent, parts, running)


@dataclass(frozen=True)
class Part:
    """One GPU's share of the run: the GPU it ran on and its run, read as it is."""

    gpu: dict  # the GPU as the box described it (core.hardware.device)
    run: RunResult

    @staticmethod
    def so_far(gpu: dict, child: Job) -> RunResult:
        """A child still running, as a run: the rows it has reported, and no start time until its run says one."""
        return RunResult(
            experiment=child.experiment,
            config=child.config,
            device=gpu,
            versions={},
            started_at="",
            finished_at=None,
            status="running",
            rows=list(child.rows),
        )

    @property
    def name(self) -> str:
        return self.gpu["torch_device"]

    @property
    def device(self) -> dict:
        """What the GPU's worker said of it, or the box's description where it said nothing."""
        return self.run.device or self.gpu


def merged_rows(parts: list[tuple[dict, list[dict]]]) -> list[dict]:
    """Every GPU's rows, each tagged with the GPU it ran on."""
    return [
        {"device": gpu["torch_device"], "gpu_index": gpu.get("index"), "gpu_name": gpu.get("name"), **row}
        for gpu, rows in parts
        for row in rows
    ]


def box_device(devices: list[dict]) -> dict:
    """The merged run's device: the facts all GPUs share, and every GPU's own description."""
    first = devices[0]
    shared = {k: first[k] for k in SHARED_FACTS if k in first and all(d.get(k) == first[k] for d in devices)}
    names = sorted({d.get("name", "?") for d in devices})
    name = f"{len(devices)} × {names[0]}" if len(names) == 1 else " + ".join(names)
    return (
        {"kind": "cuda"}
        | shared
        | {
            "torch_device": ALL,
            "index": None,
            "name": name,
            "label": f"all {len(devices)} GPUs — {name}",
            "count": len(devices),
            "devices": devices,
        }
    )


def _status(parts: list[Part]) -> str:
    statuses = {p.run.status for p in parts}
    return next(s for s in STATUS_ORDER if s in statuses)


def _concurrency(parts: list[Part]) -> dict:
    """When the GPUs ran, and for how long all of them ran together."""
    spans = [
        (datetime.fromisoformat(p.run.started_at), datetime.fromisoformat(p.run.finished_at))
        for p in parts
        if p.run.started_at and p.run.finished_at
    ]
    if len(spans) < len(parts) or not spans:
        return {"all_at_once": None, "note": "not every GPU finished"}
    overlap = (min(e for _, e in spans) - max(s for s, _ in spans)).total_seconds()
    longest = max((e - s).total_seconds() for s, e in spans)
    return {
        "all_at_once": overlap > 0,
        "overlap_s": max(overlap, 0.0),
        "longest_s": longest,
        "note": None
        if overlap > 0
        else "the GPUs did not all run at the same time (a GPU was busy with "
        "another job): numbers are per GPU, not under a full-node load",
    }


def merge(exp: Experiment, parent: Job, parts: list[Part], running: bool = False) -> RunResult:
    """One run from every GPU's part: tagged rows, the node comparison, each GPU's meta and outcome.

    The run fails as its worst part (:data:`STATUS_ORDER`), and with that part's kind of failure."""
    runs = [p.run for p in parts]
    rows = merged_rows([(p.gpu, p.run.rows) for p in parts])
    assert exp.device_metric is not None  # fan-out refuses an experiment without one
    node = compare(exp.device_metric, rows, {p.name: p.run.meta for p in parts})
    status = "running" if running else _status(parts)
    worst = next((r for r in runs if r.status == status), None)
    errors = [f"{p.name}: {p.run.error}" for p in parts if p.run.error]
    meta = {
        "requested_device": ALL,
        "devices": {p.name: p.run.meta for p in parts},
        "node": node,
        "children": [
            {
                "device": p.name,
                "status": p.run.status,
                "error": p.run.error,
                "started_at": p.run.started_at or None,
                "finished_at": p.run.finished_at,
            }
            for p in parts
        ],
        "concurrency": _concurrency(parts),
    }
    started = [r.started_at for r in runs if r.started_at]
    finished = [r.finished_at for r in runs if r.finished_at]
    return RunResult(
        id=parent.id,
        experiment=exp.name,
        config=exp.stored_config(parent.config),
        device=json_ready(box_device([p.device for p in parts])),
        versions=next((r.versions for r in runs if r.versions), {}),
        started_at=min(started, default=parent.submitted_at),
        finished_at=None if running else (max(finished, default=None) or now_iso()),
        status=status,
        error="; ".join(errors) or None,
        error_kind=worst.error_kind if worst else None,
        rows=json_ready(rows),  # compare() added its ratios, which may be infinite
        meta=json_ready(meta),
        name=parent.name,
    )


def _clocks(rows: list[dict], meta: dict) -> dict:
    """What a GPU's rows recorded of its clocks (NVML samples summarised per point), or why there is nothing."""
    sm = [r["sm_clock_mhz"] for r in rows if isinstance(r.get("sm_clock_mhz"), (int, float))]
    if not sm:
        return {"sm_clock_mhz": None, "clocks_note": meta.get("clocks_note") or "no clock samples in this run"}
    temps = [r["temp_c"] for r in rows if isinstance(r.get("temp_c"), (int, float))]
    power = [r["power_w"] for r in rows if isinstance(r.get("power_w"), (int, float))]
    lows = [
        r.get("sm_clock_min_mhz", r["sm_clock_mhz"]) for r in rows if isinstance(r.get("sm_clock_mhz"), (int, float))
    ]
    reasons = tuple(sorted({x for r in rows for x in (r.get("throttle_reasons") or [])}))
    return {
        "sm_clock_mhz": statistics.fmean(sm),
        "sm_clock_min_mhz": min(lows),
        "temp_c": max(temps) if temps else None,
        "power_w": statistics.fmean(power) if power else None,
        "throttle_reasons": reasons,
        "throttled": any(r.get("throttled") for r in rows),
    }


def compare(metric: DeviceMetric, rows: list[dict], metas: dict[str, dict]) -> dict:
    """Each GPU (``metas``: GPU → its meta, in order) against the node median, point by point; annotates ``rows``.

    A row gets ``node_median`` (the median of ``metric.column`` over the GPUs that measured that
    point) and ``vs_node_median`` (its value / that median). A GPU's ``relative`` is the median of
    its ratios; it is ``flagged`` when that is more than :data:`SLOW_FRACTION` below 1.
    """

    def value(r: dict) -> float | None:
        v = r.get(metric.column)
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and v > 0 else None

    points: dict[tuple, list[tuple[dict, float]]] = defaultdict(list)
    for r in rows:
        if (v := value(r)) is not None:
            points[tuple(r.get(k) for k in metric.keys)].append((r, v))
    ratios: dict[str, list[float]] = defaultdict(list)
    for same in points.values():
        median = statistics.median(v for _, v in same)
        for r, v in same:
            r["node_median"] = median
            r["vs_node_median"] = v / median
            ratios[r["device"]].append(r["vs_node_median"])
    per_device = []
    for device in metas:
        mine = [r for r in rows if r["device"] == device]
        relative = statistics.median(ratios[device]) if ratios.get(device) else None
        per_device.append(
            NodeDevice(
                device=device,
                gpu_index=mine[0].get("gpu_index") if mine else None,
                gpu_name=mine[0].get("gpu_name") if mine else None,
                relative=relative,
                points=len(ratios.get(device, [])),
                flagged=relative is not None and relative < 1 - SLOW_FRACTION,
                **_clocks([r for r in mine if value(r) is not None], metas.get(device, {})),
            )
        )
    return NodeComparison(
        metric=metric.column,
        label=metric.label,
        keys=tuple(metric.keys),
        threshold=SLOW_FRACTION,
        per_device=tuple(per_device),
        flagged=tuple(d.device for d in per_device if d.flagged),
        points=len(points),
    ).to_dict()

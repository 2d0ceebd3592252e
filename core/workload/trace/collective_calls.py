"""Each collective a trace recorded with its figures, as nccl-tests prints them: size, time, algbw and busbw.

PyTorch (≥ 2.2) writes on a collective kernel what its ``record_param_comms`` knew: ``Collective name``,
``In msg nelems``, ``Out msg nelems``, ``dtype`` and ``Group size``. Calls of one collective, dtype, group size
and size are one row: how many, their summed and median time (µs), and — by nccl-tests' conventions
(:mod:`core.measure.nccl_tests`, the lab's own ``interconnect`` runs use them too) — ``bytes`` (the output of
all_gather, the input of the others), algbw = bytes / median time and busbw = algbw × the factor for the group's
size, in GB/s (10⁹ B). A collective c10d names in a way nccl-tests has no figure for (send/recv, barrier,
gather…) or a dtype of unknown width keeps its calls and time without a bandwidth. A kernel's time includes
waiting for its peers to arrive, so on one rank's trace the bandwidth is a lower bound of what the link gave.
"""

from __future__ import annotations

from core.arrays import median
from core.measure.nccl_tests import DTYPE_BYTES, RECORDED_NAMES, busbw_factor, size_elements
from core.rows.trace import Collective
from core.units import size_text
from core.workload.trace.file import TraceFile


def collective_rows(trace: TraceFile, device: int) -> tuple[Collective, ...]:
    """The collectives of ``device`` with recorded figures, one row per kind of call, the most time first
    (rows of kind ``collective``); none where the trace recorded no figures."""
    a = trace.activities
    calls: dict[tuple[str, str, int, int | None, int, int], list[float]] = {}
    for i, call in trace.collectives.items():
        if a.device[i] != device:
            continue
        collective = RECORDED_NAMES.get(call.name.lower())
        width = DTYPE_BYTES.get(call.dtype)
        nbytes = (
            size_elements(collective, call.in_elements, call.out_elements) * width if collective and width else None
        )
        sent, got = (0, 0) if nbytes is not None else (call.in_elements, call.out_elements)  # no size: by buffers
        key = (collective or call.name, call.dtype, call.group_size, nbytes, sent, got)
        calls.setdefault(key, []).append(float(a.end[i] - a.start[i]))
    rows: list[Collective] = []
    for (collective, dtype, group, nbytes, _, _), durations in calls.items():
        median_us = median(durations)
        rated = nbytes is not None and median_us > 0  # a size: a collective nccl-tests knows, of a known dtype
        algbw = nbytes / (median_us / 1e6) / 1e9 if nbytes is not None and rated else None
        factor = busbw_factor(collective, group) if rated else None
        rows.append(
            Collective(
                collective=collective,
                dtype=dtype,
                group_size=group,
                bytes=nbytes,
                size=size_text(nbytes) if nbytes is not None else None,
                calls=len(durations),
                total_us=float(sum(durations)),
                median_us=median_us,
                algbw_gbs=algbw,
                busbw_factor=factor,
                busbw_gbs=algbw * factor if algbw is not None and factor is not None else None,
            )
        )
    return tuple(sorted(rows, key=lambda r: -r.total_us))

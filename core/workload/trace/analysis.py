"""A profiler trace's whole analysis, once: the GPU's timeline (:mod:`core.workload.trace.timeline`), what the host did
before and between the kernels, which operators launched them, their rates and the collectives, then the findings
ranked. An imported trace and the step benchmark's own profiled step go through this one path, so the lab reads its
own step as it reads a user's."""

from __future__ import annotations

import dataclasses

from core.rows.trace import TraceTables
from core.workload.trace.file import TraceFile


def analyse(data: TraceFile, top: int) -> tuple[TraceTables, dict]:
    """Named tables and meta of a trace read by :func:`core.workload.trace.timeline.read_trace`,
    ``meta["findings"]`` ranked."""
    from core.workload.findings import to_store, trace_findings
    from core.workload.trace.collective_calls import collective_rows
    from core.workload.trace.host_gaps import (
        before_first_kernel_findings,
        host_gap_findings,
        host_gaps,
        host_in_steps,
        step_stall_findings,
    )
    from core.workload.trace.op_flops import tensor_core_findings, tensor_core_use
    from core.workload.trace.ops import op_breakdown, op_findings
    from core.workload.trace.timeline import analyse_trace

    tables, meta = analyse_trace(data, top)
    if meta.get("gpu_activities"):
        meta["host_gaps"], by_step = host_gaps(data, meta["device"], steps=tables.steps)
        steps = [step.adding(window_causes=held) for step, held in zip(tables.steps, by_step)]
        meta["host_before_first_kernel"], lived = host_in_steps(data, meta["device"], steps)
        steps = [step.adding(wall_causes=held) for step, held in zip(steps, lived)]
        meta.update(op_breakdown(data, meta["device"], top))
        meta["tensor_cores"] = tensor_core_use(data, meta["device"])
        tables = dataclasses.replace(tables, steps=tuple(steps), collectives=collective_rows(data, meta["device"]))
    # the answer first, the most time first and at most three: what the host did before the kernels and while the
    # GPU idled, the operators' patterns and the tensor cores left unused (each naming an operator, a module or a
    # kernel), the summary's findings; of equal times, the one step's stall says more than the whole trace's cause
    meta["findings"] = to_store(
        before_first_kernel_findings(meta)
        + step_stall_findings(tables.steps)
        + host_gap_findings(meta, tables.steps)
        + op_findings(meta)
        + tensor_core_findings(meta)
        + trace_findings(meta, tables)
    )
    return tables, meta

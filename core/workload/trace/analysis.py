"""A profiler trace's whole analysis, once: the GPU's timeline (:mod:`core.workload.trace.timeline`), what the host did
before and between the kernels, which operators launched them, their rates and the collectives, then the findings
ranked. An imported trace and the step benchmark's own profiled step go through this one path, so the lab reads its
own step as it reads a user's."""

from __future__ import annotations

from core.workload.trace.file import TraceFile


def analyse(data: TraceFile, top: int) -> tuple[list[dict], dict]:
    """Rows and meta of a trace read by :func:`core.workload.trace.timeline.read_trace`, ``meta["findings"]`` ranked."""
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

    rows, meta = analyse_trace(data, top)
    steps = [r for r in rows if r["kind"] == "step"]
    if meta.get("gpu_activities"):
        meta["host_gaps"], by_step = host_gaps(data, meta["device"], steps=steps)
        for step, held in zip(steps, by_step):
            step.update(held)
        meta["host_before_first_kernel"], lived = host_in_steps(data, meta["device"], steps)
        for step, held in zip(steps, lived):
            step.update(held)
        meta.update(op_breakdown(data, meta["device"], top))
        meta["tensor_cores"] = tensor_core_use(data, meta["device"])
        rows += collective_rows(data, meta["device"])
    # the answer first, the most time first and at most three: what the host did before the kernels and while the
    # GPU idled, the operators' patterns and the tensor cores left unused (each naming an operator, a module or a
    # kernel), the summary's findings
    meta["findings"] = to_store(
        before_first_kernel_findings(meta)
        + step_stall_findings(steps)  # of equal times, the one step's stall says more than the whole trace's cause
        + host_gap_findings(meta, steps)
        + op_findings(meta)
        + tensor_core_findings(meta)
        + trace_findings(meta, rows)
    )
    return rows, meta

"""nccl-tests' conventions for a collective's size and bandwidth, shared by the lab's own collectives
(:mod:`core.distributed.collectives`) and those read from a profiler trace (:mod:`core.workload.trace.collective_calls`),
so a trace's busbw and a measured one are the same figure.

``bytes`` is the largest buffer of a rank: the buffer of all_reduce and broadcast, the gathered output of
all_gather, the input of reduce_scatter, each rank's send buffer of all_to_all. algbw = bytes / time;
busbw = algbw × :func:`busbw_factor`, which makes collectives comparable with the link speed.
"""

from __future__ import annotations

# A trace's "Collective name" (PyTorch's record_param_comms: c10d's names, old and new) → the lab's name.
RECORDED_NAMES = {
    "allreduce": "all_reduce",
    "all_reduce": "all_reduce",
    "allreduce_coalesced": "all_reduce",
    "allgather": "all_gather",
    "all_gather": "all_gather",
    "_allgather_base": "all_gather",
    "allgather_into_tensor_coalesced": "all_gather",
    "all_gather_into_tensor": "all_gather",
    "reduce_scatter": "reduce_scatter",
    "_reduce_scatter_base": "reduce_scatter",
    "reduce_scatter_tensor": "reduce_scatter",
    "reduce_scatter_tensor_coalesced": "reduce_scatter",
    "broadcast": "broadcast",
    "alltoall": "all_to_all",
    "all_to_all": "all_to_all",
    "alltoall_base": "all_to_all",
    "all_to_allv": "all_to_all",
}
# c10's scalar type names as a trace writes a collective's dtype → bytes per element
DTYPE_BYTES = {
    "Float": 4, "Double": 8, "Half": 2, "BFloat16": 2, "Int": 4, "Long": 8, "Short": 2, "Char": 1, "Byte": 1,
    "Bool": 1, "Float8_e4m3fn": 1, "Float8_e5m2": 1, "Float8_e4m3fnuz": 1, "Float8_e5m2fnuz": 1, "UInt32": 4,
    "UInt64": 8, "UInt16": 2, "ComplexFloat": 8, "ComplexDouble": 16,
}  # fmt: skip


def busbw_factor(collective: str, world: int) -> float:
    """nccl-tests' bus-bandwidth factor for ``world`` ranks."""
    if collective == "all_reduce":
        return 2 * (world - 1) / world
    if collective in ("all_gather", "reduce_scatter", "all_to_all"):
        return (world - 1) / world
    if collective == "broadcast":
        return 1.0
    raise ValueError(f"unknown collective {collective!r}")


def size_elements(collective: str, in_elements: int, out_elements: int) -> int:
    """Which of a rank's buffers nccl-tests counts as the collective's size: the output of all_gather, the
    input of every other collective (all_reduce's and broadcast's one buffer, reduce_scatter's input,
    all_to_all's send buffer)."""
    return out_elements if collective == "all_gather" else in_elements

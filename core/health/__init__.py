"""``health``: is this box as fast as it should be, and is it still? A verdict per figure and per box.

The doctor's checks, the matmul soak on every GPU (burst against sustained), host↔device copies, the peer
matrix and all_reduce run through the normal job path; every figure is judged against the reference of the
card's exact SKU (:mod:`core.hardware.health_reference`) and against the same box's earlier runs of the same
experiment and settings (:mod:`core.health.history`). Torch-free: every measurement happens in a worker.
"""

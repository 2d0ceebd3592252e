"""The user's own workload: memory snapshots and profiler traces recorded anywhere, read through
:mod:`core.intake`, and the recorder a training script uses to make a snapshot."""

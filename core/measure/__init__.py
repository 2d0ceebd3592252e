"""How the lab times things, shared by every experiment that measures: the timing loops with warm-up,
device synchronisation and cache flushing (:mod:`.timing`), the statistics kept from raw samples
(:mod:`.stats`), how the CUDA allocator's history is recorded (:mod:`.history`), the groups kernel
time is reported in (:mod:`.kernels`), a training step timed phase by phase (:mod:`.step_timer`) and
profiler events attributed to the step's scopes and phases (:mod:`.profiler`)."""

"""How the lab times things, shared by every experiment that measures: the timing loops with warm-up,
device synchronisation and cache flushing (:mod:`.timing`) and the statistics kept from raw samples
(:mod:`.stats`)."""

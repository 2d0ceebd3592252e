"""Facts about the machine: which devices it has (:mod:`.device`), their datasheet peaks
(:mod:`.specs`) and their clocks, power and throttling while a job runs (:mod:`.clocks`)."""

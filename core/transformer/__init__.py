"""The course's model, shared by the training experiments: its presets (:mod:`.presets`), the
Transformer itself (:mod:`.model`), one training step per precision mode (:mod:`.training`), its
FLOP count (:mod:`.flops`) and the torch-free memory planner (:mod:`.planner`)."""

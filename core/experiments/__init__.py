"""The experiments, one module each; nothing else lives here.

A module is an experiment by being in this package: it defines a config dataclass, a generator
``run(config, ctx)`` and ``EXPERIMENTS = [Experiment(...)]`` (:mod:`core.experiment`), and
:mod:`core.registry` finds it by importing it. So a module imports torch only inside the functions that
run tensors (the CLI and the pages import every module), and no module imports another: what two share
lives below, in :mod:`core.measure`, :mod:`core.hardware` or :mod:`core.transformer`. Its charts are
``render/plots/<name>.py`` and its tests ``tests/core/experiments/test_<name>.py``.
"""

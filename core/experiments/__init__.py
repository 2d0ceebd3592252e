"""The experiments, one module each; nothing else lives here.

A module is an experiment by being in this package: it defines a config dataclass, a generator
``run(config, ctx)`` and ``EXPERIMENTS = [Experiment(...)]`` (:mod:`core.experiment`), and
:mod:`core.registry` finds it. Its charts are ``render/plots/<name>.py`` and its tests
``tests/core/experiments/test_<name>.py``.
"""

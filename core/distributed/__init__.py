"""Measurements that need several processes, and the launch of those processes through torchrun.

``collectives`` times one collective at one message size inside an initialised process group (the
nccl-tests definitions of algbw and busbw); ``config`` is the interconnect job's options, shared by the
experiment and its ranks; ``rank`` is the program every rank runs, started by ``launch`` (one box, from
a worker, through torch's elastic launcher) or by ``torchrun`` by hand on every box of a multi-box job
(through the command line :mod:`core.cli.rank`). Nothing here imports the experiments, the CLI,
Streamlit or Plotly.
"""

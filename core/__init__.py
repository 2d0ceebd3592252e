"""GPU Lab's engine: experiments, the worker process that runs them, the run store and the CLI.

UI-free by design: it imports torch (and pandas for frames), never streamlit or plotly, so it runs
on a GPU box that has only PyTorch (``python -m core …``).
"""

__version__ = "0.1.0"

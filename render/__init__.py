"""The renderers: stored runs in, Plotly figures, the HTML report and export bytes out.

No Streamlit and no worker: the pages draw what these build, and ``python -m core report`` writes the same
report from a shell. A renderer only shows values the engine derived and stored with the run; it never
imports an experiment.
"""

"""The "How measured" expander: every page renders its method from ``docs/methods/<page>.md``.

The method text lives in those files and nowhere else (``tests/test_docs.py`` checks it), so the page,
the docs and a reader of the repository see one copy.
"""

from pathlib import Path

import streamlit as st

METHODS = Path(__file__).resolve().parent.parent.parent / "docs" / "methods"
# A link to the model's note (docs/methods/model.md's heading, as Streamlit anchors it), for a page that names it
MODEL_NOTE = "see [the Transformer these pages train](#the-transformer-these-pages-train) under *How measured*"


def method_text(name: str) -> str:
    """The Markdown of ``docs/methods/<name>.md`` without its title line (the expander names it)."""
    text = (METHODS / f"{name}.md").read_text(encoding="utf-8")
    first, _, rest = text.partition("\n")
    return rest.strip() if first.startswith("# ") else text


def how_measured(page: str, *shared: str) -> None:
    """An expander "How measured" with the page's method file, then any shared ones (e.g. ``all_gpus``)."""
    with st.expander("How measured"):
        for name in (page, *shared):
            st.markdown(method_text(name))

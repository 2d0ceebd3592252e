"""GPU Lab: live experiments on the GPU next to you — number formats, matmul units, memory.

``streamlit run app.py``. The entrypoint draws the shared sidebar (device, model size, dtype) and
the navigation; each page is a short script in ``pages/``. Experiments never run in this process.
"""

from pathlib import Path

import streamlit as st

from core.errors import ConfigError
from core.limits import check_limits
from pages.common import catalog, lab

# The tab's icon is a file of the lab's: a Material icon or an emoji as page_icon is fetched from a font host or a
# CDN, which an offline box refuses with a console error on every page.
ICON = Path(__file__).parent / "pages" / "common" / "icon.png"


def run() -> None:
    st.set_page_config(page_title="GPU Lab", page_icon=str(ICON), layout="wide")
    try:
        check_limits()  # a malformed GPULAB_LIMITS stops the dashboard here, named, not every job it would start
    except ConfigError as exc:
        st.error(f"GPU Lab cannot start: {exc}")
        st.stop()
    nav = st.navigation(
        [
            st.Page(path, title=title, icon=icon, default=(path == "pages/home.py"))
            for path, title, icon in catalog.available()
        ]
    )
    lab.sidebar()
    problem = lab.store_problem()
    if problem:
        st.sidebar.error(f"Runs are not being saved: {problem}")
    nav.run()


run()

"""Shared page code. Importing it makes sure the page runs under app.py's navigation.

Streamlit routes the very first request of a fresh server by the legacy ``pages/`` folder
(``PagesManager.uses_pages_directory``) until some run of app.py has called ``st.navigation``. A
user whose first visit is a deep link (``/compare``) would get the page without the shared sidebar
and with the legacy menu. Every page imports this package, so such a run switches the server to
``st.navigation`` routing and reruns: app.py then draws the sidebar and opens the requested page.
This is Streamlit's private class attribute: ``tests/pages/test_streamlit_routing.py`` fails loudly on
a Streamlit release that changes it, and requirements.lock keeps the version CI passed with.
"""

from streamlit.runtime.pages_manager import PagesManager

if PagesManager.uses_pages_directory:
    import streamlit as st

    PagesManager.uses_pages_directory = False  # what st.navigation itself sets on its first call
    st.rerun()

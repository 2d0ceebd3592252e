"""Guards the one private Streamlit detail the dashboard relies on (pages/common/__init__.py).

A fresh server routes its first request by the legacy ``pages/`` folder until ``st.navigation`` has
run once; every page flips ``PagesManager.uses_pages_directory`` so a deep link still gets app.py's
sidebar. If a Streamlit release renames or drops that switch, these tests fail and say what to
re-check (the e2e deep-link test shows the user-visible effect).
"""

import inspect

import pytest

pytest.importorskip("streamlit")

import streamlit
from streamlit.commands import navigation
from streamlit.runtime import pages_manager
from streamlit.runtime.scriptrunner import script_runner

from tests.conftest import ROOT

WHAT = (
    f"streamlit {streamlit.__version__} changed the legacy pages/ routing that pages/common/__init__.py "
    f"switches off; re-check deep links on a fresh server (tests/e2e/test_pages_load.py) and update the guard"
)


def test_the_switch_is_still_a_class_attribute_of_pages_manager():
    assert "uses_pages_directory" in vars(pages_manager.PagesManager), WHAT


def test_st_navigation_still_sets_it_to_false():
    assert "PagesManager.uses_pages_directory = False" in inspect.getsource(navigation), WHAT


def test_the_script_runner_still_routes_by_it():
    assert "PagesManager.uses_pages_directory" in inspect.getsource(script_runner.ScriptRunner), WHAT


def test_the_lab_sets_it_exactly_as_st_navigation_does():
    lab_source = (ROOT / "pages" / "common" / "__init__.py").read_text()
    assert "from streamlit.runtime.pages_manager import PagesManager" in lab_source
    assert "PagesManager.uses_pages_directory = False" in lab_source

"""Every page test asks this box's devices once per test process (:func:`tests.conftest.devices_once`)."""

import pytest


@pytest.fixture(autouse=True)
def _device_list(one_device_query):
    return None

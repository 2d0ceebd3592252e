"""The cluster tests' job secret."""

import pytest

from core.distributed.job_secret import SECRET_ENV, new_secret


@pytest.fixture
def job_secret(monkeypatch):
    """The job's secret, made at launch and handed to both nodes' launchers in their environment."""
    monkeypatch.setenv(SECRET_ENV, new_secret().hex())

"""Shared test configuration: hypothesis profiles (no deadlines: CI machines are slow), uploads kept in a
temporary folder."""

import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("default", deadline=None, max_examples=60,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", deadline=None, max_examples=1000,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.fixture(autouse=True, scope="session")
def upload_store_in_a_temporary_folder(tmp_path_factory):
    """The explorer keeps uploads on disk (``REMAT_UPLOAD_DIR``): tests keep them in a temporary folder, never in
    the user's cache."""
    os.environ["REMAT_UPLOAD_DIR"] = str(tmp_path_factory.mktemp("uploads"))

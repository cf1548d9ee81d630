"""Shared test configuration: hypothesis profiles (no deadlines: CI machines are slow), and an upload store of
the test session's own.

Every app run and server the tests start reads ``REMAT_UPLOAD_DIR``: pointing it at a fresh temporary
directory keeps the tests' uploads off the user's ``~/.cache``.
"""

import atexit
import os
import shutil
import tempfile

from hypothesis import HealthCheck, settings

settings.register_profile("default", deadline=None, max_examples=60,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", deadline=None, max_examples=1000,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

_UPLOAD_DIR = tempfile.mkdtemp(prefix="remat-test-uploads-")
os.environ["REMAT_UPLOAD_DIR"] = _UPLOAD_DIR
atexit.register(shutil.rmtree, _UPLOAD_DIR, ignore_errors=True)

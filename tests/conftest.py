"""Shared test configuration: hypothesis profiles (no deadlines: CI machines are slow), and a results store of
the test session's own.

Every command, app run and worker process the tests start reads ``REMAT_STORE``: pointing it at a file in a
fresh temporary directory keeps the tests off the user's ``~/.cache`` and off results another run left.
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

_STORE_DIR = tempfile.mkdtemp(prefix="remat-test-store-")
os.environ["REMAT_STORE"] = os.path.join(_STORE_DIR, "results.sqlite")
atexit.register(shutil.rmtree, _STORE_DIR, ignore_errors=True)

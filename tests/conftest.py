"""Shared test configuration: hypothesis profiles (no deadlines: CI machines are slow), and a results store
and an upload store of the test session's own.

Every command, app run, server and worker process the tests start reads ``REMAT_STORE``,
``REMAT_UPLOAD_DIR`` and ``REMAT_OP_TIMES``: pointing them into a fresh temporary directory keeps the tests off the user's
``~/.cache`` and off results and uploads another run left.
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

_SESSION_DIR = tempfile.mkdtemp(prefix="remat-test-")
os.environ["REMAT_STORE"] = os.path.join(_SESSION_DIR, "results.sqlite")
os.environ["REMAT_UPLOAD_DIR"] = os.path.join(_SESSION_DIR, "uploads")
os.environ["REMAT_OP_TIMES"] = os.path.join(_SESSION_DIR, "op-times.sqlite")
atexit.register(shutil.rmtree, _SESSION_DIR, ignore_errors=True)

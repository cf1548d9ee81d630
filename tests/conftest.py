"""Shared test configuration: hypothesis profiles (no deadlines: CI machines are slow), and a results store
and an upload store of the test session's own, one thread per PyTorch process, and the app served once per test
process for the browser modules that share it.

Every command, app run, server and worker process the tests start reads ``REMAT_STORE``,
``REMAT_UPLOAD_DIR`` and ``REMAT_OP_TIMES``: pointing them into a fresh temporary directory keeps the tests off the user's
``~/.cache`` and off results and uploads another run left.
"""

import atexit
import os
import shutil
import tempfile

import pytest

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
# Two pytest workers and the servers, workers and commands they start share this machine's cores: PyTorch's
# OpenMP threads, one per core in every process, spun waiting for each other. Set before torch is imported.
os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(scope="session")
def app_url():
    """``streamlit run app.py`` on a free port, started once per test process for every browser module that
    drives the default app (a module that needs its own server, with its own upload folder, defines its own)."""
    from test_browser import require_chromium, serving

    require_chromium()
    with serving() as url:
        yield url

"""Quiet C libraries that write straight to file descriptor 2 (PyTorch's profiler prints its start and stop there)."""

from __future__ import annotations

import contextlib
import os
from typing import Iterator


@contextlib.contextmanager
def quiet_stderr() -> Iterator[None]:
    """File descriptor 2 sent to /dev/null while the block runs (Python's ``sys.stderr`` is left alone)."""
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)

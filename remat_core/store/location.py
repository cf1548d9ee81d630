"""Where the results store lives: ``--store PATH``, else ``REMAT_STORE``, else the user's cache directory.

The default is ``$XDG_CACHE_HOME/remat-explorer/results.sqlite`` (``~/.cache/remat-explorer/...``
when ``XDG_CACHE_HOME`` is unset). ``REMAT_STORE=off`` turns the store off where no flag can (the
explorer); on the command line ``--no-store`` does.
"""

from __future__ import annotations

import os
from pathlib import Path

STORE_ENV = "REMAT_STORE"
OFF = "off"
"""``REMAT_STORE=off``: no store."""
STORE_FILE = Path("remat-explorer") / "results.sqlite"


def default_store_path() -> Path:
    """The store file in the user's cache directory (``XDG_CACHE_HOME`` honoured)."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / STORE_FILE


def store_path(explicit: str | os.PathLike | None = None, disabled: bool = False) -> Path | None:
    """The store file to use: ``explicit`` (``--store``), else ``$REMAT_STORE``, else the default; None when off."""
    if disabled:
        return None
    if explicit is not None:
        return Path(explicit).expanduser()
    configured = os.environ.get(STORE_ENV, "").strip()
    if configured.lower() == OFF:
        return None
    return Path(configured).expanduser() if configured else default_store_path()

"""Op times measured where the model is traced, kept on disk by op and shape: a second trace costs nothing.

The ``measured`` cost model times every op of the joint graph on real tensors (the median of a few runs after a
warm-up; on CUDA with CUDA events). An op's time depends on its target, its arguments' shapes, strides and
dtypes, the device and the threads it runs on, and the torch build: that is its key. Times are kept in an SQLite
file, so that tracing the same model again (another process, a script's next start) reads them instead of running
anything, and the graph it gives has the same costs, the same content hash, and finds its plans in the results
store.

The file is ``$REMAT_OP_TIMES``, else ``$XDG_CACHE_HOME/remat-explorer/op-times.sqlite``; ``REMAT_OP_TIMES=off``
keeps nothing. A file that cannot be opened or written is left alone with a warning: times are then measured
afresh, as without a cache.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from pathlib import Path
from typing import Iterable, Mapping

import torch

OP_TIMES_ENV = "REMAT_OP_TIMES"
OP_TIMES_FILE = Path("remat-explorer") / "op-times.sqlite"
_log = logging.getLogger(__name__)


def op_times_path() -> Path | None:
    """The cache file to use (None: ``REMAT_OP_TIMES=off``)."""
    configured = os.environ.get(OP_TIMES_ENV, "").strip()
    if configured.lower() == "off":
        return None
    if configured:
        return Path(configured).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / OP_TIMES_FILE


def setting(device: torch.device) -> str:
    """What an op's time depends on beyond the op itself: the torch build, the device, the intra-op threads."""
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else f"cpu x{torch.get_num_threads()}"
    return f"torch {torch.__version__} on {where}"


class OpTimes:
    """The cache file, opened once per process and path (:func:`op_times`)."""

    def __init__(self, path: Path):
        self.path = path
        self._connection: sqlite3.Connection | None = None
        self._broken = False

    def _open(self) -> sqlite3.Connection | None:
        if self._connection is None and not self._broken:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                connection = sqlite3.connect(self.path, timeout=5.0, check_same_thread=False)
                connection.execute("CREATE TABLE IF NOT EXISTS op_times (key TEXT PRIMARY KEY, seconds REAL NOT NULL)")
                connection.commit()
                self._connection = connection
            except (sqlite3.Error, OSError) as error:
                _log.warning("warning: the op-time cache %s cannot be used (%s); op times are measured afresh",
                             self.path, error)
                self._broken = True
        return self._connection

    def get(self, keys: Iterable[str]) -> dict[str, float]:
        """The times kept for ``keys`` (those it has)."""
        connection = self._open()
        wanted = list(dict.fromkeys(keys))
        if connection is None or not wanted:
            return {}
        found: dict[str, float] = {}
        try:
            for start in range(0, len(wanted), 500):
                chunk = wanted[start:start + 500]
                rows = connection.execute(f"SELECT key, seconds FROM op_times WHERE key IN "
                                          f"({','.join('?' * len(chunk))})", chunk)
                found.update(rows)
        except sqlite3.Error as error:
            _log.warning("warning: reading the op-time cache %s failed (%s)", self.path, error)
        return found

    def put(self, times: Mapping[str, float]) -> None:
        """Keep ``times`` (an op measured twice keeps its first time: graphs traced again stay equal)."""
        connection = self._open()
        if connection is None or not times:
            return
        try:
            with connection:
                connection.executemany("INSERT OR IGNORE INTO op_times (key, seconds) VALUES (?, ?)", times.items())
        except sqlite3.Error as error:
            _log.warning("warning: writing the op-time cache %s failed (%s)", self.path, error)


_open_caches: dict[str, OpTimes] = {}


def op_times() -> OpTimes | None:
    """The cache this process is configured with (None: off)."""
    path = op_times_path()
    if path is None:
        return None
    return _open_caches.setdefault(str(path), OpTimes(path))

"""The results store: one SQLite file (WAL journal, busy timeout), no server.

One table, ``results``, one row per solve (:data:`SCHEMA` lists the columns); the primary key is
:attr:`ResultKey.digest`. A feasible result keeps its whole ``remat-schedule`` document
(zlib-compressed JSON, reasons and solver_info included) beside the peak, cost and overhead it was
measured at (for export and stats; whoever reads the schedule simulates it again).

The store is a cache: it never makes a command fail.

- A damaged file (not a database, truncated, malformed pages: found by SQLite's ``quick_check`` on
  open or by any later statement) is renamed ``<name>.damaged-<time>`` with its ``-wal``/``-shm``
  files, never deleted; a warning names both paths and a new store starts at the path.
- A store locked by another process longer than the busy timeout, a file that cannot be opened or
  written (permissions, a full disk), a database of another program or of another schema version:
  a warning says why, and the store is off for the rest of the process (every read misses, every
  write is skipped), so that no command waits on it twice.
- Writes are single statements, each its own transaction: a killed process leaves the rows it
  committed and nothing of the one it was writing. WAL lets readers go on while one process
  writes; concurrent writers queue on the busy timeout.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, TypeVar

from ..errors import RematError
from ..solvers import FEASIBLE
from .keys import ResultKey

MEMORY = ":memory:"
"""A store held in memory for one process (a run without a store file that still collects its results)."""
SCHEMA_VERSION = 1
APPLICATION_ID = 0x52454D58
"""Written into the SQLite header (``PRAGMA application_id``): marks a file as a Remat Explorer store."""
DEFAULT_BUSY_TIMEOUT = 5.0
"""Seconds to wait for another process's write before going on without the store."""
SCHEMA = (
    """CREATE TABLE IF NOT EXISTS results (
        key TEXT PRIMARY KEY,          -- ResultKey.digest
        graph_hash TEXT NOT NULL,      -- ComputeGraph.content_hash
        graph_name TEXT NOT NULL,
        solver TEXT NOT NULL,
        options TEXT NOT NULL,         -- canonical JSON, every declared option
        budget INTEGER NOT NULL,       -- bytes
        time_limit REAL,               -- seconds; NULL: none
        version TEXT NOT NULL,         -- the package version that solved it
        status TEXT NOT NULL,          -- feasible | infeasible
        peak INTEGER, cost REAL, overhead REAL,
        smallest_feasible INTEGER,
        detail TEXT NOT NULL,
        schedule BLOB,                 -- zlib(remat-schedule JSON) when feasible
        seconds REAL NOT NULL,         -- wall time of the solve
        created REAL NOT NULL          -- Unix time it was stored
    )""",
    "CREATE INDEX IF NOT EXISTS results_by_graph ON results (graph_hash)",
    "CREATE INDEX IF NOT EXISTS results_by_created ON results (created)",
)
EXPORT_COLUMNS = ("graph", "graph_hash", "solver", "options", "budget", "time_limit", "feasible", "status", "peak",
                  "cost", "overhead", "smallest_feasible", "seconds", "created", "version", "detail")
"""The columns of :meth:`ResultStore.rows` (one per result): ``store export`` writes them."""

_log = logging.getLogger(__name__)
T = TypeVar("T")


class StoreError(RematError):
    """A results store a command was asked to read or change (``store stats|export|prune``) is not usable."""


class _Damaged(Exception):
    """The store file is damaged (SQLite said so, or ``quick_check`` found a fault)."""


class _Unusable(Exception):
    """The file is a database the store must not touch: another program's, or another schema version's."""


@dataclass(frozen=True)
class StoredResult:
    """One stored solve.

    Attributes
    ----------
    status : str
        :data:`FEASIBLE` or :data:`INFEASIBLE`.
    schedule : dict or None
        The ``remat-schedule`` document of a feasible result (its stats as measured when stored).
    smallest_feasible : int or None
    detail : str
        Why an infeasible result is infeasible.
    seconds : float
        Wall time of the solve.
    created : float
        Unix time it was stored (0 until then).
    """

    status: str
    schedule: dict[str, Any] | None
    smallest_feasible: int | None = None
    detail: str = ""
    seconds: float = 0.0
    created: float = 0.0


class ResultStore:
    """An SQLite results store at ``path`` (created with its directory on first use; :data:`MEMORY` for none).

    Parameters
    ----------
    path : str or Path
    busy_timeout : float
        Seconds a statement waits for another process's write before the store turns off.

    Attributes
    ----------
    off_reason : str or None
        Why the store is off for this process (None while it works).
    """

    def __init__(self, path: str | os.PathLike, busy_timeout: float = DEFAULT_BUSY_TIMEOUT) -> None:
        self.path = MEMORY if str(path) == MEMORY else Path(path)
        self.busy_timeout = float(busy_timeout)
        self.off_reason: str | None = None
        self._connection: sqlite3.Connection | None = None
        self._inode: int | None = None
        self._guarded("open", lambda connection: None, None)

    def __repr__(self) -> str:
        return f"ResultStore({str(self.path)!r}{', off' if self.off_reason else ''})"

    @property
    def available(self) -> bool:
        return self.off_reason is None

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    # -- results --------------------------------------------------------------------------------

    def get(self, key: ResultKey) -> StoredResult | None:
        """The result stored under ``key`` (None when there is none, or the store is off)."""
        def read(connection: sqlite3.Connection) -> StoredResult | None:
            row = connection.execute("SELECT status, schedule, smallest_feasible, detail, seconds, created "
                                     "FROM results WHERE key = ?", (key.digest,)).fetchone()
            if row is None:
                return None
            status, blob, smallest, detail, seconds, created = row
            schedule = json.loads(zlib.decompress(blob)) if blob is not None else None
            return StoredResult(status, schedule, smallest, detail, seconds, created)
        try:
            return self._guarded("read a result", read, None)
        except (zlib.error, ValueError):  # a row that does not decode: as good as absent
            self.drop(key)
            return None

    def put(self, key: ResultKey, graph_name: str, result: StoredResult) -> bool:
        """Store ``result`` under ``key`` (replacing any), in one transaction; False when the store is off."""
        stats = (result.schedule or {}).get("stats", {})
        blob = zlib.compress(json.dumps(result.schedule, separators=(",", ":")).encode()) \
            if result.schedule is not None else None
        values = (key.digest, key.graph_hash, graph_name, key.solver, key.options, key.budget, key.time_limit,
                  key.version, result.status, stats.get("peak"), stats.get("cost"), stats.get("overhead"),
                  result.smallest_feasible, result.detail, blob, result.seconds, time.time())

        def write(connection: sqlite3.Connection) -> bool:
            connection.execute(f"INSERT OR REPLACE INTO results VALUES ({', '.join('?' * len(values))})", values)
            return True
        return self._guarded("store a result", write, False)

    def drop(self, key: ResultKey) -> None:
        """Forget the result under ``key``."""
        self._guarded("drop a result", lambda c: c.execute("DELETE FROM results WHERE key = ?", (key.digest,)), None)

    # -- the store as a whole -------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        """``{"path", "entries", "bytes", "graphs", "solvers": {name: entries}, "statuses", "oldest", "newest"}``."""
        def read(connection: sqlite3.Connection) -> dict[str, Any]:
            entries, graphs, oldest, newest = connection.execute(
                "SELECT count(*), count(DISTINCT graph_hash), min(created), max(created) FROM results").fetchone()
            return {"path": str(self.path), "entries": entries, "bytes": self._bytes(connection), "graphs": graphs,
                    "solvers": dict(connection.execute(
                        "SELECT solver, count(*) FROM results GROUP BY solver ORDER BY solver")),
                    "statuses": dict(connection.execute("SELECT status, count(*) FROM results GROUP BY status")),
                    "oldest": _iso(oldest), "newest": _iso(newest)}
        return self._required("read its statistics", read)

    def rows(self) -> list[dict[str, Any]]:
        """One plain row per result (:data:`EXPORT_COLUMNS`), by graph, solver and budget."""
        def read(connection: sqlite3.Connection) -> list[dict[str, Any]]:
            cursor = connection.execute(
                "SELECT graph_name, graph_hash, solver, options, budget, time_limit, status = ?, status, peak, cost, "
                "overhead, smallest_feasible, seconds, created, version, detail FROM results "
                "ORDER BY graph_name, graph_hash, solver, options, budget, time_limit", (FEASIBLE,))
            return [{**dict(zip(EXPORT_COLUMNS, row)), "feasible": bool(row[6]), "options": json.loads(row[3]),
                     "created": _iso(row[13])} for row in cursor]
        return self._required("export its results", read)

    def prune(self, *, older_than: float | None = None, graph: str | None = None, everything: bool = False) -> int:
        """Delete results stored more than ``older_than`` seconds ago, of graphs whose hash starts with
        ``graph``, or all of them; returns how many. The file is compacted afterwards when no other
        process is using it."""
        if sum((older_than is not None, graph is not None, everything)) != 1:
            raise StoreError("prune takes exactly one of --older-than AGE, --graph HASH and --all")
        if older_than is not None:
            where, args = "created < ?", (time.time() - older_than,)
        elif graph is not None:
            where, args = "substr(graph_hash, 1, ?) = ?", (len(graph), graph)
        else:
            where, args = "1", ()
        removed = self._required("prune it", lambda c: c.execute(f"DELETE FROM results WHERE {where}", args).rowcount)
        if removed and self.path != MEMORY:
            try:
                self._connection.execute("VACUUM")
            except sqlite3.OperationalError as e:  # another process reads it: the space is reused later instead
                _log.info("results store %s not compacted: %s", self.path, e)
        return removed

    def _bytes(self, connection: sqlite3.Connection) -> int:
        if self.path == MEMORY:
            return connection.execute("PRAGMA page_count").fetchone()[0] * \
                connection.execute("PRAGMA page_size").fetchone()[0]
        return sum(p.stat().st_size for p in (self.path, _beside(self.path, "-wal")) if p.exists())

    # -- opening, damage, locks -----------------------------------------------------------------

    def _required(self, what: str, operation: Callable[[sqlite3.Connection], T]) -> T:
        """``operation`` for a command about the store itself: a store that is off is an error there."""
        result = self._guarded(what, operation, None)
        if self.off_reason is not None:
            raise StoreError(self.off_reason)
        return result

    def _guarded(self, what: str, operation: Callable[[sqlite3.Connection], T], default: T) -> T:
        """``operation(connection)``; a damaged file is set aside and the operation tried once on a new
        store, any other failure turns the store off (with a warning) and gives ``default``."""
        for attempt in range(2):
            if self.off_reason is not None:
                return default
            try:
                if self._connection is None:
                    self._connection = self._connect()
                return operation(self._connection)
            except (sqlite3.DatabaseError, _Damaged) as error:
                self.close()
                if _is_damage(error) and attempt == 0 and self.path != MEMORY:
                    self._set_aside(error)
                    continue
                if not (_is_damage(error) or isinstance(error, sqlite3.OperationalError)):
                    raise  # a misuse of SQLite (ProgrammingError, IntegrityError...): a bug here, not the file
                self._turn_off(f"could not {what} ({_described(error, self.busy_timeout)})")
            except _Unusable as error:
                self.close()
                self._turn_off(str(error))
            except OSError as error:
                self.close()
                self._turn_off(f"could not {what} ({error.strerror or error})")
        return default

    def _connect(self) -> sqlite3.Connection:
        if self.path != MEMORY:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._inode = self.path.stat().st_ino if self.path.exists() else None
        connection = sqlite3.connect(str(self.path), timeout=self.busy_timeout, isolation_level=None)
        try:
            connection.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
            connection.execute("BEGIN")  # one snapshot: another process may be creating the store right now
            application_id = connection.execute("PRAGMA application_id").fetchone()[0]
            schema = connection.execute("PRAGMA user_version").fetchone()[0]
            tables = _tables(connection)
            connection.execute("COMMIT")
            if application_id != APPLICATION_ID and tables:
                raise _Unusable(f"{self.path} is an SQLite database of another program (tables: "
                                f"{', '.join(sorted(tables))}); it is left as it is: give --store another path")
            if application_id == APPLICATION_ID and schema != SCHEMA_VERSION:
                raise _Unusable(f"{self.path} was written by another version of Remat Explorer (store schema "
                                f"{schema}; this one reads {SCHEMA_VERSION}); it is left as it is: give --store "
                                f"another path")
            if self.path != MEMORY:
                check = connection.execute("PRAGMA quick_check").fetchall()
                if check != [("ok",)]:
                    raise _Damaged("; ".join(str(row[0]) for row in check[:3]))
                _retried_while_busy(lambda: connection.execute("PRAGMA journal_mode = WAL"), self.busy_timeout)
                connection.execute("PRAGMA synchronous = NORMAL")
            if "results" not in tables:
                connection.execute("BEGIN IMMEDIATE")
                if "results" not in _tables(connection):  # not created by another process meanwhile
                    for statement in SCHEMA:
                        connection.execute(statement)
                    connection.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                    connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                connection.execute("COMMIT")
            if self.path != MEMORY:
                self._inode = self.path.stat().st_ino
        except BaseException:
            connection.close()
            raise
        return connection

    def _set_aside(self, error: BaseException) -> None:
        """Rename the damaged file (and its ``-wal``/``-shm``) beside it, unless another process already did."""
        try:
            inode = self.path.stat().st_ino
        except FileNotFoundError:
            return
        if self._inode is not None and inode != self._inode:
            return  # another process has set it aside and started a new store already
        stamp = time.strftime("%Y%m%d-%H%M%S")
        aside = self.path.with_name(f"{self.path.name}.damaged-{stamp}")
        number = 1
        while aside.exists():
            number += 1
            aside = self.path.with_name(f"{self.path.name}.damaged-{stamp}-{number}")
        os.replace(self.path, aside)
        for suffix in ("-wal", "-shm"):
            if _beside(self.path, suffix).exists():
                os.replace(_beside(self.path, suffix), _beside(aside, suffix))
        self._inode = None
        _log.warning("warning: the results store %s is damaged (%s); it was moved to %s and a new store started",
                     self.path, error, aside)

    def _turn_off(self, reason: str) -> None:
        self.off_reason = f"the results store {self.path}: {reason}"
        _log.warning("warning: %s; going on without it", self.off_reason)


def _tables(connection: sqlite3.Connection) -> set[str]:
    return {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _retried_while_busy(statement: Callable[[], T], busy_timeout: float) -> T:
    """``statement()``, tried again while another connection holds the file busy, for up to ``busy_timeout``
    seconds: SQLite answers a change of journal mode with SQLITE_BUSY at once, without its busy handler."""
    deadline = time.monotonic() + busy_timeout
    while True:
        try:
            return statement()
        except sqlite3.OperationalError as error:
            if _primary_code(error) != sqlite3.SQLITE_BUSY or time.monotonic() >= deadline:
                raise
            time.sleep(0.01)


def _beside(path: Path, suffix: str) -> Path:
    return path.with_name(path.name + suffix)


def _is_damage(error: BaseException) -> bool:
    if isinstance(error, _Damaged):
        return True
    return _primary_code(error) in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)


def _primary_code(error: BaseException) -> int | None:
    """SQLite's primary result code of ``error`` (its extended code's low byte), None for other errors."""
    code = getattr(error, "sqlite_errorcode", None)
    return None if code is None else code & 0xFF


def _described(error: BaseException, busy_timeout: float) -> str:
    if _primary_code(error) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        return f"another process held it locked for more than {busy_timeout:g} s"
    return str(error)


def _iso(created: float | None) -> str | None:
    """Unix time as ISO 8601 UTC (``2026-01-31T12:00:00Z``)."""
    return None if created is None else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(created))

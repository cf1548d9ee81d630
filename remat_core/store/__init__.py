"""The results store: solves kept across runs and processes, in one SQLite file.

In: a graph, a solver with its options, a budget and a time limit. Out: the stored outcome of that
solve (its schedule simulated again), or a fresh one that is then stored. ``location`` says where
the file is (``--store``, ``REMAT_STORE``, the user's cache directory), ``keys`` what a result is
keyed by, ``database`` the file itself (schema, damage and lock handling, stats, export, prune),
``solving`` the read-before-solve, write-after path every user takes. Imports
:mod:`remat_core.graph`, :mod:`remat_core.schedule`, :mod:`remat_core.solvers`,
and :mod:`remat_core.errors`; only ``batch`` and
``cli`` import it. The Python front door :func:`remat_core.solve` never touches a store.
"""

from .database import DEFAULT_BUSY_TIMEOUT, EXPORT_COLUMNS, MEMORY, SCHEMA, ResultStore, StoredResult, StoreError
from .keys import ResultKey, package_version, result_key
from .location import STORE_ENV, default_store_path, store_path
from .solving import (CONFIGURED, FROM_STORE, STORED_AT, configured_store, lookup, record, simulated, stored_schedule,
                      stored_solve)

__all__ = ["CONFIGURED", "DEFAULT_BUSY_TIMEOUT", "default_store_path", "EXPORT_COLUMNS", "FROM_STORE", "lookup",
           "MEMORY", "package_version", "record", "result_key", "ResultKey", "ResultStore", "SCHEMA", "simulated",
           "stored_schedule", "stored_solve", "STORE_ENV", "STORED_AT", "StoredResult", "StoreError",
           "store_path", "configured_store"]

"""Many solves at once: grids of graphs x solvers x budgets through the results store, on a backend.

In: graphs, solvers, budgets, a :mod:`remat_core.store` store (or none) and a backend. Out: each
solve's outcome, comparison rows, and studies written as tables and Pareto figures. ``worker``
is the one worker layer (processes that get each graph once and run jobs on it, with progress and
a heartbeat; the explorer's lanes run on it too), ``cells`` the unit of work and how a worker
solves it, ``backends`` where cells run (``local``: this process or worker processes; ``ray``: a
local Ray or a cluster; Ray is imported only when that backend runs), ``grid`` the store-first loop (:func:`run_grid`, :func:`compare_on`), ``study``
the ``study`` command's grid and its outputs. Imports :mod:`remat_core.store`,
:mod:`remat_core.analysis`, :mod:`remat_core.viz`, :mod:`remat_core.solvers`,
:mod:`remat_core.schedule`, :mod:`remat_core.graph`, :mod:`remat_core.errors` and (to trace a zoo
model for a study) :mod:`remat_core.frontends`; only ``cli`` imports it.
"""

from .backends import BACKENDS, Backend, BackendError, InProcess, ProcessPool, RayCluster, open_backend
from .cells import Cell, solve_cell, solve_cell_job
from .grid import OnResult, compare_on, run_grid
from .study import STUDY_COLUMNS, Study, StudyRow, load_study_graph, run_study, study_cells, write_study
from .worker import SILENT, GraphCache, Reporter, WorkerProcess, WorkerStopped, portable_error, should_beat

__all__ = ["BACKENDS", "Backend", "BackendError", "Cell", "compare_on", "GraphCache", "InProcess", "load_study_graph",
           "OnResult", "open_backend", "portable_error", "ProcessPool", "RayCluster", "Reporter", "run_grid",
           "run_study", "should_beat", "SILENT", "solve_cell", "solve_cell_job", "Study", "study_cells",
           "STUDY_COLUMNS", "StudyRow", "WorkerProcess", "WorkerStopped", "write_study"]

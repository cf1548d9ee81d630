"""The server's lanes: which worker runs which work, shared by every session (``st.cache_resource``).

Five lanes, each one worker process (see :mod:`.lane` for why a process and how Cancel kills it):

- ``quick``: solves by the quick solvers (heuristics, the DTR family): a slider move's answer;
- ``search``: solves by the searching solvers (:attr:`remat_core.solvers.SolverSpec.searching`: auto, MILP,
  LP, CP-SAT), which run up to their time limit: a quick answer never waits behind one;
- ``sweep``: the quick solvers' Pareto sweeps;
- ``search-sweep``: the searching solvers' sweeps and Checkmate's LP bounds (an LP over a 200-node
  graph takes over a minute on two cores);
- ``torch``: runs on real tensors (PyTorch, on half the cores).

The sweep lanes run niced, so that on a busy machine the solves at the slider's budget and the app get the CPU
first. The search lane does not: ``auto``, the default solver, runs there, and its time limit is wall-clock
time (niced on a busy machine, it found less, or nothing, within it).
"""

from __future__ import annotations

import streamlit as st

from remat_core import SolveOutcome, get_solver

from .lane import Lane
from .tasks import share_cores

KEPT_OPS = 1_000_000
"""The solve lanes keep finished schedules up to this many ops each (packed, about 100 bytes an op, or
100 MB; a 10,000-node graph's schedule has ~25,000 ops), the least recently asked for dropped first.
A schedule unpacked by a page that needed it (the Timeline) costs five times that while it is kept."""
BACKGROUND_NICENESS = 10
"""The sweep lanes yield the CPU to the solves at the slider's budget and to the app."""
_started: list[Lane] = []


def _new_lane(name: str, **settings) -> Lane:
    lane = Lane(name, **settings)
    _started.append(lane)
    return lane


def outcome_ops(outcome: SolveOutcome) -> int:
    """What keeping a solve's outcome costs: its schedule's ops (1 without a schedule)."""
    return max(outcome.ops, 1)


@st.cache_resource(show_spinner=False)
def quick_lane() -> Lane:
    """Solves by the quick solvers: started at once, so the first slider move finds it warm."""
    return _new_lane("quick", kept_weight=KEPT_OPS, weigh=outcome_ops, warm=True)


@st.cache_resource(show_spinner=False)
def search_lane() -> Lane:
    """Solves by the searching solvers."""
    return _new_lane("search", kept_weight=KEPT_OPS, weigh=outcome_ops)


@st.cache_resource(show_spinner=False)
def sweep_lane() -> Lane:
    """The quick solvers' Pareto sweeps (niced): started at once, as every model opens with one."""
    return _new_lane("sweep", nice=BACKGROUND_NICENESS, warm=True)


@st.cache_resource(show_spinner=False)
def search_sweep_lane() -> Lane:
    """The searching solvers' sweeps and the LP bounds (niced)."""
    return _new_lane("search-sweep", nice=BACKGROUND_NICENESS)


@st.cache_resource(show_spinner=False)
def torch_lane() -> Lane:
    """Schedules run on real tensors (PyTorch in a worker of its own, on half the cores)."""
    return _new_lane("torch", initializer=share_cores)


LANES = (quick_lane, search_lane, sweep_lane, search_sweep_lane, torch_lane)


def solve_lane(solver: str) -> Lane:
    """The lane a solve by ``solver`` runs in."""
    return search_lane() if get_solver(solver).searching else quick_lane()


def solver_sweep_lane(solver: str) -> Lane:
    """The lane ``solver``'s Pareto sweep runs in."""
    return search_sweep_lane() if get_solver(solver).searching else sweep_lane()


def start_lanes() -> None:
    """Create the lanes that start warm (the frame calls this on every run; only the first does anything)."""
    quick_lane(), sweep_lane()


def stop_background_work() -> None:
    """Stop every lane started and forget their results; the next request starts fresh lanes."""
    while _started:
        _started.pop().stop()
    for lane in LANES:
        lane.clear()

"""The figures of one solve (memory timeline, lifetime chart), cached by the graph's content hash (the
graph itself is passed as ``_graph``)."""

from __future__ import annotations

import streamlit as st

from remat_core import ComputeGraph, Schedule
from remat_core.viz import lifetime_candidates, lifetime_chart, memory_timeline_figure

from ..jobs.results import solve_outcome


@st.cache_data(max_entries=32, show_spinner=False)
def memory_figure(graph_key: str, _graph: ComputeGraph, solver: str, budget: int, options: tuple,
                  time_limit: float | None, measured: tuple[int, ...] | None = None) -> dict:
    """The animated memory timeline of one solve (with the ``measured`` bytes after each op, when the
    schedule was run on real tensors), as a plotly dict."""
    return memory_timeline_figure(_graph, _feasible(_graph, solver, budget, options, time_limit),
                                  measured=measured).to_dict()


@st.cache_data(max_entries=32, show_spinner=False)
def lifetime_figure(graph_key: str, _graph: ComputeGraph, solver: str, budget: int, options: tuple,
                    time_limit: float | None, max_rows: int, recomputed_only: bool,
                    module: str | None) -> tuple[dict, int]:
    """The lifetime chart of one solve (rows as :func:`remat_core.viz.timeline.lifetime_candidates` picks
    them) as a plotly dict, and how many tensors could be shown."""
    schedule = _feasible(_graph, solver, budget, options, time_limit)
    total = len(lifetime_candidates(_graph, schedule, recomputed_only, module))
    return lifetime_chart(_graph, schedule, max_rows=max_rows, recomputed_only=recomputed_only,
                          module=module).to_dict(), total


def _feasible(graph: ComputeGraph, solver: str, budget: int, options: tuple, time_limit: float | None) -> Schedule:
    outcome = solve_outcome(graph, solver, budget, options, time_limit)
    if outcome.schedule is None:
        raise ValueError("the timeline figures need a feasible solve; check solve_outcome first")
    return outcome.schedule
